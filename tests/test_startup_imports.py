"""Loading the app imports no heavy module that only some code paths use: every command, web process and worker
would pay for it at django.setup() (litellm alone takes seconds). They are imported where they are used.

The same holds for the project's own heavy layers: the Celery app, the typed judge config (pydantic), the judge
engine and the services load when a command, page or task uses them, not when the admin registers its pages."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[1]
HEAVY_AT_USE = ("litellm", "openai", "rouge_score", "nltk", "sacrebleu", "sklearn", "scipy.stats", "pandas", "bm25s")
# Loaded by every process but only used by some: the engine's HTTP client, corpus search and the statistics.
NOT_AT_SETUP = ("httpx", "numpy", "scipy", "judging.tasks")
# Loaded where a command, page or task uses them: Celery (only to send or run a task), the config type, the engine.
PROJECT_AT_USE = (
    "celery",
    "kombu",
    "pydantic",
    "evalsite.celery",
    "judging.methods.judge_settings",
    "judging.config",
    "judging.services",
    "judging.engine.executor",
    "judging.factscore.services",
    "annotations.campaigns.setup",
    "annotations.campaigns.submissions",
    "annotations.datasets.importing",
)
# The modules that import the heavy ones where they use them; importing them must not load those.
USERS_OF_HEAVY = "import judging.llm.gateway, judging.methods.metrics, judging.services, judging.admin_forms"

PROGRAM = """
import json, sys
import django
django.setup()
print(json.dumps(sorted(sys.modules)))
"""


def modules_after(program: str) -> set[str]:
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="evalsite.settings", LITELLM_LOCAL_MODEL_COST_MAP="True")
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_django_setup_imports_no_heavy_module() -> None:
    loaded = modules_after(PROGRAM)
    assert "judging.admin" in loaded and "judging.models" in loaded  # the admin did register
    assert sorted(name for name in HEAVY_AT_USE if name in loaded) == []
    assert sorted(name for name in NOT_AT_SETUP if name in loaded) == []
    assert sorted(name for name in PROJECT_AT_USE if name in loaded) == []


def test_importing_the_modules_that_use_heavy_ones_loads_none() -> None:
    loaded = modules_after(PROGRAM.replace("django.setup()", f"django.setup()\n{USERS_OF_HEAVY}"))
    assert "judging.llm.gateway" in loaded and "judging.methods.metrics" in loaded and "judging.services" in loaded
    assert sorted(name for name in HEAVY_AT_USE if name in loaded) == []
    assert sorted(name for name in ("numpy", "scipy", "judging.tasks") if name in loaded) == []


def test_enqueueing_a_task_uses_the_project_celery_app() -> None:
    """A process that has not loaded Celery yet still sends through the app configured from the settings (its
    broker), never through Celery's unconfigured default app."""
    program = PROGRAM.replace(
        "django.setup()",
        "django.setup()\n"
        "from django.conf import settings\n"
        "from judging import enqueue\n"
        "sent = []\n"
        "from celery import Celery\n"
        "Celery.send_task = lambda app, name, *a, **k: sent.append((app.main, name, app.conf.broker_url))\n"
        "enqueue.run_task_enqueue(enqueue.JUDGE_RUN_WORK, 7)\n"
        "assert sent == [('evalsite', 'judging.judge_run_work', settings.CELERY_BROKER_URL)], sent",
    )
    assert "evalsite.celery" in modules_after(program)


@pytest.mark.parametrize(
    ("use", "module"),
    [
        (
            "from judging.llm.gateway import provider_of; assert provider_of('openai/gpt-4o-mini') == 'openai'",
            "litellm",
        ),
        ("from judging.methods.metrics import compute; assert compute('rougeL', 'a b c', 'a b d') > 0", "rouge_score"),
        ("from judging.methods.metrics import compute; assert compute('chrf', 'a b c', 'a b d') > 0", "sacrebleu"),
    ],
)
def test_heavy_module_is_loaded_on_first_use(use: str, module: str) -> None:
    assert module in modules_after(PROGRAM.replace("django.setup()", f"django.setup()\n{use}"))


def run_manage(*args: str, **extra_env: str) -> str:
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="evalsite.settings", LITELLM_LOCAL_MODEL_COST_MAP="True")
    env.pop("OPENBLAS_NUM_THREADS", None)
    env.update(extra_env)
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_a_command_runs_with_the_collector_on_and_start_up_frozen_out_of_it() -> None:
    """manage.py keeps the cyclic collector off only while the process starts; the command itself runs with it on."""
    probe = "import gc; print(gc.isenabled(), gc.get_freeze_count() > 1000)"
    assert run_manage("shell", "-c", probe) == "True True"


@pytest.mark.parametrize(("environment", "threads"), [({}, "1"), ({"OPENBLAS_NUM_THREADS": "2"}, "2")])
def test_blas_runs_one_thread_unless_the_environment_says_otherwise(environment: dict[str, str], threads: str) -> None:
    probe = (
        "import numpy; from threadpoolctl import threadpool_info; "
        "print(*[pool['num_threads'] for pool in threadpool_info() if pool['user_api'] == 'blas'])"
    )
    assert run_manage("shell", "-c", probe, **environment) == threads

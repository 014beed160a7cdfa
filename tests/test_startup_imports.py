"""Loading the app imports no heavy module that only some code paths use: every command, web process and worker
would pay for it at django.setup() (litellm alone takes seconds). They are imported where they are used."""

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
    assert "judging.llm.gateway" in loaded and "judging.methods.metrics" in loaded  # the modules that use them
    assert sorted(name for name in HEAVY_AT_USE if name in loaded) == []
    assert sorted(name for name in NOT_AT_SETUP if name in loaded) == []


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

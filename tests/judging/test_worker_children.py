"""A worker killed with SIGKILL leaves no process of its own behind.

The deployed worker runs with --beat (docker-compose.yml), which starts the periodic-task scheduler as a child
process. The test starts that worker for real, finds the child through /proc, kills the worker with SIGKILL, as a
crash or the OOM killer would, and waits for the child to be gone."""

import os
import signal
import subprocess
from pathlib import Path

import pytest

from judging.management.worker import worker_command
from tests.conftest import PROJECT_ROOT, database_url_for_subprocess, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def children_of(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text()
        found.update(int(child) for child in text.split())
    return found


def alive(pid: int) -> bool:
    """Running, and not a zombie that nobody reaped (in a container PID 1 may not reap orphans)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_the_scheduler_child_dies_with_a_killed_worker(redis_broker: str, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "DATABASE_URL": database_url_for_subprocess(),
        "CELERY_BROKER_URL": redis_broker,
        "DJANGO_SETTINGS_MODULE": "evalsite.settings",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    with open(tmp_path / "worker.log", "wb") as log:
        worker = subprocess.Popen(
            worker_command(
                *("--beat", "--loglevel=INFO", "--concurrency=2", "--without-heartbeat"),
                *("--schedule", str(tmp_path / "celerybeat-schedule")),
            ),
            cwd=PROJECT_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    children: set[int] = set()
    try:
        wait_for(lambda: "beat: Starting" in (tmp_path / "worker.log").read_text(errors="replace"), timeout=90)
        children = children_of(worker.pid)
        assert children, "the worker started no scheduler process"
        worker.kill()
        worker.wait(timeout=30)
        wait_for(lambda: not any(alive(child) for child in children), timeout=30, message="the orphans to stop")
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(timeout=30)
        for child in children:
            if alive(child):
                os.kill(child, signal.SIGKILL)

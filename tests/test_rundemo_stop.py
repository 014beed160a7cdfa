"""Stopping the README's demo server with a signal stops its Celery worker too: the demo is run as the README runs it
(embedded SQLite and the SQLAlchemy broker), and after SIGTERM or SIGHUP to the parent no worker process is left."""

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from tests.fakeprovider import free_port

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def _wait_for_line(process: subprocess.Popen[str], prefix: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        if line.startswith(prefix):
            return line
    raise AssertionError(f"rundemo never printed a line starting {prefix!r}")


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_to_rundemo_stops_its_worker(tmp_path: Path, stop_signal: signal.Signals) -> None:
    port = free_port()
    env = {key: value for key, value in os.environ.items() if key not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(
        EVALSITE_VAR_DIR=str(tmp_path),
        CELERY_BROKER_URL=f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        PYTHONUNBUFFERED="1",
    )
    demo = subprocess.Popen(
        [sys.executable, "manage.py", "rundemo", "--addrport", f"127.0.0.1:{port}"],
        cwd=PROJECT_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        started = _wait_for_line(demo, "celery worker started (pid ", timeout=240)
        worker_pid = int(started.split("(pid ")[1].split(")")[0])
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=5) as page:
                    assert page.status == 200
                break
            except OSError:
                assert time.monotonic() < deadline, "the demo server never answered"
                time.sleep(0.3)
        worker = psutil.Process(worker_pid)
        assert worker.is_running()
        demo.send_signal(stop_signal)
        assert demo.wait(timeout=30) == 128 + stop_signal
        gone, alive = psutil.wait_procs([worker], timeout=30)
        assert not alive, f"the Celery worker (pid {worker_pid}) outlived rundemo"
        assert gone == [worker]
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()

"""The project's own processes as the commands, benchmarks and tests that start them do: a Celery worker's command
line, and stopping a started process."""

from __future__ import annotations

import subprocess  # nosec B404 - stops processes this project started
import sys


def worker_command(*options: str) -> list[str]:
    """`celery -A evalsite worker` under this interpreter, on threads, without the gossip and start-up mingling with
    other workers that a worker started on its own has no use for; `options` follow."""
    return [
        sys.executable,
        *("-m", "celery", "-A", "evalsite", "worker"),
        *("--pool=threads", "--without-gossip", "--without-mingle"),
        *options,
    ]


def process_stop(process: subprocess.Popen[bytes], *, timeout_s: float) -> None:
    """Asked to stop; killed when it has not within `timeout_s`."""
    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=timeout_s)

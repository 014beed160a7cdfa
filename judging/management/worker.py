"""The command line of a Celery worker of this project, for the command, benchmarks and tests that start their own."""

from __future__ import annotations

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

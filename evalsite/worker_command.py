"""How a worker of the project's Celery app is started, for the scripts and tests that start their own."""

import sys

# A worker on its own: it neither announces itself to, nor syncs with, nor watches other workers, which a test or a
# measurement would otherwise wait on.
STANDALONE_WORKER_OPTIONS = ("--without-gossip", "--without-mingle", "--without-heartbeat")


def celery_worker_command(*options: str) -> list[str]:
    return [sys.executable, "-m", "celery", "-A", "evalsite", "worker", *options]

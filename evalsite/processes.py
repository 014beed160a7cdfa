"""Starting and stopping the project's own processes (a Celery worker, a server) from the scripts and tests that run
their own."""

import subprocess
import sys

# A worker on its own: it neither announces itself to, nor syncs with, nor watches other workers, which a test or a
# measurement would otherwise wait on.
STANDALONE_WORKER_OPTIONS = ("--without-gossip", "--without-mingle", "--without-heartbeat")


def celery_worker_command(*options: str) -> list[str]:
    return [sys.executable, "-m", "celery", "-A", "evalsite", "worker", *options]


def process_stop(process: "subprocess.Popen[bytes]", *, timeout_s: float) -> None:
    """Asked to stop; killed when it has not within `timeout_s`."""
    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=timeout_s)

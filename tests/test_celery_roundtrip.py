"""A real `celery -A evalsite worker` process runs judging.tasks.worker_ping on Redis and on the embedded
SQLAlchemy/SQLite broker, and the enqueuing side talks to the same broker as the worker."""

import time
import uuid
from pathlib import Path

import pytest

from evalsite.celery import app
from judging.models import WorkerPing
from judging.tasks import worker_ping
from tests.conftest import WorkerProcess, redis_broker_url


def ping_through(worker: WorkerProcess, broker_url: str, timeout: float = 120.0) -> WorkerPing:
    token = f"ping-{uuid.uuid4().hex}"
    with app.connection_for_write(broker_url) as connection:
        worker_ping.apply_async(args=[token], connection=connection)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ping = WorkerPing.objects.filter(token=token).first()
        if ping is not None:
            return ping
        assert worker.process is not None and worker.process.poll() is None, f"worker exited:\n{worker.log()[-4000:]}"
        time.sleep(0.2)
    raise AssertionError(f"no WorkerPing {token} after {timeout}s; worker log:\n{worker.log()[-4000:]}")


@pytest.mark.django_db(transaction=True)
def test_task_round_trip_on_redis(celery_worker_factory) -> None:  # type: ignore[no-untyped-def]
    broker_url = redis_broker_url()
    worker = celery_worker_factory(broker_url=broker_url, concurrency=1)
    ping = ping_through(worker, broker_url)
    assert ping.worker_hostname
    # A second task on the warm worker proves it keeps consuming, not just one message at start-up.
    assert ping_through(worker, broker_url, timeout=30).token != ping.token


@pytest.mark.django_db(transaction=True)
def test_task_round_trip_on_embedded_broker(celery_worker_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    broker_url = f"sqla+sqlite:///{tmp_path}/broker.sqlite3"
    worker = celery_worker_factory(broker_url=broker_url, concurrency=1)
    ping = ping_through(worker, broker_url)
    assert ping.worker_hostname
    assert (tmp_path / "broker.sqlite3").exists()

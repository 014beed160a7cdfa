"""Launching and waiting from the command line through an outage of the broker or the database.

Each test runs a broker (redis-server) of its own, and the second also a Postgres cluster of its own, on free ports,
and stops them mid-launch or mid-run; the machine's shared Redis and Postgres are never touched. A real Celery worker
does the work against the local fake provider.
"""

import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.core.management import call_command

from judging.models import JudgeRun, RunStatus
from tests.conftest import PROJECT_ROOT, WorkerProcess, wait_for
from tests.fakeprovider import FakeProvider
from tests.judging.factories import make_dataset
from tests.judging.private_redis import PrivateRedis
from tests.judging.test_outages_postgres import PrivatePostgres, _env, _manage, _query
from tests.judging.test_worker_runs import WORKER_ENV, cfg


@pytest.fixture
def own_postgres() -> Iterator[PrivatePostgres]:
    cluster = PrivatePostgres().init()
    yield cluster
    cluster.destroy()


def _supervised(start: Callable[[], WorkerProcess]) -> Callable[[], None]:
    """Celery's worker can exit on losing a Redis broker while it holds unacknowledged messages; like the supervisor
    of a deployment, the test starts it again when it does."""
    workers = [start()]

    def check() -> None:
        process = workers[-1].process
        if process is not None and process.poll() is not None:
            workers.append(start())

    check.workers = workers  # type: ignore[attr-defined]
    return check


@pytest.mark.django_db(transaction=True)
def test_a_launch_with_the_broker_down_says_so_and_the_run_completes_once_it_is_back(
    fake_provider: FakeProvider, private_redis: PrivateRedis, celery_worker_factory, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    env = {**WORKER_ENV, "CELERY_BROKER_URL": private_redis.url, "REDIS_URL": private_redis.url}
    supervise = _supervised(lambda: celery_worker_factory(broker_url=private_redis.url, extra_env=env))
    dataset = make_dataset(items=5, systems=2, name="launch in an outage")
    config = tmp_path / "judge.json"
    config.write_text(json.dumps(cfg(fake_provider)))
    private_redis.stop()
    out, err = io.StringIO(), io.StringIO()
    call_command("judge", "--dataset", dataset.name, "--config", str(config), stdout=out, stderr=err)
    run = JudgeRun.objects.get(dataset=dataset)
    assert f"launched judge run {run.name!r} (id {run.pk}): 10 unit(s)" in out.getvalue()
    message = err.getvalue()
    assert "is saved, but the task queue (broker) could not be reached" in message
    assert "starts by itself once the broker is back" in message
    assert "Traceback" not in message and "OperationalError" not in message
    assert run.status == RunStatus.QUEUED and run.start_unsent_at is not None

    private_redis.start()

    def run_finished() -> bool:
        supervise()
        run.refresh_from_db()
        return run.status not in (RunStatus.QUEUED, RunStatus.RUNNING)

    wait_for(run_finished, timeout=120, message="the run to start and finish once the broker is back")
    assert (run.status, run.done, run.failed) == (RunStatus.SUCCEEDED, 10, 0)
    assert run.start_unsent_at is None


CREATE_DATASET = """
from tests.judging.factories import make_dataset
make_dataset(items=60, systems=4, name="wait through outages")
"""


def test_judge_wait_rides_out_a_broker_stop_and_a_database_restart(
    fake_provider: FakeProvider, own_postgres: PrivatePostgres, tmp_path: Path
) -> None:
    fake_provider.script(default={"latency": 0.25})
    broker = PrivateRedis(tmp_path).start()
    env = _env(own_postgres, broker)
    _manage(env, "migrate", "--noinput")
    _manage(env, "shell", "-c", CREATE_DATASET)
    supervise = _supervised(lambda: WorkerProcess(broker.url, {**env, "DATABASE_URL": own_postgres.url()}).start())
    config = tmp_path / "judge.json"
    config.write_text(json.dumps(cfg(fake_provider, max_concurrency=8)))
    log_path = tmp_path / "judge-wait.log"
    with open(log_path, "wb") as log:
        waiting = subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                "judge",
                *("--dataset", "wait through outages", "--config", str(config), "--wait", "--poll", "0.2"),
            ],
            cwd=PROJECT_ROOT,
            env={**os.environ, "DJANGO_SETTINGS_MODULE": "evalsite.settings", **env},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        done_sql = "SELECT coalesce(max(done), 0) FROM judging_judgerun"

        def done_at_least(n: int) -> Callable[[], bool]:
            def check() -> bool:
                supervise()
                return (_query(own_postgres, done_sql) or [(0,)])[0][0] >= n

            return check

        wait_for(done_at_least(30), timeout=300, message="30 units done")
        broker.stop()
        time.sleep(10)
        broker.start()
        wait_for(done_at_least(80), timeout=300, message="80 units done after the broker came back")
        own_postgres.stop()
        time.sleep(5)
        own_postgres.start()
        deadline = time.monotonic() + 300
        while waiting.poll() is None and time.monotonic() < deadline:
            supervise()
            time.sleep(0.5)
        output = log_path.read_text(errors="replace")
        assert waiting.returncode == 0, output[-3000:]
        assert "Traceback" not in output
        assert "database unreachable" in output and "database back after" in output
        assert "run 'worker-judge' succeeded" in output
        status, total, done = _query(own_postgres, "SELECT status, total, done FROM judging_judgerun")[0]  # type: ignore[index]
        assert (status, done) == ("succeeded", total) and total == 240
    finally:
        if waiting.poll() is None:
            waiting.kill()
        for worker in supervise.workers:  # type: ignore[attr-defined]
            worker.stop()
        broker.stop()

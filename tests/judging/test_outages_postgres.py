"""A database restart in the middle of a judge run fails no unit and throws away no paid response.

The test starts a Postgres cluster of its own (initdb and pg_ctl into a temporary directory, on a free port), migrates
it, launches a run there with the management shell and a real Celery worker, restarts that cluster once mid-run and
reads the outcome with SQL. The machine's shared Postgres is never touched.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.conftest import PROJECT_ROOT, WorkerProcess, wait_for
from tests.fakeprovider import FakeProvider, free_port
from tests.judging.private_redis import PrivateRedis
from tests.judging.test_worker_runs import WORKER_ENV, cfg

PG_BIN = Path("/usr/lib/postgresql/15/bin")


class PrivatePostgres:
    """A throw-away cluster; as root, its commands run as the postgres user (initdb refuses root)."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="evalsite-outage-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres")

    def _run(self, *args: str) -> None:
        command = [str(PG_BIN / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    def url(self, database: str = "evalsite") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def init(self) -> "PrivatePostgres":
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        self.start()
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute("CREATE DATABASE evalsite")
        return self

    def start(self) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-o", options, "-w", "start")

    def stop(self) -> None:
        """Fast shutdown: every open connection is cut, as in a restart or failover of the server."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def destroy(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def private_postgres() -> Iterator[PrivatePostgres]:
    cluster = PrivatePostgres().init()
    yield cluster
    cluster.destroy()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path).start()
    yield server
    server.stop()


def _env(cluster: PrivatePostgres, server: PrivateRedis) -> dict[str, str]:
    # A lease longer than the restart: the slice that holds a unit's result is the one that stores it.
    return {
        **WORKER_ENV,
        "JUDGE_LEASE_S": "20",
        "DATABASE_URL": cluster.url(),
        "CELERY_BROKER_URL": server.url,
        "REDIS_URL": server.url,
    }


def _manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=PROJECT_ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "evalsite.settings", **env},
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return result.stdout


LAUNCH = """
import json, os
from judging import services
from tests.judging.factories import make_dataset
dataset = make_dataset(items=50, systems=4)
run = services.judge_run_launch(dataset=dataset, config=json.loads(os.environ["OUTAGE_CONFIG"]), launched_by=None)
print(run.pk)
"""


def _query(cluster: PrivatePostgres, sql: str, *params: Any) -> list[tuple[Any, ...]] | None:
    """Rows, or None while the cluster does not answer."""
    try:
        with psycopg.connect(cluster.url(), connect_timeout=2) as conn:
            return conn.execute(sql, params).fetchall()
    except psycopg.OperationalError:
        return None


def _one(cluster: PrivatePostgres, sql: str, *params: Any) -> Any:
    rows = _query(cluster, sql, *params)
    assert rows is not None, "the private Postgres does not answer"
    return rows[0][0]


def test_postgres_restart_mid_run(
    fake_provider: FakeProvider, private_postgres: PrivatePostgres, broker: PrivateRedis
) -> None:
    fake_provider.script(default={"latency": 0.25})
    env = _env(private_postgres, broker)
    _manage(env, "migrate", "--noinput")
    worker = WorkerProcess(broker.url, env).start()
    try:
        config = json.dumps(cfg(fake_provider, max_concurrency=8))
        run_id = int(_manage({**env, "OUTAGE_CONFIG": config}, "shell", "-c", LAUNCH).strip().splitlines()[-1])
        done_sql = "SELECT done FROM judging_judgerun WHERE id = %s"
        wait_for(lambda: (_query(private_postgres, done_sql, run_id) or [(0,)])[0][0] >= 40, timeout=90)
        in_flight = _one(
            private_postgres, "SELECT count(*) FROM judging_judgment WHERE run_id = %s AND status = 'claimed'", run_id
        )
        private_postgres.stop()
        calls_before = fake_provider.snapshot()["calls"]
        time.sleep(5)
        assert fake_provider.snapshot()["calls"] > calls_before  # calls in flight went on while the database was away
        private_postgres.start()

        status_sql = "SELECT status FROM judging_judgerun WHERE id = %s"
        wait_for(
            lambda: (_query(private_postgres, status_sql, run_id) or [("running",)])[0][0] not in ("queued", "running"),
            timeout=180,
            message="the run to finish after the restart",
        )
        status, total, done, failed, calls = _query(
            private_postgres, "SELECT status, total, done, failed, calls FROM judging_judgerun WHERE id = %s", run_id
        )[0]  # type: ignore[index]
        assert (status, done, failed) == ("succeeded", total, 0)
        assert total == 200
        statuses = dict(
            _query(  # type: ignore[arg-type]
                private_postgres,
                "SELECT status, count(*) FROM judging_judgment WHERE run_id = %s GROUP BY status",
                run_id,
            )
        )
        assert statuses == {"done": 200}
        assert not _query(
            private_postgres,
            "SELECT response_id, aspect_name, sample FROM judging_judgment WHERE run_id = %s "
            "GROUP BY 1, 2, 3 HAVING count(*) > 1",
            run_id,
        )
        successes = fake_provider.successes_per_request()
        assert len(successes) == total
        assert max(successes.values()) <= 2
        assert sum(n - 1 for n in successes.values()) <= in_flight
        assert calls == sum(fake_provider.attempts_per_request().values())
        assert "database unreachable" in worker.log()  # the slices really met the restart
    finally:
        worker.stop()

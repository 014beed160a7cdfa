"""Shared fixtures: the fixed cast of users, and a real Celery worker bound to the test database."""

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import pytest
import redis
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.utils import translation

from annotations.roles import adjudicator_grant
from bench.cli_startup import lone_worker_command
from evalsite.celery import app
from judging import tasks as judging_tasks  # noqa: F401 - registers the tasks for the tests that run them eagerly
from judging.hybrid import tasks as hybrid_tasks  # noqa: F401 - the same for the hybrid campaigns' task

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

PROJECT_ROOT = Path(__file__).resolve().parent.parent
CAST_PASSWORD = "correct-horse-battery-staple-42"


@pytest.fixture(autouse=True)
def _site_language_between_tests() -> Iterator[None]:
    """The test client runs LocaleMiddleware in the test's own thread, and the language a request activates stays
    active in that thread: each test starts and ends in the site's language so one Japanese request cannot change
    what a later test reads."""
    translation.activate(settings.LANGUAGE_CODE)
    yield
    translation.activate(settings.LANGUAGE_CODE)


def _make_user(username: str, *, staff: bool = False) -> User:
    return User.objects.create_user(
        username=username, password=CAST_PASSWORD, is_staff=staff, email=f"{username}@example.test"
    )


def client_for(user: User | None, csrf: bool = False) -> Client:
    """A test client logged in as `user`, or anonymous; with `csrf`, one that checks CSRF tokens as a browser's
    requests are checked."""
    client = Client(enforce_csrf_checks=csrf)
    if user is not None:
        client.force_login(user)
    return client


def login(user: User) -> Client:
    """A test client that signed in with the cast's password, through the authentication backends."""
    client = Client()
    assert client.login(username=user.username, password=CAST_PASSWORD)
    return client


@pytest.fixture
def researcher(db: None) -> User:
    return _make_user("researcher", staff=True)


@pytest.fixture
def other_researcher(db: None) -> User:
    return _make_user("researcher2", staff=True)


@pytest.fixture
def annotator1(db: None) -> User:
    return _make_user("annotator1")


@pytest.fixture
def annotator2(db: None) -> User:
    return _make_user("annotator2")


@pytest.fixture
def annotator3(db: None) -> User:
    return _make_user("annotator3")


@pytest.fixture
def annotators(annotator1: User, annotator2: User, annotator3: User) -> list[User]:
    return [annotator1, annotator2, annotator3]


@pytest.fixture
def outsider(db: None) -> User:
    return _make_user("outsider")


@pytest.fixture
def adjudicator(db: None) -> User:
    return adjudicator_grant(user=User.objects.create_user("adjudicator1", password="pw-adjudicator-1"))


def database_url_for_subprocess() -> str:
    """A DATABASE_URL pointing a child process at the database pytest-django created for this run."""
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    user = db.get("USER") or "postgres"
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    return f"postgres://{user}{password}@{host}:{port}/{db['NAME']}"


def gunicorn_env(tmp_path: Path, port: int, **extra: str) -> dict[str, str]:
    """The environment of a gunicorn child serving this project on `port`, with its own unused SQLite database and
    no broker."""
    env = dict(os.environ)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "evalsite.settings",
            "DEBUG": "false",
            "DATABASE_URL": f"sqlite:///{tmp_path / 'unused.sqlite3'}",
            "GUNICORN_BIND": f"127.0.0.1:{port}",
            "WEB_WORKERS": "1",
            "WEB_THREADS": "2",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            **extra,
        }
    )
    env.pop("CELERY_BROKER_URL", None)
    return env


@contextmanager
def gunicorn_serving(tmp_path: Path, port: int, *args: str, **extra_env: str) -> Iterator[subprocess.Popen[bytes]]:
    """A gunicorn child serving this project on `port` in gunicorn_env's environment, with the extra command-line
    arguments, writing its own output to tmp_path/gunicorn.log; stopped on leaving."""
    with open(tmp_path / "gunicorn.log", "wb") as log:  # the child keeps its own copy of the descriptor
        server = subprocess.Popen(
            [str(Path(sys.executable).with_name("gunicorn")), "--config", "python:evalsite.gunicorn_config", *args],
            cwd=PROJECT_ROOT,
            env=gunicorn_env(tmp_path, port, **extra_env),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        yield server
    finally:
        server.terminate()
        server.wait(timeout=20)


def until_served(server: subprocess.Popen[bytes], tmp_path: Path, attempt: Callable[[], None]) -> None:
    """Repeats `attempt` while it cannot connect, until it succeeds; a server that died or did not answer within a
    minute fails the test with its log."""
    deadline = time.monotonic() + 60
    while True:
        try:
            attempt()
            return
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                raise AssertionError((tmp_path / "gunicorn.log").read_text(errors="replace")) from None
            time.sleep(0.2)


class WorkerProcess:
    def __init__(self, broker_url: str, extra_env: dict[str, str] | None = None, concurrency: int = 4) -> None:
        self.broker_url = broker_url
        self.extra_env = extra_env or {}
        self.concurrency = concurrency
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = PROJECT_ROOT / "tests" / "artifacts" / f"worker-{uuid.uuid4().hex[:8]}.log"

    def start(self) -> "WorkerProcess":
        env = dict(os.environ)
        env.update(
            {
                "DATABASE_URL": database_url_for_subprocess(),
                "CELERY_BROKER_URL": self.broker_url,
                "DJANGO_SETTINGS_MODULE": "evalsite.settings",
                "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            }
        )
        env.update(self.extra_env)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:  # the child keeps its own copy of the descriptor
            self.process = self._spawn(env, log)
        return self

    def _spawn(self, env: dict[str, str], log: IO[bytes]) -> "subprocess.Popen[bytes]":
        return subprocess.Popen(
            lone_worker_command(concurrency=self.concurrency),
            cwd=PROJECT_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def kill(self) -> None:
        """SIGKILL: the worker gets no chance to clean up, as in a crash."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@pytest.fixture
def celery_worker_factory(transactional_db: None) -> Iterator:
    started: list[WorkerProcess] = []

    def start(
        *, broker_url: str | None = None, extra_env: dict[str, str] | None = None, concurrency: int = 4
    ) -> WorkerProcess:
        worker = WorkerProcess(broker_url or settings.CELERY_BROKER_URL, extra_env, concurrency).start()
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


@pytest.fixture
def celery_worker(celery_worker_factory) -> WorkerProcess:  # type: ignore[no-untyped-def]
    return celery_worker_factory()


def redis_broker_url() -> str:
    # CI's Postgres pass exports a Redis CELERY_BROKER_URL; a run on the embedded broker uses the local server
    # (TEST_REDIS_BROKER_URL picks the database, which the tests flush).
    configured = os.environ.get("CELERY_BROKER_URL", settings.CELERY_BROKER_URL)
    if configured.startswith(("redis://", "rediss://")):
        return configured
    return os.environ.get("TEST_REDIS_BROKER_URL", "redis://127.0.0.1:6379/0")


def _empty_broker(broker_url: str) -> None:
    if broker_url.startswith(("redis://", "rediss://")):
        # The whole database: the judge limiter keeps its state next to the queues.
        redis.Redis.from_url(broker_url).flushdb()
    else:
        with app.connection_for_write(broker_url) as connection:
            app.control.purge(connection=connection)


@pytest.fixture
def clean_broker() -> Iterator[None]:
    """Start and end the test with an empty queue (and, on Redis, no limiter state) on the configured broker."""
    _empty_broker(settings.CELERY_BROKER_URL)
    yield
    _empty_broker(settings.CELERY_BROKER_URL)


def _point_app_at(broker_url: str) -> None:
    app.conf.broker_url = broker_url
    # The app keeps the connection and producer pools of the broker it first used; drop them so the next enqueue
    # opens pools on the new one. Not closed: kombu's shared producer pools may still hand out their connections.
    app._pool = None
    app.amqp._producer_pool = None


@pytest.fixture
def redis_broker(settings) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """Enqueue to and start workers on Redis for one test, whatever the configured broker: what is shared across
    workers only through Redis (the judge limiter) needs a Redis broker."""
    broker_url = redis_broker_url()
    previous = app.conf.broker_url
    settings.CELERY_BROKER_URL = broker_url
    _point_app_at(broker_url)
    _empty_broker(broker_url)
    yield broker_url
    _empty_broker(broker_url)
    _point_app_at(previous)


def wait_for(predicate, *, timeout: float = 30.0, interval: float = 0.1, message: str = "condition") -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message}")


@pytest.fixture
def eager() -> Iterator[None]:
    """Celery tasks run in the test's own thread, for tests that are about the work rather than the worker."""
    previous = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = previous


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium through Playwright, one per test module (browser tests only load Playwright)."""
    from playwright.sync_api import sync_playwright

    from tests.chromium import launch_chromium

    with sync_playwright() as playwright:
        instance = launch_chromium(playwright)
        yield instance
        instance.close()

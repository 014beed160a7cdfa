from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from tests.conftest import _make_user, _point_app_at
from tests.fakeprovider import FakeProvider
from tests.judging.private_redis import PrivateRedis


@pytest.fixture(scope="session")
def _fake_provider_server() -> Iterator[FakeProvider]:
    provider = FakeProvider().start()
    yield provider
    provider.stop()


@pytest.fixture
def fake_provider(_fake_provider_server: FakeProvider, settings) -> Iterator[FakeProvider]:  # type: ignore[no-untyped-def]
    """The local OpenAI-compatible server, reset for each test; 127.0.0.1 is allowlisted."""
    _fake_provider_server.reset()
    settings.JUDGE_API_BASE_ALLOWLIST = ["127.0.0.1"]
    settings.JUDGE_RETRY_BASE_S = 0.02
    settings.JUDGE_RETRY_CAP_S = 0.2
    settings.JUDGE_API_KEY_HOSTS = {"EVALSITE_FAKE_KEY": [_fake_provider_server.base_url]}
    yield _fake_provider_server
    _fake_provider_server.reset()


@pytest.fixture
def annotator(db: None) -> User:
    return _make_user("annotator")


@pytest.fixture
def private_redis(tmp_path: Path, settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[PrivateRedis]:  # type: ignore[no-untyped-def]
    """A private redis-server that this process and the worker use as broker and limiter."""
    server = PrivateRedis(tmp_path).start()
    previous = settings.CELERY_BROKER_URL
    # Celery reads CELERY_BROKER_URL from the environment before its own configuration.
    monkeypatch.setenv("CELERY_BROKER_URL", server.url)
    settings.CELERY_BROKER_URL = settings.REDIS_URL = server.url
    settings.BROKER_IS_REDIS = True
    _point_app_at(server.url)
    yield server
    _point_app_at(previous)
    server.stop()

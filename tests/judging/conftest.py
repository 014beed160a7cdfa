from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User

from tests.conftest import _make_user
from tests.fakeprovider import FakeProvider


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
def other_researcher(db: None) -> User:
    return _make_user("researcher2", staff=True)


@pytest.fixture
def annotator(db: None) -> User:
    return _make_user("annotator")

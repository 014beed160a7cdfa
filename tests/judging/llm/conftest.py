"""Fixtures of the provider-egress tests: an internal server on 127.0.0.2, both addresses allowlisted, canaries
in every credential variable, and a launcher of one-answer runs."""

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from judging import services
from judging.llm import netguard
from judging.models import JudgeRun
from tests.fakeprovider import FakeProvider
from tests.judging.factories import make_dataset
from tests.judging.llm.provider_calls import CREDENTIAL_NAMES, STEERING_NAMES, Launch
from tests.security.recorder import RecordingServer


@pytest.fixture
def internal() -> Iterator[RecordingServer]:
    server = RecordingServer("127.0.0.2")
    server.content = f"INTERNAL-ONLY-{uuid.uuid4().hex}"
    server.start()
    yield server
    server.stop()


@pytest.fixture
def attack(fake_provider: FakeProvider, internal: RecordingServer, settings) -> FakeProvider:  # type: ignore[no-untyped-def]
    settings.JUDGE_API_BASE_ALLOWLIST = ["127.0.0.1", "127.0.0.2"]
    netguard._RESOLVE_CACHE.clear()
    return fake_provider


@pytest.fixture
def canaries(monkeypatch, internal: RecordingServer) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """A distinct canary in every credential variable, and the environment set to steer requests elsewhere."""
    values = {name: f"canary-{name.lower()}-{uuid.uuid4().hex}" for name in CREDENTIAL_NAMES}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    values["OPENAI_CUSTOM_HEADERS"] = f"canary-custom-header-{uuid.uuid4().hex}"
    monkeypatch.setenv("OPENAI_CUSTOM_HEADERS", f"X-Canary: {values['OPENAI_CUSTOM_HEADERS']}")
    proxy = f"http://127.0.0.2:{internal.port}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, proxy)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AIOHTTP_TRUST_ENV", "True")
    for name in STEERING_NAMES:
        monkeypatch.setenv(name, internal.base_url)
    return values


@pytest.fixture
def launched(eager: None, django_capture_on_commit_callbacks) -> Launch:  # type: ignore[no-untyped-def]
    """Launches a run of a config on a dataset of one answer, and runs its tasks at once (Celery eager)."""

    def launch(config: dict[str, Any]) -> JudgeRun:
        with django_capture_on_commit_callbacks(execute=True):
            return services.judge_run_launch(dataset=make_dataset(items=1, systems=1), config=config, launched_by=None)

    return launch

import uuid
from collections.abc import Iterator

import pytest


@pytest.fixture
def fresh_cache(settings) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """A private in-memory cache, so failure counters of one test never leak into another (or into Redis)."""
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": uuid.uuid4().hex}
    }
    yield


@pytest.fixture(autouse=True)
def fast_password_hashing(settings) -> None:  # type: ignore[no-untyped-def]
    # Hundreds of logins per module; the production hasher is asserted separately in test_deployment.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(scope="session")
def _fact_provider_server() -> Iterator[object]:
    from tests.factscore.fakeworld import FactWorldProvider

    provider = FactWorldProvider().start()
    yield provider
    provider.stop()


@pytest.fixture
def full_world(  # type: ignore[no-untyped-def]
    settings,
    tmp_path,
    fresh_cache,
    eager,
    django_capture_on_commit_callbacks,
    _fact_provider_server,
    researcher,
    annotator1,
    annotator2,
    outsider,
):
    """Every feature with tenant A full of hostile data (see tests/security/world.py build_full_world)."""
    from judging.factscore import services as fact_services
    from judging.llm import netguard
    from tests.factscore.factories import script_world
    from tests.factscore.fakeworld import FactWorld
    from tests.security.recorder import RecordingServer
    from tests.security.world import build_full_world

    settings.JUDGE_API_BASE_ALLOWLIST = ["127.0.0.1"]
    settings.JUDGE_RETRY_BASE_S = 0.01
    settings.JUDGE_RETRY_CAP_S = 0.05
    settings.VAR_DIR = tmp_path
    netguard._RESOLVE_CACHE.clear()
    fact_services.forget_cached_indexes()
    _fact_provider_server.reset()
    scripted = FactWorld()
    scripted.install(_fact_provider_server)
    script_world(scripted)
    provider = RecordingServer("127.0.0.1").start()
    try:
        yield build_full_world(
            researcher=researcher,
            annotator=annotator1,
            annotator_b=annotator2,
            outsider=outsider,
            provider=provider,
            fact_provider=_fact_provider_server,
            capture=django_capture_on_commit_callbacks,
        )
    finally:
        provider.stop()
        _fact_provider_server.reset()
        fact_services.forget_cached_indexes()

from collections.abc import Iterator
from typing import Any

import pytest

from judging.factscore import services
from judging.models import JudgeRun
from tests.factscore.factories import factscore_config, make_fact_dataset, script_world
from tests.factscore.fakeworld import FactWorld, FactWorldProvider
from tests.judging.factories import launch


@pytest.fixture(scope="session")
def _world_server() -> Iterator[FactWorldProvider]:
    provider = FactWorldProvider().start()
    yield provider
    provider.stop()


@pytest.fixture
def world_provider(_world_server: FactWorldProvider, settings, tmp_path) -> Iterator[FactWorldProvider]:  # type: ignore[no-untyped-def]
    """The local OpenAI-compatible server scripted as a FActScore world, reset for each test."""
    _world_server.reset()
    _world_server.world = None
    settings.JUDGE_API_BASE_ALLOWLIST = ["127.0.0.1"]
    settings.JUDGE_RETRY_BASE_S = 0.02
    settings.JUDGE_RETRY_CAP_S = 0.2
    settings.VAR_DIR = tmp_path
    services.forget_cached_indexes()
    yield _world_server
    _world_server.reset()
    services.forget_cached_indexes()


@pytest.fixture
def world(world_provider: FactWorldProvider) -> FactWorld:
    scripted = FactWorld()
    scripted.install(world_provider)
    return scripted


def finished_run(world: FactWorld, world_provider: FactWorldProvider, capture: Any, owner: Any) -> JudgeRun:
    """A FActScore run over the scripted world's biographies, finished in this process (`capture` is
    django_capture_on_commit_callbacks, with the `eager` fixture)."""
    script_world(world)
    return launch(make_fact_dataset(owner=owner), factscore_config(world_provider), capture)


@pytest.fixture
def run(world, world_provider, eager, django_capture_on_commit_callbacks, researcher) -> JudgeRun:  # type: ignore[no-untyped-def]
    return finished_run(world, world_provider, django_capture_on_commit_callbacks, researcher)

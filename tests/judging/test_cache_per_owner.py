"""The completion cache belongs to the researcher who launches the runs: another researcher's estimate shows none
of its hits and their run pays for its own calls, while re-running one's own config stays free."""

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from judging import run_plans
from judging.config import validate_config
from judging.models import CachedCompletion, JudgeRun, RunStatus
from tests.fakeprovider import FakeProvider
from tests.judging.factories import launch, make_dataset

pytestmark = pytest.mark.django_db


@pytest.fixture
def researcher_b(db: None) -> User:
    return User.objects.create_user("researcher-b", password="x-password-123", is_staff=True)


def _config(fake: FakeProvider) -> dict[str, Any]:
    return {"name": "cache-scope", "method": "single", "model": "openai/gpt-4o-mini", "api_base": fake.base_url}


def _launch(dataset, cfg, user, capture) -> JudgeRun:  # type: ignore[no-untyped-def]
    return launch(dataset, cfg, capture, launched_by=user)


def _api_estimate(user: User, dataset_pk: int, cfg: dict[str, Any]) -> dict[str, Any]:
    client = Client()
    client.force_login(user)
    body = {"dataset": dataset_pk, "config": cfg}
    response = client.post(reverse("api-judge-run-estimate"), body, content_type="application/json")
    assert response.status_code == 200, response.content
    return dict(response.json())


def test_another_researchers_cache_is_invisible_and_ones_own_is_free(  # type: ignore[no-untyped-def]
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks, researcher: User, researcher_b: User
) -> None:
    # Identical content in both datasets, so every request of B's run has the same cache key as one of A's.
    dataset_a = make_dataset(owner=researcher, items=3, systems=2, name="a-data")
    dataset_b = make_dataset(owner=researcher_b, items=3, systems=2, name="b-data")
    cfg = _config(fake_provider)

    first = _launch(dataset_a, cfg, researcher, django_capture_on_commit_callbacks)
    assert first.status == RunStatus.SUCCEEDED and fake_provider.snapshot()["calls"] == 6
    assert CachedCompletion.objects.filter(owner=researcher).count() == 6

    assert _api_estimate(researcher, dataset_a.pk, cfg)["cached_calls"] == 6
    assert _api_estimate(researcher_b, dataset_b.pk, cfg)["cached_calls"] == 0
    assert (
        run_plans.estimate_run(dataset=dataset_b, cfg=validate_config(cfg), launched_by=researcher_b).cached_calls == 0
    )

    theirs = _launch(dataset_b, cfg, researcher_b, django_capture_on_commit_callbacks)
    assert theirs.status == RunStatus.SUCCEEDED
    assert theirs.cache_hits == 0 and theirs.calls == 6 and fake_provider.snapshot()["calls"] == 12

    again = _launch(dataset_a, cfg, researcher, django_capture_on_commit_callbacks)
    assert again.cache_hits == 6 and again.calls == 0 and fake_provider.snapshot()["calls"] == 12
    assert CachedCompletion.objects.filter(owner=researcher_b).count() == 6

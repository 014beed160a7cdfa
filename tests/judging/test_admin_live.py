"""The run page's polled partial carries everything that changes while a run runs: the status, the buttons that
make sense for it, the errors, and the live figures (provider calls in flight apart from claimed units)."""

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import redis
from django.contrib.auth.models import User
from django.forms.models import model_to_dict
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from judging import services
from judging.llm.ratelimit import Lease, Limits, RedisLimiter, run_scope
from judging.models import JudgeRun, Judgment, JudgmentStatus, RunStatus
from tests.conftest import client_for, redis_broker_url
from tests.fakeprovider import FakeProvider
from tests.judging.factories import make_dataset

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


@pytest.fixture
def shared_redis(settings) -> Iterator[str]:  # type: ignore[no-untyped-def]
    url = redis_broker_url()
    settings.BROKER_IS_REDIS = True
    settings.REDIS_URL = url
    yield url


def launch(researcher: User, fake: FakeProvider, *, status: str) -> JudgeRun:
    dataset = make_dataset(items=2, systems=2, owner=researcher)
    config = {"name": "live-judge", "method": "single", "model": "openai/gpt-4o-mini", "api_base": fake.base_url}
    run = services.judge_run_launch(dataset=dataset, config=config, launched_by=researcher)
    JudgeRun.objects.filter(pk=run.pk).update(status=status, started_at=timezone.now())
    run.refresh_from_db()
    return run


def partial(client: Client, run: JudgeRun) -> Any:
    return client.get(reverse("admin:judging_judgerun_progress", args=[run.pk]), headers=HTMX)


def test_running_run_offers_cancel_not_retry(researcher: User, fake_provider: FakeProvider) -> None:
    run = launch(researcher, fake_provider, status=RunStatus.RUNNING)
    response = partial(client_for(researcher), run)
    body = response.content.decode()
    assert response.status_code == 200
    assert 'hx-trigger="every 1s"' in body and "<strong>running</strong>" in body
    assert "Cancel run" in body and "Retry failed" not in body


def test_failed_run_shows_its_errors_offers_retry_and_stops_polling(
    researcher: User, fake_provider: FakeProvider
) -> None:
    run = launch(researcher, fake_provider, status=RunStatus.RUNNING)
    client = client_for(researcher)
    assert "Cancel run" in partial(client, run).content.decode()  # what the open page showed before it failed

    first, second, third, _ = Judgment.objects.filter(run=run).order_by("pk")
    Judgment.objects.filter(pk__in=[first.pk, second.pk]).update(
        status=JudgmentStatus.FAILED, error_kind="rate_limit", error="429 from the provider"
    )
    Judgment.objects.filter(pk=third.pk).update(status=JudgmentStatus.FAILED, error_kind="auth", error="401 bad key")
    JudgeRun.objects.filter(pk=run.pk).update(status=RunStatus.FAILED, failed=3, finished_at=timezone.now())

    response = partial(client, run)
    body = response.content.decode()
    assert response.status_code == 286  # htmx stops polling and swaps this final state in
    assert "<strong>failed</strong>" in body and "hx-trigger" not in body
    assert "Cancel run" not in body and "Retry failed" in body
    assert '<th scope="row">auth</th><td>1</td>' in body and '<th scope="row">rate_limit</th><td>2</td>' in body
    assert "Latest errors" in body and "401 bad key" in body and "429 from the provider" in body

    page = client.get(reverse("admin:judging_judgerun_change", args=[run.pk])).content.decode()
    assert "Cancel run" not in page and "Retry failed" in page and "401 bad key" in page


def test_run_page_polls_with_the_sites_htmx_config(researcher: User, fake_provider: FakeProvider) -> None:
    """Without it htmx adds its indicator styles inline, which the CSP blocks, and runs with its lax defaults."""
    run = launch(researcher, fake_provider, status=RunStatus.RUNNING)
    page = client_for(researcher).get(reverse("admin:judging_judgerun_change", args=[run.pk])).content.decode()
    assert '<meta name="htmx-config"' in page and '"includeIndicatorStyles": false' in page
    assert page.index('name="htmx-config"') < page.index("htmx.min.js")


def test_finished_run_without_failures_offers_no_button(researcher: User, fake_provider: FakeProvider) -> None:
    run = launch(researcher, fake_provider, status=RunStatus.SUCCEEDED)
    response = partial(client_for(researcher), run)
    body = response.content.decode()
    assert response.status_code == 286
    assert "Cancel run" not in body and "Retry failed" not in body


def test_calls_in_flight_and_claimed_units_are_told_apart(
    researcher: User, fake_provider: FakeProvider, shared_redis: str
) -> None:
    run = launch(researcher, fake_provider, status=RunStatus.RUNNING)
    claimed = list(Judgment.objects.filter(run=run).values_list("pk", flat=True)[:3])
    Judgment.objects.filter(pk__in=claimed).update(
        status=JudgmentStatus.CLAIMED, claim_token="t" * 32, lease_until=timezone.now() + timedelta(minutes=5)
    )
    scope = run_scope(run.pk)
    client = client_for(researcher)

    # Two calls of a worker hold their slots (the limiter's own clients, on their own event loops, as in a worker).
    async def take_two() -> list[Lease]:
        limiter = RedisLimiter(Limits(max_concurrency=4), scope, shared_redis)
        try:
            leases = [await limiter.acquire(10), await limiter.acquire(10)]
        finally:
            await limiter.close()
        return [lease for lease in leases if lease is not None]

    async def give_back(leases: list[Lease]) -> None:
        limiter = RedisLimiter(Limits(max_concurrency=4), scope, shared_redis)
        try:
            for lease in leases:
                await limiter.release(lease)
        finally:
            await limiter.close()

    try:
        leases = asyncio.run(take_two())
        assert len(leases) == 2
        during = partial(client, run).content.decode()
        asyncio.run(give_back(leases))
        after = partial(client, run).content.decode()
    finally:
        redis.Redis.from_url(shared_redis).delete(f"evalsite:judge:{scope}:inflight")
    assert "<dt>Provider calls in flight</dt><dd data-calls-in-flight>2</dd>" in during
    assert "<dt>Claimed units</dt><dd data-claimed>3</dd>" in during
    assert "<dt>In flight</dt>" not in during
    assert "<dd data-calls-in-flight>0</dd>" in after and "<dd data-claimed>3</dd>" in after


def test_calls_in_flight_are_unknown_without_redis(researcher: User, fake_provider: FakeProvider, settings) -> None:  # type: ignore[no-untyped-def]
    settings.BROKER_IS_REDIS = False
    run = launch(researcher, fake_provider, status=RunStatus.RUNNING)
    body = partial(client_for(researcher), run).content.decode()
    assert (
        '<dd data-calls-in-flight><span title="Counted only when the workers share Redis">unknown</span></dd>' in body
    )


def test_polling_changes_nothing(researcher: User, fake_provider: FakeProvider, shared_redis: str) -> None:
    run = launch(researcher, fake_provider, status=RunStatus.RUNNING)
    client = client_for(researcher)
    before_run = model_to_dict(JudgeRun.objects.get(pk=run.pk))
    before_units = list(Judgment.objects.filter(run=run).order_by("pk").values())
    keys_before = sorted(redis.Redis.from_url(shared_redis).keys(f"evalsite:judge:{run_scope(run.pk)}:*"))
    for _ in range(2):
        assert partial(client, run).status_code == 200
        assert client.get(reverse("admin:judging_judgerun_change", args=[run.pk])).status_code == 200
    assert model_to_dict(JudgeRun.objects.get(pk=run.pk)) == before_run
    assert list(Judgment.objects.filter(run=run).order_by("pk").values()) == before_units
    assert sorted(redis.Redis.from_url(shared_redis).keys(f"evalsite:judge:{run_scope(run.pk)}:*")) == keys_before

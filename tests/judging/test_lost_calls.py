"""Requests recorded as they go onto the connection, and lost calls charged from those records.

The killed-worker test in tests/judging/test_outages.py plays the whole story with a real worker; these tests pin
its parts: which requests are recorded, how a record is charged, and that a record is never stored twice.
"""

import asyncio
from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.db import IntegrityError, transaction
from django.db.models import Sum
from django.utils import timezone

from judging import services
from judging.llm import egress
from judging.llm.calls import CallResult, CallSpec
from judging.llm.gateway import Gateway
from judging.llm.ratelimit import Limits, LocalLimiter
from judging.llm.sending import CURRENT_GATE, SendGate
from judging.models import JudgeRun, Judgment, JudgmentStatus, ProviderSend, RunStatus
from tests.fakeprovider import FakeProvider, free_port
from tests.judging.factories import judge_config, make_dataset


def _spec(api_base: str, text: str, max_retries: int, timeout_s: float = 5.0) -> CallSpec:
    return CallSpec(
        model="openai/gpt-4o-mini",
        messages=[{"role": "user", "content": text}],
        api_base=api_base,
        timeout_s=timeout_s,
        max_retries=max_retries,
    )


async def _call_counting_hand_overs(spec: CallSpec) -> tuple[CallResult, int]:
    handed: list[int] = []
    gateway = Gateway(limiter=LocalLimiter(Limits(max_concurrency=2), "lost-calls-unit"))
    try:
        result = await gateway.call(spec, on_handed_over=lambda: handed.append(1))
    finally:
        await gateway.close()
    return result, len(handed)


def test_every_attempt_that_reaches_the_provider_is_handed_over_once(fake_provider: FakeProvider) -> None:
    fake_provider.script(rules=[{"match": "flaky", "behaviour": {"status": 500}, "times": 2}])
    result, handed = asyncio.run(_call_counting_hand_overs(_spec(fake_provider.base_url, "flaky", max_retries=3)))
    assert result.ok and result.attempts == 3
    # Two answered 500 and one 200: the provider's log and the hand-overs agree request for request.
    assert handed == fake_provider.snapshot()["calls"] == 3


def test_a_request_never_answered_is_handed_over_when_it_goes_out(fake_provider: FakeProvider) -> None:
    # What a killed worker's calls in flight look like from its side: sent, and no answer ever.
    fake_provider.script(default={"hang": 5})
    result, handed = asyncio.run(
        _call_counting_hand_overs(_spec(fake_provider.base_url, "unanswered", max_retries=0, timeout_s=1.0))
    )
    assert not result.ok and result.error_kind == "timeout"
    assert handed == fake_provider.snapshot()["calls"] == 1


async def _post_through_plain_httpx(url: str) -> tuple[int, str]:
    limiter = LocalLimiter(Limits(max_concurrency=1), "lost-calls-httpx")
    lease = await limiter.acquire(0, lambda: False)
    assert lease is not None
    handed: list[int] = []
    gate = SendGate(limiter, lease, lambda: False, on_handed_over=lambda: handed.append(1))
    token = CURRENT_GATE.set(gate)
    try:
        async with httpx.AsyncClient(transport=egress.gated(None), timeout=1.0) as client:
            await client.post(url, json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "x"}]})
    except httpx.ReadTimeout as exc:
        return len(handed), type(exc).__name__
    finally:
        CURRENT_GATE.reset(token)
        await limiter.release(lease, 0)
    return len(handed), "answered"


def test_httpcore_reports_the_hand_over_of_a_request_never_answered(fake_provider: FakeProvider) -> None:
    """Without litellm's aiohttp transport the gate falls back on httpx's own pool, whose trace events report it."""
    fake_provider.script(default={"hang": 5})
    handed, outcome = asyncio.run(_post_through_plain_httpx(f"{fake_provider.base_url}/chat/completions"))
    assert outcome == "ReadTimeout"
    assert handed == fake_provider.snapshot()["calls"] == 1


def test_an_attempt_that_never_reaches_a_provider_is_not_handed_over(fake_provider: FakeProvider) -> None:
    # The fake provider's fixture allows its loopback host; its port is not used, nothing listens on this one.
    nobody = f"http://127.0.0.1:{free_port()}/v1"
    result, handed = asyncio.run(_call_counting_hand_overs(_spec(nobody, "refused", max_retries=1)))
    assert not result.ok and result.attempts == 2
    assert "Connection error" in result.error
    assert handed == 0


def _config(fake: FakeProvider) -> dict[str, Any]:
    return judge_config(fake, name="lost-calls", max_concurrency=4, max_retries=0)


@pytest.mark.django_db
def test_requests_a_dead_holder_sent_are_charged_to_their_unit_and_its_unsent_claims_cost_nothing(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    fake_provider.script(default={"usage": {"prompt_tokens": 1000, "completion_tokens": 10}})
    dataset = make_dataset(items=3, systems=2)
    with django_capture_on_commit_callbacks() as start:
        run = services.judge_run_launch(dataset=dataset, config=_config(fake_provider), launched_by=None)
    # As a worker killed mid-run leaves it: two units claimed under a lease that ran out, one of them with two
    # requests recorded (a first attempt and its retry), the other claimed but not sent yet.
    sent_twice, never_sent = Judgment.objects.filter(run=run).order_by("id").values_list("id", flat=True)[:2]
    Judgment.objects.filter(pk__in=[sent_twice, never_sent]).update(
        status=JudgmentStatus.CLAIMED, claim_token="dead-holder", lease_until=timezone.now() - timedelta(seconds=1)
    )
    now = timezone.now()
    ProviderSend.objects.bulk_create(
        [
            ProviderSend(judgment_id=sent_twice, attempt_id=attempt, holder="dead-holder", sent_at=now)
            for attempt in ("attempt-1", "attempt-2")
        ]
    )
    with django_capture_on_commit_callbacks(execute=True):
        for callback in start:
            callback()
    run = JudgeRun.objects.get(pk=run.pk)
    assert run.status == RunStatus.SUCCEEDED, run.notes
    received = fake_provider.snapshot()["calls"]
    assert received == 6  # every unit sent once by this worker
    lost = dict(Judgment.objects.filter(run=run).values_list("id", "lost_calls"))
    assert lost[sent_twice] == 2
    assert lost[never_sent] == 0
    assert sum(lost.values()) == 2
    assert run.calls == received + 2
    charged = Judgment.objects.get(pk=sent_twice).lost_cost_usd
    assert charged > 0
    paid = Judgment.objects.filter(run=run).aggregate(cost=Sum("cost_usd"))["cost"]
    assert run.cost_usd == pytest.approx(paid + charged)
    assert "2 call(s) were sent by a worker that stopped" in run.notes
    # Counted, so gone: a later retry of the unit cannot charge them again.
    assert not ProviderSend.objects.filter(judgment__run=run).exists()


@pytest.mark.django_db
def test_a_request_is_recorded_once_however_often_its_record_is_written(fake_provider: FakeProvider) -> None:
    dataset = make_dataset(items=1, systems=1)
    run = services.judge_run_launch(dataset=dataset, config=_config(fake_provider), launched_by=None)
    judgment = Judgment.objects.filter(run=run).first()
    assert judgment is not None

    def record() -> ProviderSend:
        return ProviderSend(judgment=judgment, attempt_id="one-attempt", holder="slice", sent_at=timezone.now())

    ProviderSend.objects.bulk_create([record()], ignore_conflicts=True)
    # The write a slice repeats after its connection dropped mid-commit: ignored, not a second request.
    ProviderSend.objects.bulk_create([record()], ignore_conflicts=True)
    assert ProviderSend.objects.filter(judgment=judgment).count() == 1
    with pytest.raises(IntegrityError), transaction.atomic():
        ProviderSend.objects.create(judgment=judgment, attempt_id="one-attempt", holder="other", sent_at=timezone.now())
    with pytest.raises(IntegrityError), transaction.atomic():
        ProviderSend.objects.create(judgment=judgment, attempt_id="no-holder", holder="", sent_at=timezone.now())

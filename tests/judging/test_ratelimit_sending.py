"""rpm and tpm as the provider counts them, latency apart from the wait before sending, and timeout_s per attempt.

Every limit is checked in the fake provider's own request log, never in the limiter's records. Windows are shortened
here (`Limits.window_s`) so the tests take seconds; tests/judging/test_ratelimit_minute.py holds the full minute.
"""

import asyncio
import os
import threading
import time
import uuid
from typing import Any

import pytest
import tiktoken

from judging.llm.calls import CallResult, CallSpec
from judging.llm.gateway import Gateway, count_tokens, reserved_tokens
from judging.llm.ratelimit import Limits, LocalLimiter, RedisLimiter
from tests.conftest import wait_for
from tests.fakeprovider import FakeProvider, max_in_window

REDIS_URL = os.environ.get("JUDGE_TEST_REDIS_URL") or os.environ.get(
    "TEST_REDIS_BROKER_URL", "redis://127.0.0.1:6379/3"
)
BACKENDS = ["local", "redis"]


def make_limiter(backend: str, limits: Limits, scope: str) -> LocalLimiter | RedisLimiter:
    if backend == "redis":
        return RedisLimiter(limits, scope, REDIS_URL)
    return LocalLimiter(limits, scope)


def spec(fake: FakeProvider, text: str, **overrides: Any) -> CallSpec:
    values: dict[str, Any] = {
        "model": "openai/gpt-4o-mini",
        "messages": [{"role": "user", "content": text}],
        "api_base": fake.base_url,
        "timeout_s": 5.0,
        "max_retries": 0,
    }
    values.update(overrides)
    return CallSpec(**values)


def worker(backend: str, limits: Limits, scope: str, specs: list[CallSpec], out: list[CallResult]) -> None:
    """One worker process's share of a run: its own event loop, gateway and limiter."""

    async def run() -> None:
        limiter = make_limiter(backend, limits, scope)
        gateway = Gateway(limiter=limiter)
        try:
            out.extend(await asyncio.gather(*(gateway.call(s) for s in specs)))
        finally:
            await gateway.close()
            await limiter.close()

    asyncio.run(run())


def run_workers(backend: str, limits: Limits, specs: list[CallSpec]) -> list[CallResult]:
    scope = uuid.uuid4().hex
    # Without Redis, limits hold within one process only, so one worker there.
    shares = [specs[0::2], specs[1::2]] if backend == "redis" else [specs]
    out: list[CallResult] = []
    threads = [threading.Thread(target=worker, args=(backend, limits, scope, share, out)) for share in shares]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_rpm_holds_in_the_providers_log(fake_provider: FakeProvider, backend: str) -> None:
    # Latencies vary, so requests reach the provider unevenly after they are admitted.
    fake_provider.script(
        default={"latency": 0.02}, rules=[{"match": f"q{i}-", "behaviour": {"latency": 0.4}} for i in range(0, 14, 3)]
    )
    limits = Limits(max_concurrency=8, rpm=4, window_s=2.0)
    results = run_workers(backend, limits, [spec(fake_provider, f"q{i}-{uuid.uuid4().hex}") for i in range(14)])
    assert len(results) == 14 and all(r.ok for r in results)
    log = fake_provider.request_log()
    assert len(log) == 14
    assert max_in_window(log, 2.0) <= 4
    # 14 requests at 4 per 2 s cannot arrive in under 6 s: the limit was really reached, several times over.
    assert log[-1]["at"] - log[0]["at"] >= 6.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_tpm_holds_in_the_providers_log_on_japanese_prompts(fake_provider: FakeProvider, backend: str) -> None:
    fake_provider.script(default={"latency": 0.05, "usage": "counted", "content": "評価：良い。Score: 4"})
    # ~600 to ~900 tokens each: about four fit in the window.
    prompts = [f"{i}: " + "東京の天気について詳しく説明してください。" * (40 + 5 * (i % 4)) for i in range(10)]
    limits = Limits(max_concurrency=8, tpm=3000, window_s=2.0)
    results = run_workers(backend, limits, [spec(fake_provider, p, max_tokens=50) for p in prompts])
    assert all(r.ok for r in results)
    log = fake_provider.request_log()
    assert len(log) == 10
    most = max_in_window(log, 2.0, weight="tokens")
    assert 0.6 * 3000 <= most <= 1.05 * 3000


def test_tpm_reservation_counts_tokens_not_characters() -> None:
    text = "日本語の評価基準に従って、次の回答の正確さと流暢さを判定してください。" * 30
    messages = [{"role": "user", "content": text}]
    billed = len(tiktoken.get_encoding("o200k_base").encode(text)) + 3 + 3  # as OpenAI bills a gpt-4o prompt
    counted = count_tokens("openai/gpt-4o-mini", messages)
    assert billed <= counted <= billed * 1.05
    # characters / 3 would have reserved a third of it: Japanese is about one token per character.
    assert counted > 2 * len(text) / 3
    call = CallSpec(model="openai/gpt-4o-mini", messages=messages, max_tokens=200)
    assert reserved_tokens(call) == counted + 200


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_call_waiting_for_rpm_does_not_stall_other_calls_of_the_process(
    fake_provider: FakeProvider, backend: str
) -> None:
    fake_provider.script(default={"latency": 0.05})
    stop = threading.Event()

    async def run() -> tuple[CallResult, list[CallResult], float, bool]:
        limited = make_limiter(backend, Limits(max_concurrency=4, rpm=1), uuid.uuid4().hex)
        free = make_limiter(backend, Limits(max_concurrency=8), uuid.uuid4().hex)
        slow, other = Gateway(limiter=limited, should_stop=stop.is_set), Gateway(limiter=free)
        try:
            first = await slow.call(spec(fake_provider, "limited run 1"))
            assert first.ok
            waiting = asyncio.create_task(slow.call(spec(fake_provider, "limited run 2")))
            await asyncio.sleep(0.2)
            started = time.monotonic()
            others = await asyncio.gather(*(other.call(spec(fake_provider, f"other run {i}")) for i in range(16)))
            elapsed = time.monotonic() - started
            still_waiting = not waiting.done()
            stop.set()
            return await asyncio.wait_for(waiting, 5), others, elapsed, still_waiting
        finally:
            for closing in (slow, other):
                await closing.close()
            for limiter in (limited, free):
                await limiter.close()

    blocked, others, elapsed, still_waiting = asyncio.run(run())
    assert all(r.ok for r in others) and elapsed < 3.0
    assert still_waiting
    # Stopped while it waited for the window: never sent, and no attempt counted.
    assert blocked.stopped and blocked.attempts == 0
    bodies = [b["messages"][0]["content"] for b in fake_provider.recorded_bodies()]
    assert bodies.count("limited run 1") == 1 and "limited run 2" not in bodies


@pytest.mark.parametrize("backend", BACKENDS)
def test_latency_is_the_providers_time_and_the_wait_for_a_slot_is_apart(
    fake_provider: FakeProvider, backend: str
) -> None:
    fake_provider.script(default={"latency": 0.4})

    async def run() -> list[CallResult]:
        limiter = make_limiter(backend, Limits(max_concurrency=1), uuid.uuid4().hex)
        gateway = Gateway(limiter=limiter)
        try:
            return list(await asyncio.gather(*(gateway.call(spec(fake_provider, f"slot {i}")) for i in range(3))))
        finally:
            await gateway.close()
            await limiter.close()

    results = asyncio.run(run())
    assert all(r.ok for r in results)
    assert all(0.38 <= r.latency_s < 0.75 for r in results), [r.latency_s for r in results]
    waits = sorted(r.queue_wait_s for r in results)
    assert waits[0] < 0.2 and waits[1] >= 0.35 and waits[2] >= 0.75


@pytest.mark.parametrize("backend", BACKENDS)
def test_latency_excludes_the_wait_for_rpm(fake_provider: FakeProvider, backend: str) -> None:
    fake_provider.script(default={"latency": 0.3})

    async def run() -> list[CallResult]:
        limiter = make_limiter(backend, Limits(max_concurrency=4, rpm=1, window_s=1.5), uuid.uuid4().hex)
        gateway = Gateway(limiter=limiter)
        try:
            return [await gateway.call(spec(fake_provider, f"rpm {i}")) for i in range(2)]
        finally:
            await gateway.close()
            await limiter.close()

    first, second = asyncio.run(run())
    assert first.ok and second.ok
    # The first request's response came back after ~0.3 s, so the second may go 1.5 s after that.
    assert second.queue_wait_s >= 1.3
    assert 0.28 <= second.latency_s < 0.7
    log = fake_provider.request_log()
    assert log[1]["at"] - log[0]["at"] >= 1.5


def test_timeout_bounds_the_whole_attempt_against_a_slow_drip(fake_provider: FakeProvider) -> None:
    # 20 pieces, one every 0.5 s: no read ever waits 3 s, but the answer takes 10 s.
    fake_provider.script(default={"drip": 0.5, "drip_pieces": 20})

    async def run() -> CallResult:
        gateway = Gateway()
        try:
            return await gateway.call(spec(fake_provider, "drip", timeout_s=3.0))
        finally:
            await gateway.close()

    started = time.monotonic()
    result = asyncio.run(run())
    elapsed = time.monotonic() - started
    assert result.error_kind == "timeout" and result.attempts == 1
    # Without a bound on the whole attempt the answer would take 10 s; the margin above 3 s absorbs a loaded machine.
    assert 2.9 <= result.latency_s < 7.0
    assert elapsed < 7.5
    assert fake_provider.snapshot()["calls"] == 1
    # The provider logs a request when its handler ends, here cancelled by the client's going away, in its own
    # thread: the entry may come a moment after the client has given up.
    wait_for(lambda: len(fake_provider.request_log()) == 1, timeout=10, message="the provider to log the request")


def test_a_slow_stream_within_the_timeout_is_received(fake_provider: FakeProvider) -> None:
    fake_provider.script(default={"drip": 0.05, "drip_pieces": 20, "content": "Score: 5"})

    async def run() -> CallResult:
        gateway = Gateway()
        try:
            return await gateway.call(spec(fake_provider, "drip within", timeout_s=3.0))
        finally:
            await gateway.close()

    result = asyncio.run(run())
    assert result.ok and result.content == "Score: 5"
    assert 0.8 <= result.latency_s < 3.0


def test_the_time_limit_starts_when_the_request_is_sent_not_while_it_waits(fake_provider: FakeProvider) -> None:
    """A call that waits longer than timeout_s for room under rpm is still sent, and then gets its full time."""
    fake_provider.script(default={"latency": 0.5})

    async def run() -> list[CallResult]:
        limiter = LocalLimiter(Limits(max_concurrency=4, rpm=1, window_s=2.0))
        gateway = Gateway(limiter=limiter)
        try:
            return list(
                await asyncio.gather(*(gateway.call(spec(fake_provider, f"t{i}", timeout_s=1.0)) for i in range(2)))
            )
        finally:
            await gateway.close()

    results = asyncio.run(run())
    assert all(r.ok for r in results), [r.error for r in results]
    assert max(r.queue_wait_s for r in results) > 1.0


@pytest.mark.django_db
def test_judgments_store_latency_and_queue_wait_apart_and_the_run_page_shows_both(
    researcher: Any, fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks: Any
) -> None:
    from django.urls import reverse

    from judging import services
    from judging.models import Judgment, RunStatus
    from judging.selectors import judge_run_progress
    from tests.conftest import client_for
    from tests.judging.factories import make_dataset

    fake_provider.script(default={"latency": 0.3})
    dataset = make_dataset(items=2, systems=2, owner=researcher)
    config = {
        "name": "one-at-a-time",
        "method": "single",
        "model": "openai/gpt-4o-mini",
        "api_base": fake_provider.base_url,
        "max_concurrency": 1,
        "timeout_s": 5,
    }
    with django_capture_on_commit_callbacks(execute=True):
        run = services.judge_run_launch(dataset=dataset, config=config, launched_by=researcher)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and run.done == 4
    judgments = list(Judgment.objects.filter(run=run))
    # One slot for four units at once: each waited for the ones before it, which is not the provider's time.
    assert all(0.28 <= j.latency_s < 0.6 for j in judgments), [j.latency_s for j in judgments]
    assert sum(j.queue_wait_s for j in judgments) >= 0.3 * 3 * 0.9
    progress = judge_run_progress(run)
    assert progress.mean_latency_s == pytest.approx(sum(j.latency_s for j in judgments) / 4, abs=0.001)
    assert progress.mean_queue_wait_s == pytest.approx(sum(j.queue_wait_s for j in judgments) / 4, abs=0.001)
    page = client_for(researcher).get(reverse("admin:judging_judgerun_progress", args=[run.pk]))
    assert b"Mean provider latency" in page.content and b"Mean queue wait" in page.content
    assert f"{progress.mean_queue_wait_s} s".encode() in page.content

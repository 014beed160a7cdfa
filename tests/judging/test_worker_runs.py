"""Judge runs executed by real Celery worker processes on the configured broker, against the fake provider."""

import hashlib
import os
import time
from typing import Any

import pytest

from judging import services
from judging.models import JudgeRun, Judgment, JudgmentStatus, RunStatus
from tests.conftest import wait_for
from tests.fakeprovider import FakeProvider, request_key
from tests.judging.factories import make_dataset

pytestmark = pytest.mark.django_db(transaction=True)

WORKER_ENV = {
    "JUDGE_API_BASE_ALLOWLIST": "127.0.0.1",
    "JUDGE_RETRY_BASE_MS": "20",
    "JUDGE_RETRY_CAP_S": "1",
    "JUDGE_LEASE_S": "4",
    "JUDGE_TIME_SLICE_S": "30",
}


def cfg(fake: FakeProvider, **overrides: Any) -> dict[str, Any]:
    values = {
        "name": "worker-judge",
        "method": "single",
        "model": "openai/gpt-4o-mini",
        "api_base": fake.base_url,
        "max_concurrency": 8,
        "timeout_s": 2,
        "max_retries": 5,
    }
    values.update(overrides)
    return values


def run_state(run: JudgeRun) -> JudgeRun:
    run.refresh_from_db()
    return run


def finished(run: JudgeRun) -> bool:
    return run_state(run).status not in (RunStatus.QUEUED, RunStatus.RUNNING)


def prompt_hash_to_fake_key(fake: FakeProvider) -> dict[str, str]:
    mapping = {}
    for body in fake.recorded_bodies():
        text = body["messages"][0]["content"]
        mapping[hashlib.sha256(text.encode()).hexdigest()] = request_key(body)
    return mapping


def test_transient_faults_every_answer_judged_without_duplicate_calls(
    fake_provider: FakeProvider, celery_worker_factory, clean_broker: None
) -> None:  # type: ignore[no-untyped-def]
    fake_provider.script(
        default={"latency": 0.02},
        faults={"rate": 0.1, "kinds": [429, 500, 503, "timeout"], "hang": 3, "retry_after": 0},
    )
    dataset = make_dataset(items=20, systems=4, aspects=(("overall", 1, 5), ("fluency", 1, 5)))
    celery_worker_factory(extra_env=WORKER_ENV)
    run = services.judge_run_launch(dataset=dataset, config=cfg(fake_provider), launched_by=None)
    wait_for(lambda: finished(run), timeout=120, message="run to finish")
    assert run.status == RunStatus.SUCCEEDED, run.notes
    assert run.done == run.total == 160 and run.failed == 0
    attempts = fake_provider.attempts_per_request()
    successes = fake_provider.successes_per_request()
    assert len(successes) == 160
    assert set(successes.values()) == {1}  # each distinct request succeeded exactly once
    faulted = [k for k, n in attempts.items() if n > 1]
    assert faulted  # faults really happened ...
    assert all(attempts[k] == 2 for k in faulted)  # ... and each cost exactly one retry
    assert Judgment.objects.filter(run=run, status=JudgmentStatus.DONE).count() == 160


def test_limits_hold_across_two_workers(fake_provider: FakeProvider, celery_worker_factory, redis_broker: str) -> None:  # type: ignore[no-untyped-def]
    fake_provider.script(default={"latency": 0.15})
    dataset = make_dataset(items=25, systems=4)
    env = {**WORKER_ENV, "JUDGE_TASKS_PER_RUN": "4"}
    celery_worker_factory(extra_env=env, concurrency=2)
    celery_worker_factory(extra_env=env, concurrency=2)
    run = services.judge_run_launch(dataset=dataset, config=cfg(fake_provider, max_concurrency=5), launched_by=None)
    wait_for(lambda: finished(run), timeout=120, message="run to finish")
    assert run.status == RunStatus.SUCCEEDED
    assert fake_provider.snapshot()["max_in_flight"] == 5


def test_worker_killed_mid_run_loses_nothing_and_repeats_no_finished_call(
    fake_provider: FakeProvider, celery_worker_factory, clean_broker: None
) -> None:  # type: ignore[no-untyped-def]
    fake_provider.script(default={"latency": 0.2})
    dataset = make_dataset(items=40, systems=4)
    first = celery_worker_factory(extra_env=WORKER_ENV)
    run = services.judge_run_launch(dataset=dataset, config=cfg(fake_provider), launched_by=None)
    wait_for(lambda: run_state(run).done >= 40, timeout=60, message="some progress")
    first.kill()
    done_before = set(
        Judgment.objects.filter(run=run, status=JudgmentStatus.DONE).values_list("prompt_hash", flat=True)
    )
    assert 40 <= len(done_before) < 160
    assert Judgment.objects.filter(run=run, status=JudgmentStatus.CLAIMED).exists()
    celery_worker_factory(extra_env=WORKER_ENV)
    wait_for(lambda: finished(run), timeout=120, message="run to finish after restart")
    assert run.status == RunStatus.SUCCEEDED
    assert Judgment.objects.filter(run=run).count() == 160
    assert Judgment.objects.filter(run=run, status=JudgmentStatus.DONE).count() == 160
    assert run.done == 160
    attempts = fake_provider.attempts_per_request()
    keys = prompt_hash_to_fake_key(fake_provider)
    assert all(attempts[keys[h]] == 1 for h in done_before)  # finished calls were never sent again
    repeated = [k for k, n in attempts.items() if n > 1]
    # Only calls lost with the worker are sent again: those in flight (at most max_concurrency = 8)
    # and those answered in the instant before their write committed.
    assert len(repeated) <= 2 * 8


def test_cancel_stops_new_calls_within_seconds(
    fake_provider: FakeProvider, celery_worker_factory, clean_broker: None
) -> None:  # type: ignore[no-untyped-def]
    fake_provider.script(default={"latency": 0.3})
    dataset = make_dataset(items=50, systems=2)
    celery_worker_factory(extra_env=WORKER_ENV)
    run = services.judge_run_launch(dataset=dataset, config=cfg(fake_provider, max_concurrency=4), launched_by=None)
    wait_for(lambda: fake_provider.snapshot()["calls"] >= 8, timeout=60, message="calls to start")
    assert services.judge_run_cancel(run=run)
    # A unit is claimed before its call is sent and released after its reply is written, and a cancelled run's units
    # can no longer be claimed: once none is claimed, nothing is in flight and nothing new may start.
    wait_for(
        lambda: not Judgment.objects.filter(run=run, status=JudgmentStatus.CLAIMED).exists(),
        timeout=120,
        message="the calls in flight to end",
    )
    calls_after = fake_provider.snapshot()["calls"]
    time.sleep(3)
    assert fake_provider.snapshot()["calls"] == calls_after
    assert calls_after < 100
    run = run_state(run)
    assert run.status == RunStatus.CANCELLED
    assert Judgment.objects.filter(run=run, status=JudgmentStatus.PENDING).exists()
    assert not Judgment.objects.filter(run=run, status=JudgmentStatus.CLAIMED).exists()


def test_budget_cap_stops_the_run_cleanly(
    fake_provider: FakeProvider, celery_worker_factory, clean_broker: None
) -> None:  # type: ignore[no-untyped-def]
    # gpt-4o-mini: 100k prompt tokens cost $0.015, so a $0.05 budget allows about 4 calls.
    fake_provider.script(default={"latency": 0.2, "usage": {"prompt_tokens": 100_000, "completion_tokens": 10}})
    dataset = make_dataset(items=30, systems=2)
    celery_worker_factory(extra_env=WORKER_ENV)
    run = services.judge_run_launch(
        dataset=dataset, config=cfg(fake_provider, max_concurrency=2, budget_usd=0.05), launched_by=None
    )
    wait_for(lambda: finished(run), timeout=60, message="budget stop")
    time.sleep(1)
    run = run_state(run)
    assert run.status == RunStatus.STOPPED_BUDGET
    assert run.cost_usd >= 0.05
    calls = fake_provider.snapshot()["calls"]
    assert 4 <= calls <= 4 + 2 + 1  # the budget, plus what was in flight when it was reached
    assert "budget" in run.notes
    assert not Judgment.objects.filter(run=run, status=JudgmentStatus.CLAIMED).exists()
    assert os.environ.get("OPENAI_API_KEY", "") not in run.notes or not os.environ.get("OPENAI_API_KEY")

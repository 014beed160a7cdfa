"""rpm and tpm over the provider's real 60-second window, as the provider's own log shows them.

Each test sends for a little over a minute: the first window fills, and what follows must wait for it to slide."""

import threading
import uuid
from typing import Any

import pytest

from judging import services
from judging.llm.calls import CallResult
from judging.llm.ratelimit import Limits
from judging.models import Judgment, JudgmentStatus, RunStatus
from tests.conftest import wait_for
from tests.fakeprovider import FakeProvider, max_in_window
from tests.judging import test_worker_runs as worker_runs
from tests.judging.factories import make_dataset
from tests.judging.test_ratelimit_sending import spec, worker

WORKER_ENV = {**worker_runs.WORKER_ENV, "JUDGE_LEASE_S": "10"}


@pytest.mark.django_db(transaction=True)
def test_rpm_60_with_two_worker_processes_in_the_providers_log(
    fake_provider: FakeProvider, redis_broker: str, celery_worker_factory: Any
) -> None:
    # Uneven latencies: some requests hold their slot for a while, most return at once.
    fake_provider.script(
        default={"latency": 0.05},
        rules=[{"match": f"回答{i}-0", "behaviour": {"latency": 1.5}} for i in range(0, 45, 4)],
    )
    dataset = make_dataset(items=45, systems=2, japanese=True)
    workers = [celery_worker_factory(extra_env=WORKER_ENV, concurrency=2) for _ in range(2)]
    config = {
        "name": "rpm-60",
        "method": "single",
        "model": "openai/gpt-4o-mini",
        "api_base": fake_provider.base_url,
        "max_concurrency": 8,
        "rpm": 60,
        "timeout_s": 5,
        "max_retries": 2,
    }
    run = services.judge_run_launch(dataset=dataset, config=config, launched_by=None)

    def finished() -> bool:
        run.refresh_from_db()
        return run.status not in (RunStatus.QUEUED, RunStatus.RUNNING)

    wait_for(finished, timeout=240, interval=0.5, message="the rpm-limited run to finish")
    assert run.status == RunStatus.SUCCEEDED, run.notes
    assert Judgment.objects.filter(run=run, status=JudgmentStatus.DONE).count() == 90
    log = fake_provider.request_log()
    assert len(log) == 90 and all(entry["status"] == 200 for entry in log)
    assert max_in_window(log, 60.0) <= 60
    # 90 requests at 60 a minute: sending really went on past the first window.
    assert log[-1]["at"] - log[0]["at"] > 60.0
    # Both worker processes took part.
    assert all("judging.judge_run_work" in w.log() and "succeeded" in w.log() for w in workers)


def test_tpm_15000_on_japanese_prompts_in_the_providers_log(fake_provider: FakeProvider) -> None:
    fake_provider.script(default={"latency": 0.2, "usage": "counted", "content": "正確で流暢な回答です。Score: 4"})
    # About 1,400 to 2,100 tokens each as the provider bills them, so eight or so fit in a minute.
    prompts = [
        f"{i}: " + "次の回答が日本の歴史について正確かどうかを、根拠を挙げて判定してください。" * (50 + 8 * (i % 4))
        for i in range(11)
    ]
    limits = Limits(max_concurrency=8, tpm=15_000)
    scope = uuid.uuid4().hex
    specs = [spec(fake_provider, prompt, max_tokens=200) for prompt in prompts]
    out: list[CallResult] = []
    # Two workers, each with its own event loop and Redis connection, sharing the run's window through Redis.
    shares = (specs[0::2], specs[1::2])
    threads = [threading.Thread(target=worker, args=("redis", limits, scope, share, out)) for share in shares]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(240)
    assert len(out) == 11 and all(r.ok for r in out)
    log = fake_provider.request_log()
    assert len(log) == 11
    assert sum(r.prompt_tokens + r.completion_tokens for r in out) == sum(entry["tokens"] for entry in log)
    most = max_in_window(log, 60.0, weight="tokens")
    assert most <= 15_000 * 1.05
    # ... and the limit was used, not left idle by an over-cautious reservation.
    assert most >= 15_000 * 0.8
    assert log[-1]["at"] - log[0]["at"] > 60.0
    # The prompts are as long as intended, by the provider's count.
    assert min(entry["tokens"] for entry in log) > 1400

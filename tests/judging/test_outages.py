"""A Redis that goes away mid-run (broker and limiter alike) fails no unit and throws away no paid response.

Each test starts its own redis-server on a free port, points this process and a real Celery worker at it, stops it
in the middle of a judge run and starts it again on the same port. The shared Redis of the machine is never touched.
"""

import asyncio
import time

import pytest
from django.db.models import Count, Sum

from judging import services
from judging.llm import ratelimit
from judging.models import JudgeRun, JudgeScore, Judgment, JudgmentStatus, ProviderSend, RunStatus
from tests.conftest import wait_for
from tests.fakeprovider import FakeProvider
from tests.judging.factories import make_dataset
from tests.judging.private_redis import PrivateRedis
from tests.judging.test_worker_runs import WORKER_ENV, cfg, finished, run_state

pytestmark = pytest.mark.django_db(transaction=True)


def _run_through_outage(
    fake: FakeProvider, server: PrivateRedis, factory, *, items: int, outage_s: float, after_done: int
) -> tuple[JudgeRun, int]:  # type: ignore[no-untyped-def]
    """Launch a run, stop Redis for `outage_s` once `after_done` units are done, restart it, wait for the end.
    Returns the run and how many units were claimed (in flight) when Redis went away."""
    dataset = make_dataset(items=items, systems=4)
    env = {**WORKER_ENV, "CELERY_BROKER_URL": server.url, "REDIS_URL": server.url}
    worker = factory(broker_url=server.url, extra_env=env)
    run = services.judge_run_launch(dataset=dataset, config=cfg(fake, max_concurrency=8), launched_by=None)
    wait_for(lambda: run_state(run).done >= after_done, timeout=60, message=f"{after_done} units done")
    in_flight = Judgment.objects.filter(run=run, status=JudgmentStatus.CLAIMED).count()
    server.stop()
    outage_started = time.monotonic()
    time.sleep(outage_s / 2)
    done_during = run_state(run).done
    time.sleep(outage_s / 2)
    assert run_state(run).status == RunStatus.RUNNING, run.notes
    server.start()
    assert time.monotonic() - outage_started >= outage_s
    workers = [worker]

    def supervised_finish() -> bool:
        # Celery 5.7's worker can exit on losing a Redis broker while it holds unacknowledged messages (kombu closes
        # the lost channel twice); like the supervisor of a deployment, the test starts it again when it does.
        if workers[-1].process is not None and workers[-1].process.poll() is not None:
            workers.append(factory(broker_url=server.url, extra_env=env))
        return finished(run)

    wait_for(supervised_finish, timeout=240, message="the run to finish after the outage")
    assert done_during < run.total  # the outage really fell in the middle of the run
    assert "Redis unreachable" in "".join(w.log() for w in workers)  # the limiter really met the outage
    return run, in_flight


def _unit_errors(run: JudgeRun) -> str:
    return " ".join(Judgment.objects.filter(run=run).exclude(error="").values_list("error", flat=True))


def _assert_complete_without_duplicates(run: JudgeRun, fake: FakeProvider, in_flight: int) -> None:
    run = run_state(run)
    assert run.status == RunStatus.SUCCEEDED, run.notes
    assert run.done == run.total and run.failed == 0
    assert not Judgment.objects.filter(run=run).exclude(status=JudgmentStatus.DONE).exists()
    assert _unit_errors(run) == ""
    units = Judgment.objects.filter(run=run).values("response_id", "aspect_name", "sample")
    assert not units.annotate(n=Count("id")).filter(n__gt=1).exists()
    # The scores are written just after the run is marked finished.
    wait_for(lambda: JudgeScore.objects.filter(judge=run.judge).count() == run.total, timeout=10, message="scores")
    successes = fake.successes_per_request()
    assert len(successes) == run.total  # every distinct request reached the provider and was answered
    extra = sum(n - 1 for n in successes.values())
    # Only a unit in flight when Redis went away may have been sent twice, and at most once more.
    assert max(successes.values()) <= 2
    assert extra <= in_flight
    # Every paid call is counted (here none was lost, so the counter equals the provider's own log).
    assert run.calls == sum(fake.attempts_per_request().values())


@pytest.mark.parametrize(
    ("latency", "items", "outage_s", "after_done", "total"),
    [(0.25, 75, 10, 60, 300), (0.2, 25, 60, 20, 100)],
    ids=["of_ten_seconds", "of_a_minute"],
)
def test_redis_outage_mid_run(  # type: ignore[no-untyped-def]
    fake_provider: FakeProvider,
    private_redis: PrivateRedis,
    celery_worker_factory,
    latency: float,
    items: int,
    outage_s: int,
    after_done: int,
    total: int,
) -> None:
    fake_provider.script(default={"latency": latency})
    run, in_flight = _run_through_outage(
        fake_provider, private_redis, celery_worker_factory, items=items, outage_s=outage_s, after_done=after_done
    )
    _assert_complete_without_duplicates(run, fake_provider, in_flight)
    assert run.total == total


async def _release_without_redis() -> None:
    limiter = ratelimit.RedisLimiter(ratelimit.Limits(max_concurrency=1), "outage-unit", "redis://127.0.0.1:9/0")
    try:
        await limiter.release(ratelimit.Lease("lease", 10), 12)  # must not raise: the call's result is kept
        assert len(limiter._giving_back) == 1  # the lease is given back in the background instead
    finally:
        await limiter.close()


def test_a_lease_given_back_while_redis_is_away_does_not_raise() -> None:
    asyncio.run(_release_without_redis())


async def _acquire_without_redis() -> tuple[ratelimit.Lease | None, int]:
    limiter = ratelimit.RedisLimiter(ratelimit.Limits(max_concurrency=1), "outage-unit", "redis://127.0.0.1:9/0")
    asked: list[int] = []

    def should_stop() -> bool:
        asked.append(1)
        return len(asked) > 4

    try:
        lease = await limiter.acquire(10, should_stop)
        # The slot is free again: a second acquire does not wait for the first.
        again = await asyncio.wait_for(limiter.acquire(10, lambda: True), timeout=1)
        assert again is None
        return lease, len(asked)
    finally:
        await limiter.close()


def test_acquire_waits_for_redis_until_the_run_stops() -> None:
    lease, asked = asyncio.run(_acquire_without_redis())
    assert lease is None  # stopped, not an error: the unit is released, not failed
    assert asked == 5  # it kept retrying while the run went on


def _recorded_sends(run: JudgeRun) -> int:
    """Requests the run has a record of: those counted in its calls, then those recorded and not counted yet (read in
    this order, a flush between the two reads can only make the sum too small, never too large)."""
    counted = JudgeRun.objects.values_list("calls", flat=True).get(pk=run.pk)
    return counted + ProviderSend.objects.filter(judgment__run=run).count()


def _claimed(run: JudgeRun) -> int:
    return Judgment.objects.filter(run=run, status=JudgmentStatus.CLAIMED).count()


def test_calls_lost_with_a_killed_worker_are_counted_in_calls_and_cost(
    fake_provider: FakeProvider, celery_worker_factory, clean_broker: None
) -> None:  # type: ignore[no-untyped-def]
    concurrency = 8
    usage = {"prompt_tokens": 1000, "completion_tokens": 10}
    # The first 16 requests are answered at once and every later one is held, so the kill finds calls in flight
    # however fast the machine is. Once the provider holds as many as the run's concurrency, every slot is taken by
    # a request it received: none is between the send gate and the socket.
    fake_provider.script(
        default={"latency": 20, "usage": usage}, rules=[{"match": "", "behaviour": {"latency": 0}, "times": 16}]
    )
    dataset = make_dataset(items=24, systems=2)
    first = celery_worker_factory(extra_env=WORKER_ENV)
    # A timeout far above the held calls' latency: every request the provider holds is one the worker still waits on.
    config = cfg(fake_provider, max_concurrency=concurrency, timeout_s=30)
    run = services.judge_run_launch(dataset=dataset, config=config, launched_by=None)
    wait_for(lambda: fake_provider.snapshot()["in_flight"] == concurrency, timeout=60, message="all slots in flight")
    received = fake_provider.snapshot()["calls"]
    # A request is recorded within a turn of the slice's loop after it went out; the kill comes after that turn.
    wait_for(lambda: _recorded_sends(run) == received, timeout=10, message="every received request recorded")
    # The dead worker also holds units it has not sent yet (it claims twice its concurrency): they must cost nothing.
    wait_for(lambda: _claimed(run) > concurrency, timeout=10, message="units claimed beyond the calls in flight")
    first.kill()
    fake_provider.script(default={"usage": usage})
    # Claims of 4: the units taken over from the dead worker arrive in several claims, so an estimate from the claimed
    # units (such as one call per unit taken over, up to the concurrency per claim) would count the unsent ones too.
    celery_worker_factory(extra_env={**WORKER_ENV, "JUDGE_CLAIM_BATCH": "4"})
    wait_for(lambda: finished(run), timeout=180, message="the run to finish after the restart")
    run = run_state(run)
    assert run.status == RunStatus.SUCCEEDED, run.notes
    sent = fake_provider.snapshot()["calls"]
    charged = Judgment.objects.filter(run=run).aggregate(n=Sum("lost_calls"), cost=Sum("lost_cost_usd"))
    # Every request the provider received is counted, once, and nothing else: the requests in flight with the dead
    # worker are its lost calls, and the units it had claimed without sending them cost nothing.
    assert run.calls == sent
    # The dead worker's requests in flight at least; more when a live slice's lease ran out on a loaded machine and
    # another slice sent its unit again (both requests reached the provider and are in its count).
    assert charged["n"] >= concurrency
    assert not ProviderSend.objects.filter(judgment__run=run).exists()
    paid = Judgment.objects.filter(run=run).aggregate(cost=Sum("cost_usd"))["cost"]
    assert charged["cost"] > 0
    assert run.cost_usd == pytest.approx(paid + charged["cost"])
    assert f"{charged['n']} call(s) were sent by a worker that stopped" in run.notes

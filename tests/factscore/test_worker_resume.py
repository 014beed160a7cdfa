"""A real Celery worker killed with SIGKILL in the middle of fact verification; a new one finishes."""

import pytest

from judging import services as engine
from judging.factscore.models import FactAnswer, FactVerdict
from judging.models import CachedCompletion, JudgeRun, JudgeScore, Judgment, JudgmentStatus, RunStatus
from tests.conftest import wait_for
from tests.judging.factories import make_dataset
from tests.judging.test_worker_runs import WORKER_ENV

pytestmark = pytest.mark.django_db(transaction=True)

FACTS_PER_ANSWER = 8
MAX_CONCURRENCY = 3
# At a kill: up to MAX_CONCURRENCY calls in flight, and as many answered but not yet written (the
# engine writes results and cache entries every 0.1 s).
IN_FLIGHT_OR_UNWRITTEN = 2 * MAX_CONCURRENCY


def finished(run: JudgeRun) -> bool:
    run.refresh_from_db()
    return run.status not in (RunStatus.QUEUED, RunStatus.RUNNING)


def test_worker_killed_mid_verification_resumes_without_repeating_finished_calls(
    world, world_provider, celery_worker_factory, clean_broker
) -> None:  # type: ignore[no-untyped-def]
    dataset = make_dataset(items=3, systems=2, reference=True)
    expected: dict[int, float] = {}
    for response in dataset.items.first().turns.first().responses.model.objects.filter(turn__item__dataset=dataset):
        facts = [f"Statement {k} about answer {response.pk}." for k in range(FACTS_PER_ANSWER)]
        world.facts[response.text] = facts
        supported = [fact for k, fact in enumerate(facts) if (k + response.pk) % 3 == 0]
        world.true_facts.update(supported)
        expected[response.pk] = len(supported) / FACTS_PER_ANSWER
    # Verification is slow, so the kill lands while answers are half verified.
    world_provider.script(rules=[{"match": "True or False?", "behaviour": {"latency": 0.25}}])
    cfg = {
        "name": "fs-resume",
        "method": "factscore",
        "model": "openai/gpt-4o-mini",
        "api_base": world_provider.base_url,
        "max_concurrency": MAX_CONCURRENCY,
        "timeout_s": 5,
        "max_retries": 3,
        "factscore": {"knowledge": "item"},
    }
    first = celery_worker_factory(extra_env=WORKER_ENV)
    run = engine.judge_run_launch(dataset=dataset, config=cfg, launched_by=None)
    wait_for(lambda: world.requests.count("verify") >= 15, timeout=90, message="verification under way")
    first.kill()
    successes_at_kill = world_provider.successes_per_request()
    # Mid-unit results are already in the shared cache (the units themselves are not finished).
    cached_at_kill = CachedCompletion.objects.count()
    assert cached_at_kill >= len(successes_at_kill) - IN_FLIGHT_OR_UNWRITTEN
    assert Judgment.objects.filter(run=run, status=JudgmentStatus.CLAIMED).exists()
    assert world.requests.count("verify") < 6 * FACTS_PER_ANSWER

    celery_worker_factory(extra_env=WORKER_ENV)
    wait_for(lambda: finished(run), timeout=120, message="run to finish after the restart")
    assert run.status == RunStatus.SUCCEEDED, run.notes
    assert run.done == run.total == 6
    assert Judgment.objects.filter(run=run).count() == 6  # exactly one judgment per unit

    # The engine marks the run finished, then writes the judge scores.
    wait_for(
        lambda: JudgeScore.objects.filter(judge=run.judge).count() == 6, timeout=10, message="judge scores written"
    )
    # ... and, once they are committed, projects the judgments into facts.
    wait_for(
        lambda: JudgeRun.objects.filter(pk=run.pk, results_projected_at__isnull=False).exists(),
        timeout=10,
        message="FActScore results projected",
    )
    scores = dict(
        JudgeScore.objects.filter(judge=run.judge, aspect_name="factscore").values_list("response_id", "value")
    )
    assert scores == pytest.approx(expected)
    assert FactVerdict.objects.filter(fact__answer__run=run).count() == 6 * FACTS_PER_ANSWER
    assert set(FactAnswer.objects.filter(run=run).values_list("stage", flat=True)) == {"done"}

    # Every request answered and written before the kill was served from the cache afterwards; only
    # calls in flight at the kill, or answered within the last write interval, were sent again.
    attempts = world_provider.attempts_per_request()
    repeated = [key for key, n in attempts.items() if n > 1]
    assert len(repeated) <= IN_FLIGHT_OR_UNWRITTEN
    assert all(n <= 2 for n in attempts.values())
    assert len(attempts) == 6 + 6 * FACTS_PER_ANSWER  # every distinct request was made
    answered_before = [key for key in successes_at_kill if key not in repeated]
    assert len(answered_before) >= 15 - IN_FLIGHT_OR_UNWRITTEN

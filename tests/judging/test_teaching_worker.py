"""Teaching end to end on real Celery worker processes, against the fake provider on a real socket: the parent run,
the two held-out runs and the comparison all run on the workers."""

import pytest

from judging import services
from judging.certification.reference_sets import reference_set_create
from judging.certification.teaching import judge_version_teach
from judging.models import JudgeExemplar, JudgeRun, JudgeScore, JudgeTeaching, RunStatus, TeachingDecision
from tests.conftest import wait_for
from tests.fakeprovider import FakeProvider
from tests.judging.certification_data import SNAPSHOT, rated_dataset
from tests.judging.teaching_data import learns_from_examples

pytestmark = pytest.mark.django_db(transaction=True)

WORKER_ENV = {"JUDGE_API_BASE_ALLOWLIST": "127.0.0.1", "JUDGE_RETRY_BASE_MS": "20", "JUDGE_RETRY_CAP_S": "1"}


def test_teach_compare_and_keep_on_workers(
    fake_provider: FakeProvider, celery_worker_factory, clean_broker: None
) -> None:  # type: ignore[no-untyped-def]
    fake_provider.script(default={"served_model": SNAPSHOT})
    fake_provider.content_fn = learns_from_examples()
    dataset = rated_dataset()
    celery_worker_factory(extra_env=WORKER_ENV)
    config = {
        "name": "worker-taught",
        "method": "single",
        "model": "openai/gpt-4o-mini",
        "api_base": fake_provider.base_url,
        "max_concurrency": 8,
        "timeout_s": 5,
        "max_retries": 3,
    }
    run = services.judge_run_launch(dataset=dataset, config=config, launched_by=None)

    def run_versioned() -> bool:
        run.refresh_from_db()
        return run.status not in (RunStatus.QUEUED, RunStatus.RUNNING) and run.version_id is not None

    wait_for(run_versioned, timeout=120, message="the judge run to end with a version")
    assert run.version is not None
    reference = reference_set_create(dataset=dataset, name="gold", owner=None)
    teaching = judge_version_teach(version=run.version, reference_set=reference, requested_by=None, per_level=2, seed=9)

    def decided() -> bool:
        teaching.refresh_from_db()
        return bool(teaching.decision)

    wait_for(decided, timeout=180, message="the teaching to be decided by the worker")
    assert teaching.decision == TeachingDecision.KEPT, teaching.reason
    evidence = teaching.evidence["overall"]
    assert evidence["n"] == teaching.held_out == 30 and evidence["p_holm"] < 0.05
    taught = teaching.taught_version
    assert taught is not None and taught.parent_id == run.version_id
    shown = set(JudgeExemplar.objects.filter(version=taught).values_list("response_id", flat=True))
    assert len(shown) == 10
    assert teaching.taught_run_id is not None
    taught_run = JudgeRun.objects.get(pk=teaching.taught_run_id)
    scored = set(JudgeScore.objects.filter(judge_id=taught_run.judge_id).values_list("response_id", flat=True))
    assert len(scored) == 30 and not scored & shown
    assert JudgeTeaching.objects.count() == 1

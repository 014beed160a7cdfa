"""Teaching end to end on real Celery worker processes, against the fake provider on a real socket: the parent run,
the two held-out runs and the comparison all run on the workers."""

import pytest

from judging.certification.reference_sets import reference_set_create
from judging.certification.teaching import judge_version_teach
from judging.models import JudgeExemplar, JudgeRun, JudgeScore, JudgeTeaching, TeachingDecision
from tests.conftest import wait_for
from tests.fakeprovider import FakeProvider
from tests.judging.certification_data import versioned_run_on_workers
from tests.judging.teaching_data import learns_from_examples

pytestmark = pytest.mark.django_db(transaction=True)


def test_teach_compare_and_keep_on_workers(
    fake_provider: FakeProvider, celery_worker_factory, clean_broker: None
) -> None:  # type: ignore[no-untyped-def]
    dataset, run = versioned_run_on_workers(
        fake_provider, celery_worker_factory, name="worker-taught", content_fn=learns_from_examples()
    )
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

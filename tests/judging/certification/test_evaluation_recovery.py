"""A certificate or teaching whose evaluating worker died is handed to another worker by the periodic reclaim, and a
late write of the dead worker's claim is dropped. In this process (Celery eager) against the fake provider."""

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from judging.certification import certificates
from judging.certification.certificates import certificate_evaluate, certificate_request
from judging.certification.evaluations import evaluations_reclaim_stale
from judging.certification.reference_sets import reference_set_create
from judging.certification.teaching import judge_version_teach
from judging.models import (
    Certificate,
    CertificateStatus,
    JudgeRun,
    JudgeTeaching,
    JudgeVersion,
    ReferenceSet,
    TeachingDecision,
    TeachingStatus,
)
from tests.fakeprovider import FakeProvider
from tests.judging.certification_data import rated_dataset, versioned_run_in_process
from tests.judging.teaching_data import learns_from_examples

pytestmark = pytest.mark.django_db


def version_and_reference(fake: FakeProvider, capture: Any) -> tuple[JudgeVersion, ReferenceSet]:
    """A version from a run over a rated dataset, and a reference set frozen from that dataset's ratings."""
    dataset = rated_dataset()
    run = versioned_run_in_process(dataset, fake, capture, name="recovered", content_fn=learns_from_examples())
    assert run.version is not None
    return run.version, reference_set_create(dataset=dataset, name="gold", owner=None)


def test_a_certificate_left_evaluating_by_a_dead_worker_is_evaluated_again(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    version, reference = version_and_reference(fake_provider, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        certificate = certificate_request(version=version, reference_set=reference, requested_by=None)
    certificate.refresh_from_db()
    verdict = certificate.status
    assert verdict in (CertificateStatus.PASSED, CertificateStatus.FAILED), certificate.reason
    # A worker claimed the evaluation twenty minutes ago and died before writing it.
    Certificate.objects.filter(pk=certificate.pk).update(
        status=CertificateStatus.EVALUATING,
        evaluation_claimed_at=timezone.now() - timedelta(minutes=20),
        results={},
        reason="",
    )
    # A recent claim is left alone: its worker may still be at it.
    assert evaluations_reclaim_stale(older_than_s=3600) == 0
    certificate.refresh_from_db()
    assert certificate.status == CertificateStatus.EVALUATING
    with django_capture_on_commit_callbacks(execute=True):
        assert evaluations_reclaim_stale(older_than_s=600) == 1
    certificate.refresh_from_db()
    assert certificate.status == verdict and certificate.results["overall"]["n_answers"] == 40
    # Nothing is stale now; reclaiming again hands back nothing.
    assert evaluations_reclaim_stale(older_than_s=0) == 0


def test_a_late_write_of_a_handed_back_claim_is_dropped(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    version, reference = version_and_reference(fake_provider, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=False):
        certificate = certificate_request(version=version, reference_set=reference, requested_by=None)
    assert certificate.run is not None
    JudgeRun.objects.filter(pk=certificate.run.pk).update(status="succeeded")
    evaluate = certificates._evaluate

    def slow_evaluation(certificate: Certificate, run: JudgeRun) -> Any:
        # While this worker evaluates, its claim is handed back and another worker claims the certificate.
        Certificate.objects.filter(pk=certificate.pk).update(evaluation_claimed_at=timezone.now())
        return evaluate(certificate, run)

    monkeypatch.setattr(certificates, "_evaluate", slow_evaluation)
    assert certificate_evaluate(certificate_id=certificate.pk) == "claim lost"
    certificate.refresh_from_db()
    assert certificate.status == CertificateStatus.EVALUATING and certificate.reason == ""


def test_a_teaching_left_evaluating_is_decided_again(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    version, reference = version_and_reference(fake_provider, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        teaching = judge_version_teach(version=version, reference_set=reference, requested_by=None)
    teaching.refresh_from_db()
    assert teaching.decision == TeachingDecision.KEPT, teaching.reason
    JudgeTeaching.objects.filter(pk=teaching.pk).update(
        status=TeachingStatus.EVALUATING, decision="", reason="", evidence={}, evaluation_claimed_at=None
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert evaluations_reclaim_stale() == 1
    teaching.refresh_from_db()
    assert teaching.status == TeachingStatus.DONE and teaching.decision == TeachingDecision.KEPT
    assert teaching.evidence["overall"]["n"] == teaching.held_out

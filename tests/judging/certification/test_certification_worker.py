"""Certification and the drift check end to end on real Celery worker processes, against the fake provider."""

import pytest

from judging.certification.certificates import certificate_request
from judging.certification.drift import drift_checks_start
from judging.certification.reference_sets import reference_set_create
from judging.models import Certificate, CertificateStatus, DriftCheck, DriftCheckStatus, JudgeRun, RunStatus
from tests.conftest import wait_for
from tests.fakeprovider import FakeProvider
from tests.judging.certification_data import (
    SNAPSHOT,
    answer_with_truth,
    versioned_run_on_workers,
)

pytestmark = pytest.mark.django_db(transaction=True)

SWITCHED = "gpt-4o-mini-2025-06-30"


def settled(certificate: Certificate) -> bool:
    certificate.refresh_from_db()
    return certificate.status not in (CertificateStatus.PENDING, CertificateStatus.EVALUATING)


def test_certify_then_suspend_when_the_provider_switches_model_on_workers(
    fake_provider: FakeProvider, celery_worker_factory, clean_broker: None
) -> None:  # type: ignore[no-untyped-def]
    dataset, run = versioned_run_on_workers(
        fake_provider, celery_worker_factory, name="worker-certified", content_fn=answer_with_truth()
    )
    assert run.status == RunStatus.SUCCEEDED, run.notes
    assert run.version is not None and run.version.provider_model == SNAPSHOT

    reference = reference_set_create(dataset=dataset, name="gold", owner=None)
    certificate = certificate_request(version=run.version, reference_set=reference, requested_by=None)
    wait_for(lambda: settled(certificate), timeout=120, message="the certificate to be evaluated by the worker")
    assert certificate.status == CertificateStatus.PASSED, certificate.reason
    assert certificate.run is not None and certificate.run.status == RunStatus.SUCCEEDED
    overall = certificate.results["overall"]
    assert overall["n_answers"] == 40 and overall["omega"] >= 0.5 and overall["verdict"] == "passed"

    fake_provider.script(default={"served_model": SWITCHED})
    assert drift_checks_start(sample_size=8, seed=21) == 1
    check = DriftCheck.objects.get(certificate=certificate)

    def check_done() -> bool:
        check.refresh_from_db()
        return check.status == DriftCheckStatus.DONE

    wait_for(check_done, timeout=120, message="the drift check to be evaluated by the worker")
    certificate.refresh_from_db()
    assert check.drifted is True
    assert certificate.status == CertificateStatus.SUSPENDED and SWITCHED in certificate.suspension_reason
    assert check.run_id is not None
    drift_run = JudgeRun.objects.get(pk=check.run_id)
    assert drift_run.total == 8
    served = [entry["model"] for entry in fake_provider.request_log()]
    assert served.count(SWITCHED) == 8 and served.count(SNAPSHOT) == 80  # the first run and the certification's

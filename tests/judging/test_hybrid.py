"""Hybrid campaigns: calibrating a certified judge version with Trust or Escalate on its reference set, the refusals,
applying it to a campaign (Celery eager, the fake provider on a real socket) and what the exports and the human
agreement statistics make of the judge-filled ratings."""

import csv
import io
import json
from typing import Any

import pytest
from django.db import DatabaseError, IntegrityError, transaction

from annotations.datasets.downloads import iter_export
from annotations.datasets.flat_export import iter_flat_rows
from annotations.datasets.parquet_export import parquet_bytes
from annotations.hybrid.selectors import hybrid_counts
from annotations.models import Assignment, AssignmentStatus, Campaign, JudgeFilledRating, Response
from judging.certification.certificates import certificate_request, certificate_suspend
from judging.certification.reference_sets import reference_set_create
from judging.hybrid import services as hybrid
from judging.hybrid.services import HybridError
from judging.models import Certificate, CertificateStatus, HybridApplyStatus, HybridCalibration, RunStatus
from judging.statistics.trust_escalate import modal_label, trust_or_escalate
from tests.annotate.factories import make_campaign
from tests.fakeprovider import FakeProvider
from tests.judging.certification_data import rated_dataset, true_score
from tests.judging.factories import launch, make_dataset
from tests.judging.hybrid_data import HESITANT, SURE, judge_config, script_judge

pytestmark = pytest.mark.django_db

TARGET, DELTA, MIN_KEPT = 0.8, 0.1, 10


def certified(fake: FakeProvider, capture, items: int = 60) -> tuple[Any, Certificate]:  # type: ignore[no-untyped-def]
    dataset = rated_dataset(items=items)
    script_judge(fake)
    run = launch(dataset, judge_config(fake), capture)
    assert run.status == RunStatus.SUCCEEDED, run.notes
    reference = reference_set_create(dataset=dataset, name="gold", owner=None)
    assert run.version is not None
    with capture(execute=True):
        certificate = certificate_request(version=run.version, reference_set=reference, requested_by=None)
    certificate.refresh_from_db()
    assert certificate.status == CertificateStatus.PASSED, certificate.reason
    return dataset, certificate


def campaign_of(dataset, annotators, name: str = "hybrid") -> Campaign:  # type: ignore[no-untyped-def]
    return make_campaign(dataset, annotators, name=name, raters_per_item=2, rationale_required=False)


CertifiedCampaign = tuple[Any, Certificate, Campaign]


@pytest.fixture
def certified_campaign(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks, annotators
) -> CertifiedCampaign:  # type: ignore[no-untyped-def]
    """A rated dataset, a passing certificate of the judge version that rated it, and a campaign on the dataset."""
    dataset, certificate = certified(fake_provider, django_capture_on_commit_callbacks)
    return dataset, certificate, campaign_of(dataset, annotators)


def calibrate(campaign: Campaign, version, **overrides: Any) -> HybridCalibration:  # type: ignore[no-untyped-def]
    """The version's calibration on the campaign, at this file's target, delta and least kept unless overridden."""
    figures = {"target": TARGET, "delta": DELTA, "min_kept": MIN_KEPT, **overrides}
    return hybrid.hybrid_calibrate(campaign=campaign, version=version, user=None, **figures)


def expected_calibration(dataset) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """The calibration worked out from the data's design, through the pure function: an answer whose raters tie is
    left out; the judge is sure and right below quality 5 and hesitant and wrong at 5."""
    confidence, agreed = [], []
    for response in Response.objects.filter(turn__item__dataset=dataset):
        label = modal_label(list(response.ratings.values_list("value", flat=True)))
        if label is None:
            continue
        truth = true_score(response.pk)
        chosen = truth if truth < 5 else 4
        confidence.append(SURE if truth < 5 else HESITANT)
        agreed.append(chosen == label)
    return dict(trust_or_escalate(confidence, agreed, target=TARGET, delta=DELTA, min_kept=MIN_KEPT))


def test_calibration_is_stored_with_every_figure(certified_campaign: CertifiedCampaign) -> None:
    dataset, certificate, campaign = certified_campaign
    calibration = calibrate(campaign, certificate.version)
    expected = expected_calibration(dataset)
    assert expected["undefined"] is None
    assert calibration.threshold == pytest.approx(SURE) == pytest.approx(expected["threshold"]["value"])
    assert calibration.n == expected["n"] and calibration.kept == expected["kept"]
    assert calibration.coverage == pytest.approx(expected["coverage"]["value"])
    assert calibration.empirical_agreement == pytest.approx(expected["empirical_agreement"]["value"])
    assert calibration.agreement_lower_bound == pytest.approx(expected["agreement_lower_bound"]["value"])
    assert calibration.agreement_lower_bound >= TARGET
    assert (calibration.target, calibration.delta, calibration.min_kept) == (TARGET, DELTA, MIN_KEPT)
    assert calibration.certificate_id == certificate.pk and calibration.version_id == certificate.version_id
    assert calibration.confidence_sources["score_distribution"] == 60
    assert calibration.left_out == 60 - calibration.n
    assert calibration.undefined_reason == ""


def test_a_stored_calibration_is_either_defined_or_carries_its_reason(certified_campaign: CertifiedCampaign) -> None:
    _, certificate, campaign = certified_campaign
    fields = dict(campaign=campaign, version=certificate.version, certificate=certificate, delta=0.1, min_kept=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        HybridCalibration.objects.create(**fields, target=0.9, n=10, kept=0, undefined_reason="")
    with pytest.raises(IntegrityError), transaction.atomic():
        HybridCalibration.objects.create(**fields, target=1.5, n=10, kept=0, undefined_reason="too few")
    undefined = HybridCalibration.objects.create(**fields, target=0.9, n=10, kept=0, undefined_reason="too few")
    with pytest.raises(IntegrityError), transaction.atomic():
        HybridCalibration.objects.filter(pk=undefined.pk).update(apply_status=HybridApplyStatus.RUNNING)


def test_no_passing_threshold_is_undefined_with_the_reason_and_cannot_be_applied(
    certified_campaign: CertifiedCampaign,
) -> None:
    _, certificate, campaign = certified_campaign
    calibration = calibrate(campaign, certificate.version, target=0.999, delta=0.01)
    assert calibration.threshold is None and calibration.coverage is None
    assert "calibration items; at least" in calibration.undefined_reason or "no threshold passes" in (
        calibration.undefined_reason
    )
    with pytest.raises(HybridError, match="the campaign stays human"):
        hybrid.hybrid_apply(calibration=calibration, user=None)
    assert not Assignment.objects.filter(campaign=campaign, status=AssignmentStatus.JUDGED).exists()


def test_refused_for_an_uncertified_or_suspended_version_and_for_several_answers_per_task(
    certified_campaign: CertifiedCampaign, fake_provider: FakeProvider, django_capture_on_commit_callbacks, annotators
) -> None:  # type: ignore[no-untyped-def]
    dataset, certificate, campaign = certified_campaign
    changed = launch(dataset, judge_config(fake_provider, prompt=PROMPT), django_capture_on_commit_callbacks)
    assert changed.version is not None and changed.version_id != certificate.version_id
    with pytest.raises(HybridError, match="holds no passing certificate"):
        calibrate(campaign, changed.version)
    calibration = calibrate(campaign, certificate.version)
    assert certificate_suspend(certificate_id=certificate.pk, reason="the provider switched models")
    with pytest.raises(HybridError, match=r"suspended.*the provider switched models"):
        calibrate(campaign, certificate.version)
    with pytest.raises(HybridError, match="is suspended"):
        hybrid.hybrid_apply(calibration=calibration, user=None)
    assert HybridCalibration.objects.get(pk=calibration.pk).apply_status == ""
    wide = make_dataset(items=2, systems=2)
    with pytest.raises(HybridError, match="one answer per task"):
        calibrate(campaign_of(wide, annotators, "wide"), certificate.version)


PROMPT = "Grade this answer.\nQuestion: {question}\nAnswer: {answer}\n{aspect}: {scale}\nEnd with Score: N"


def applied(fake_provider, capture, annotators):  # type: ignore[no-untyped-def]
    dataset, certificate = certified(fake_provider, capture)
    campaign = campaign_of(dataset, annotators)
    calibration = calibrate(campaign, certificate.version)
    with capture(execute=True):
        hybrid.hybrid_apply(calibration=calibration, user=None)
    calibration.refresh_from_db()
    return dataset, campaign, calibration


def test_apply_hands_the_confident_tasks_to_the_judge_once(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks, annotators
) -> None:  # type: ignore[no-untyped-def]
    dataset, campaign, calibration = applied(fake_provider, django_capture_on_commit_callbacks, annotators)
    assert calibration.apply_status == HybridApplyStatus.DONE, calibration.apply_note
    sure = {r.pk for r in Response.objects.filter(turn__item__dataset=dataset) if true_score(r.pk) < 5}
    filled = JudgeFilledRating.objects.filter(campaign=campaign)
    assert set(filled.values_list("response_id", flat=True)) == sure
    assert all(row.value == true_score(row.response_id) for row in filled)
    assert set(filled.values_list("judge_version", flat=True)) == {calibration.version.fingerprint}
    assert calibration.judged_tasks == len(sure) and calibration.human_tasks == 60 - len(sure)
    judged = Assignment.objects.filter(campaign=campaign, status=AssignmentStatus.JUDGED)
    assert judged.count() == 2 * len(sure) and not judged.filter(annotator__isnull=False).exists()
    assert set(judged.values_list("task__responses", flat=True)) == sure
    counts = hybrid_counts(campaign)
    assert (counts.judged_tasks, counts.saved_slots, counts.human_tasks) == (len(sure), 2 * len(sure), 60 - len(sure))
    # Safe twice: the task finds nothing to claim, and the service refuses a second application.
    assert hybrid.hybrid_fill(calibration_id=calibration.pk) == "not claimed"
    with pytest.raises(HybridError, match="already"):
        hybrid.hybrid_apply(calibration=calibration, user=None)
    assert filled.count() == len(sure)
    # A judged slot is never handed out: the people get only the hesitant tasks.
    from annotations.campaigns.claims import assignment_claim

    claim = assignment_claim(campaign=campaign, user=annotators[0])
    assert claim is not None
    assert set(claim.task.responses.values_list("pk", flat=True)).isdisjoint(sure)
    # And the database refuses a judged slot that names a person, reopening one, and a judge's rating on a task
    # that people still rate.
    slot = judged.first()
    with pytest.raises(IntegrityError), transaction.atomic():
        judged.filter(pk=slot.pk).update(annotator=annotators[1])
    with pytest.raises(DatabaseError), transaction.atomic():
        judged.filter(pk=slot.pk).update(status=AssignmentStatus.FREE)
    human_task = Assignment.objects.filter(campaign=campaign, status=AssignmentStatus.FREE).first().task
    with pytest.raises(DatabaseError), transaction.atomic():
        JudgeFilledRating.objects.create(
            campaign=campaign,
            task=human_task,
            response=human_task.responses.get(),
            aspect=campaign.aspects.get(),
            value=5,
            confidence=0.5,
            judge_name="forged",
            judge_version="f" * 64,
        )
    assert not JudgeFilledRating.objects.filter(judge_name="forged").exists()


def test_exports_mark_judge_filled_ratings_and_human_agreement_ignores_them(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks, annotators
) -> None:  # type: ignore[no-untyped-def]
    from judging.analysis.reports import compute_agreement_report, load_dataset_data

    def agreement_report(dataset):  # type: ignore[no-untyped-def]
        # Computed afresh each time, past the report cache, so the comparison below reads the ratings again.
        return compute_agreement_report(dataset, load_dataset_data(dataset))

    dataset, certificate = certified(fake_provider, django_capture_on_commit_callbacks)
    before = agreement_report(dataset)
    campaign = campaign_of(dataset, annotators)
    calibration = calibrate(campaign, certificate.version)
    with django_capture_on_commit_callbacks(execute=True):
        hybrid.hybrid_apply(calibration=calibration, user=None)
    n_filled = JudgeFilledRating.objects.filter(campaign=campaign).count()
    assert n_filled > 0
    assert agreement_report(dataset) == before
    rows = list(iter_flat_rows(dataset=dataset))
    judge_rows = [row for row in rows if row["filled_by"] == "judge"]
    assert len(judge_rows) == n_filled
    assert {row["judge_version"] for row in judge_rows} == {certificate.version.fingerprint}
    assert {row["origin"] for row in judge_rows} == {"judge"} and {row["campaign"] for row in judge_rows} == {"hybrid"}
    assert {row["filled_by"] for row in rows if row not in judge_rows} == {"human"}
    header, *body = list(csv.reader(io.StringIO("".join(iter_export(dataset=dataset, kind="flat-csv")))))
    assert header[-3:-1] == ["filled_by", "judge_version"]
    assert sum(1 for line in body if line[-3] == "judge") == n_filled
    objects = [json.loads(line) for line in iter_export(dataset=dataset, kind="judges-jsonl")]
    answers = [a for item in objects for turn in item["turns"] for a in turn["responses"].values()]
    filled = [entry for a in answers for entry in a.get("judge_filled", [])]
    assert len(filled) == n_filled and {e["filled_by"] for e in filled} == {"judge"}
    standings = {name: s for a in answers for name, s in a.get("judge_certification", {}).items()}
    assert set(standings.values()) == {"certified"}
    import pyarrow.parquet as pq

    table = pq.read_table(io.BytesIO(parquet_bytes(dataset=dataset, table="ratings")))
    assert table.column("filled_by").to_pylist().count("judge") == n_filled

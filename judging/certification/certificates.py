"""Certificates: a judge version run on a reference set and held to the alternative-annotator test per aspect."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from judging.certification.evaluations import (
    CERTIFIABLE_METHODS,
    CertificationError,
    evaluable_or_error,
    evaluation_claim,
    evaluation_run_launch,
    evaluation_store,
    fresh_config,
    probability_or_error,
)
from judging.certification.reference_sets import reference_response_ids
from judging.certification.selectors import reference_ratings_for
from judging.models import (
    ENDED_RUN_STATUSES,
    Certificate,
    CertificateStatus,
    HybridCalibration,
    JudgeRun,
    JudgeScore,
    JudgeVersion,
    ReferenceSet,
    RunStatus,
)

# The strictest margin the alternative-annotator test's authors suggest, the default on the judges page too.
DEFAULT_EPSILON = 0.1
DEFAULT_Q = 0.05


def certificate_request(
    *,
    version: JudgeVersion,
    reference_set: ReferenceSet,
    requested_by: User | None,
    epsilon: float = DEFAULT_EPSILON,
    q: float = DEFAULT_Q,
) -> Certificate:
    """Run the version on the reference set (a normal judge run, on the workers); the certificate is evaluated when
    the run ends."""
    if not 0.0 <= epsilon < 1.0:
        raise CertificationError(f"epsilon must lie in [0, 1), not {epsilon}")
    probability_or_error(q, "q")
    evaluable_or_error(
        version,
        CERTIFIABLE_METHODS,
        refusal="certified: the alternative-annotator test needs one score per answer (methods {methods})",
    )
    with transaction.atomic():
        run = evaluation_run_launch(
            dataset=reference_set.dataset,
            config=fresh_config(version),
            launched_by=requested_by,
            response_ids=reference_response_ids(reference_set, version),
            name=f"certify {version.short} on {reference_set.name}",
        )
        return Certificate.objects.create(
            version=version,
            reference_set=reference_set,
            run=run,
            epsilon=epsilon,
            q=q,
            fingerprint=version.fingerprint,
            requested_by=requested_by,
        )


def _labels_and_scores(
    reference_set: ReferenceSet, run: JudgeRun, aspect: str, version: JudgeVersion
) -> tuple[Any, Any, int]:
    import numpy as np  # noqa: PLC0415 - only an evaluation needs it

    from judging.statistics.alt_test import Labels  # noqa: PLC0415 - numpy, see above

    rows = list(
        reference_ratings_for(reference_set, version)
        .filter(aspect_name=aspect)
        .values_list("response_id", "rater_key", "value")
        .order_by("pk")
    )
    answers = sorted({response_id for response_id, _, _ in rows})
    raters = sorted({rater for _, rater, _ in rows})
    answer_index = {response_id: i for i, response_id in enumerate(answers)}
    rater_index = {rater: i for i, rater in enumerate(raters)}
    labels = Labels(
        answer=np.asarray([answer_index[r] for r, _, _ in rows], dtype=np.int64),
        rater=np.asarray([rater_index[k] for _, k, _ in rows], dtype=np.int64),
        value=np.asarray([v for _, _, v in rows], dtype=np.float64),
        rater_labels=tuple(raters),
    )
    judge = np.full(len(answers), np.nan)
    for response_id, value in JudgeScore.objects.filter(
        judge_id=run.judge_id, aspect_name=aspect, response_id__in=answers
    ).values_list("response_id", "value"):
        judge[answer_index[response_id]] = value
    return labels, judge, len(answers)


def _aspect_result(
    reference_set: ReferenceSet, run: JudgeRun, aspect: str, level: str, certificate: Certificate
) -> dict[str, Any]:
    from judging.statistics.alt_test import alt_test, metric_for_level  # noqa: PLC0415 - numpy and scipy

    labels, judge, n_answers = _labels_and_scores(reference_set, run, aspect, certificate.version)
    result = alt_test(labels, judge, epsilon=certificate.epsilon, q=certificate.q, metric=metric_for_level(level))
    passed = result["passed"]["value"]
    verdict = "undefined" if passed is None else ("passed" if passed else "failed")
    return {
        "n_answers": n_answers,
        "n_ratings": int(labels.value.size),
        "n_judged": int((judge == judge).sum()),
        "raters_tested": result["raters_tested"],
        "epsilon": certificate.epsilon,
        "q": certificate.q,
        "metric": result["metric"],
        "omega": result["winning_rate"]["value"],
        "rho": result["advantage_probability"]["value"],
        "verdict": verdict,
        "undefined": result["passed"]["undefined"],
        "raters": [
            {"rater": r["rater"], "n": r["n"], "rejected": r["rejected"], "skipped": r["skipped"]}
            for r in result["raters"]
        ],
    }


def certificate_evaluate(*, certificate_id: int) -> str:
    """Apply the alternative-annotator test per aspect once the certification run has ended. Safe twice: the first
    call claims the certificate (pending → evaluating); another finds nothing to claim."""
    claim = evaluation_claim(
        Certificate.objects.filter(
            pk=certificate_id, status=CertificateStatus.PENDING, run__status__in=ENDED_RUN_STATUSES
        ),
        evaluating=CertificateStatus.EVALUATING,
    )
    if claim is None:
        return "not claimed"
    certificate = Certificate.objects.select_related("run", "version", "reference_set").get(pk=certificate_id)
    run = certificate.run
    assert run is not None  # the claim required its status
    status, reason, results = _evaluate(certificate, run)
    stored = evaluation_store(
        Certificate.objects.filter(pk=certificate_id),
        evaluating=CertificateStatus.EVALUATING,
        claim=claim,
        status=status,
        reason=reason,
        results=results,
        certified_at=timezone.now(),
    )
    if stored and status == CertificateStatus.PASSED:
        _certified_campaigns_check(certificate.version_id)
    return status if stored else "claim lost"


def _certified_campaigns_check(version_id: int) -> None:
    """Ask every running campaign whose stopping rule waits for this version's certificate to read it again, once
    the verdict commits (the check itself decides on which aspect, and is safe to run twice)."""
    from judging.enqueue import CAMPAIGN_STOP_CHECK, run_task_enqueue  # noqa: PLC0415 - loads Celery on first send

    waiting = (
        HybridCalibration.objects.filter(
            version_id=version_id, campaign__stop_rule="certified", campaign__stopped_at__isnull=True
        )
        .values_list("campaign_id", flat=True)
        .distinct()
    )
    for campaign_id in sorted(set(waiting)):
        run_task_enqueue(CAMPAIGN_STOP_CHECK, campaign_id, on_commit=True)


def _evaluate(certificate: Certificate, run: JudgeRun) -> tuple[str, str, dict[str, Any]]:
    if run.status != RunStatus.SUCCEEDED:
        return CertificateStatus.UNDEFINED, f"the certification run ended {run.status}: {run.notes}".strip(), {}
    if run.version_id != certificate.version_id:
        now = run.version.provider_model if run.version is not None else run.version_problem
        return (
            CertificateStatus.UNDEFINED,
            f"the run did not reproduce version {certificate.version.short}: the provider now serves {now} "
            f"(version of the run: {run.version.short if run.version else 'none'}); certify that version instead",
            {},
        )
    levels = dict(
        certificate.reference_set.ratings.values_list("aspect_name", "aspect_level").distinct().order_by("aspect_name")
    )
    judged = set(JudgeScore.objects.filter(judge_id=run.judge_id).values_list("aspect_name", flat=True).distinct())
    results = {
        aspect: _aspect_result(certificate.reference_set, run, aspect, level, certificate)
        for aspect, level in levels.items()
        if aspect in judged
    }
    if not results:
        return CertificateStatus.UNDEFINED, "the judge scored no aspect that the reference set rates", {}
    verdicts = {row["verdict"] for row in results.values()}
    if "failed" in verdicts:
        failed = [a for a, row in results.items() if row["verdict"] == "failed"]
        return CertificateStatus.FAILED, f"fails the alternative-annotator test on {', '.join(failed)}", results
    if "undefined" in verdicts:
        why = "; ".join(f"{a}: {row['undefined']}" for a, row in results.items() if row["verdict"] == "undefined")
        return CertificateStatus.UNDEFINED, f"the test is undefined on {why}", results
    return CertificateStatus.PASSED, "passes the alternative-annotator test on every aspect", results


def certificate_suspend(*, certificate_id: int, reason: str) -> bool:
    """Suspend a passed certificate; True when this call did it."""
    if not reason:
        raise CertificationError("a suspension needs its reason")
    return bool(
        Certificate.objects.filter(pk=certificate_id, status=CertificateStatus.PASSED).update(
            status=CertificateStatus.SUSPENDED, suspended_at=timezone.now(), suspension_reason=reason
        )
    )

"""Drift checks: a certified version in use run again on a sample of its reference set, its certificate suspended
when the provider names another model or the scores moved beyond sampling error."""

from __future__ import annotations

import logging
import secrets
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from judging.certification.certificates import certificate_suspend
from judging.certification.evaluations import (
    CertificationError,
    evaluation_claim,
    evaluation_run_launch,
    evaluation_store,
    fresh_config,
)
from judging.certification.reference_sets import reference_response_ids
from judging.models import (
    ENDED_RUN_STATUSES,
    Certificate,
    CertificateStatus,
    DriftCheck,
    DriftCheckStatus,
    JudgeRun,
    JudgeScore,
    RunStatus,
)
from judging.versions import provider_models_of_run

log = logging.getLogger(__name__)

DRIFT_SAMPLE_SIZE = 20


def drift_sample(response_ids: list[int], *, seed: int, size: int) -> list[int]:
    """A simple random sample without replacement of the reference answers, reproducible from its seed."""
    import numpy as np  # noqa: PLC0415 - only a drift check needs it

    ordered = sorted(response_ids)
    if len(ordered) <= size:
        return ordered
    chosen = np.random.default_rng(seed).choice(len(ordered), size=size, replace=False)
    return sorted(ordered[int(i)] for i in chosen)


def certificates_in_use() -> list[Certificate]:
    """Passed certificates of versions that have a run outside certification, drift checks and teaching (the version
    is used), each the newest passed one of its version and reference set."""
    used = (
        JudgeRun.objects.filter(
            version__isnull=False,
            certificate__isnull=True,
            drift_check__isnull=True,
            teaching_as_parent__isnull=True,
            teaching_as_taught__isnull=True,
        )
        .values_list("version_id", flat=True)
        .distinct()
    )
    return list(
        Certificate.objects.filter(status=CertificateStatus.PASSED, version_id__in=used)
        .select_related("version", "reference_set")
        .order_by("pk")
    )


def drift_checks_start(*, sample_size: int = DRIFT_SAMPLE_SIZE, seed: int | None = None) -> int:
    """Start a drift check for each certificate in use that has none open. Safe twice: a certificate has at most one
    open check (a database constraint). Returns how many started."""
    started = 0
    for certificate in certificates_in_use():
        if DriftCheck.objects.filter(certificate=certificate).exclude(status=DriftCheckStatus.DONE).exists():
            continue
        check_seed = secrets.randbits(48) if seed is None else seed
        sample = drift_sample(
            reference_response_ids(certificate.reference_set, certificate.version), seed=check_seed, size=sample_size
        )
        try:
            with transaction.atomic():
                check = DriftCheck.objects.create(certificate=certificate, seed=check_seed, sample_size=len(sample))
                run = evaluation_run_launch(
                    dataset=certificate.reference_set.dataset,
                    config=fresh_config(certificate.version),
                    launched_by=certificate.requested_by,
                    response_ids=sample,
                    name=f"drift check {certificate.version.short}",
                )
                DriftCheck.objects.filter(pk=check.pk).update(run=run)
        except IntegrityError:
            continue  # another beat started this certificate's check first
        except CertificationError as exc:
            log.warning("drift check of certificate %s not started: %s", certificate.pk, exc)
            continue
        started += 1
    return started


def drift_check_evaluate(*, check_id: int) -> str:
    """Compare the check's run with the certified scores; suspend the certificate when the provider names another
    model or the paired test finds the scores moved. Safe twice: claimed running → evaluating."""
    claim = evaluation_claim(
        DriftCheck.objects.filter(pk=check_id, status=DriftCheckStatus.RUNNING, run__status__in=ENDED_RUN_STATUSES),
        evaluating=DriftCheckStatus.EVALUATING,
    )
    if claim is None:
        return "not claimed"
    check = DriftCheck.objects.select_related("run", "run__version", "certificate", "certificate__version").get(
        pk=check_id
    )
    outcome, reason = _drift_outcome(check)
    with transaction.atomic():
        stored = evaluation_store(
            DriftCheck.objects.filter(pk=check_id),
            evaluating=DriftCheckStatus.EVALUATING,
            claim=claim,
            status=DriftCheckStatus.DONE,
            drifted=reason is not None,
            outcome=outcome,
            finished_at=timezone.now(),
        )
        if not stored:
            return "claim lost"
        if reason is not None:
            certificate_suspend(certificate_id=check.certificate_id, reason=reason)
    return "drifted" if reason is not None else "steady"


def _drift_outcome(check: DriftCheck) -> tuple[dict[str, Any], str | None]:
    """(the evidence, the reason to suspend or None)."""
    from judging.statistics.drift import drift_decision, signed_rank_p  # noqa: PLC0415 - scipy

    run, certificate = check.run, check.certificate
    assert run is not None
    outcome: dict[str, Any] = {"seed": check.seed, "sample_size": check.sample_size, "run": run.pk}
    if run.status != RunStatus.SUCCEEDED:
        outcome["undefined"] = f"the drift run ended {run.status}; the next check tries again"
        return outcome, None
    certified_model = certificate.version.provider_model
    models = sorted(provider_models_of_run(run))
    outcome["provider_models"] = models
    if models and models != [certified_model]:
        return outcome, (
            f"the provider now reports model {', '.join(models)} instead of the certified {certified_model} "
            f"(drift check {check.pk}, {timezone.now():%Y-%m-%d %H:%M} UTC)"
        )
    if run.version_id != certificate.version_id:
        return outcome, (
            f"the judge no longer has the certified fingerprint {certificate.version.short} (drift check {check.pk})"
        )
    if certificate.run is None:
        outcome["undefined"] = "the certification run was deleted, so there are no certified scores to compare with"
        return outcome, None
    certified_judge = certificate.run.judge_id
    per_aspect: dict[str, dict[str, Any]] = {}
    for aspect in sorted(set(certificate.results)):
        certified = dict(
            JudgeScore.objects.filter(judge_id=certified_judge, aspect_name=aspect).values_list("response_id", "value")
        )
        current = dict(
            JudgeScore.objects.filter(judge_id=run.judge_id, aspect_name=aspect).values_list("response_id", "value")
        )
        paired = sorted(set(certified) & set(current))
        per_aspect[aspect] = signed_rank_p([certified[r] for r in paired], [current[r] for r in paired])
    decision = drift_decision(per_aspect)
    outcome.update({"aspects": per_aspect, "decision": decision})
    if decision["drifted"]:
        moved = ", ".join(
            f"{a} (p = {per_aspect[a]['p_value']:.4g}, n = {per_aspect[a]['n']})" for a in decision["moved"]
        )
        return outcome, (
            f"scores moved beyond sampling error on {moved}: {decision['test']}, Bonferroni over "
            f"{decision['aspects_tested']} aspect(s) at α = {decision['alpha']:g} (drift check {check.pk})"
        )
    return outcome, None

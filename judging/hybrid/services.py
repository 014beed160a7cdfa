"""Writes of hybrid campaigns: calibrating a certified judge version with Trust or Escalate, launching its run on the
campaign, and handing the tasks it is confident about to it.

The unit is the task, and a hybrid campaign holds one answer per task: the calibration item is a reference answer, its
confidence the lowest over the campaign's aspects and "agreed" true only when the judge agrees with the human label on
every aspect. The judge keeps a task exactly when that same confidence clears the threshold, so the guarantee is about
the rule that is applied.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone

from annotations.hybrid.services import FilledValue, task_judge_fill
from annotations.models import Campaign, SamplingStratum, StopRule, Task
from judging.certification.evaluations import fresh_config
from judging.certification.selectors import SUSPENDED, version_standing
from judging.enqueue import CAMPAIGN_STOP_CHECK, run_task_enqueue
from judging.hybrid.selectors import stopping_evidence
from judging.models import (
    Certificate,
    CertificateStatus,
    HybridApplyStatus,
    HybridCalibration,
    JudgeRun,
    JudgeVersion,
    RunStatus,
)
from judging.services import LaunchError, free_run_name, judge_run_launch

ENDED = [RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.STOPPED_BUDGET]
DEFAULT_TARGET, DEFAULT_DELTA = 0.9, 0.1


class HybridError(ValueError):
    """A request that cannot be carried out; the message names the problem."""


@dataclass(frozen=True)
class UnitScores:
    """Per answer: the judge's chosen score and confidence on each aspect (aspect name → (chosen, confidence))."""

    by_response: dict[int, dict[str, tuple[float, float]]]
    sources: dict[str, int]


def _campaign_aspect_names(campaign: Campaign) -> list[str]:
    return list(campaign.aspects.order_by("position", "pk").values_list("name", flat=True))


def _one_answer_per_task(campaign: Campaign) -> None:
    tasks = list(Task.objects.filter(campaign=campaign, is_gold=False).prefetch_related("responses"))
    if not tasks:
        raise HybridError("the campaign has no task to hand to a judge")
    crowded = [task.position + 1 for task in tasks if len(task.responses.all()) != 1]
    if crowded:
        raise HybridError(
            f"a hybrid campaign needs one answer per task (the judge keeps or escalates whole tasks, calibrated on "
            f"single answers); tasks {', '.join(map(str, crowded[:5]))} hold several"
        )


def passing_certificate(*, version: JudgeVersion, campaign: Campaign) -> Certificate:
    """The newest passed certificate of the version that covers every aspect of the campaign, or a refusal that
    names why: uncertified, suspended, or certified on other aspects."""
    aspects = set(_campaign_aspect_names(campaign))
    standing = version_standing(version)
    if standing == SUSPENDED:
        suspended = version.certificates.filter(status=CertificateStatus.SUSPENDED).order_by("-suspended_at").first()
        reason = suspended.suspension_reason if suspended is not None else ""
        raise HybridError(f"judge version {version.short} has its certificate suspended ({reason}); certify it again")
    for certificate in version.certificates.filter(
        status=CertificateStatus.PASSED, reference_set__dataset_id=campaign.dataset_id
    ).order_by("-certified_at", "-pk"):
        if aspects <= set(certificate.results):
            return certificate
    raise HybridError(
        f"judge version {version.short} holds no passing certificate on this dataset for the campaign's aspects "
        f"({', '.join(sorted(aspects))}); certify it first"
    )


def unit_scores(run: JudgeRun, response_ids: list[int], aspect_names: list[str]) -> UnitScores:
    """The judge's chosen score and confidence per answer and aspect, as Trust or Escalate's calibration reads them
    (log-probabilities of the score, else agreement among samples)."""
    import numpy as np  # noqa: PLC0415 - numpy is heavy; only calibration and applying need it

    from judging.analysis.confidence_selectors import judge_confidences  # noqa: PLC0415 - numpy, see above
    from judging.analysis.selectors import Answers  # noqa: PLC0415 - numpy, see above

    ordered = np.asarray(sorted(set(response_ids)), dtype=np.int64)
    answers = Answers(
        response_ids=ordered,
        turn_ids=np.zeros(ordered.size, dtype=np.int64),
        system_keys=[""] * int(ordered.size),
        lengths=np.zeros(ordered.size, dtype=np.int64),
    )
    by_response: dict[int, dict[str, tuple[float, float]]] = {int(r): {} for r in ordered.tolist()}
    sources = {"score_distribution": 0, "samples": 0}
    for aspect in aspect_names:
        found = judge_confidences(run.judge, answers, aspect)
        for key, count in found.sources.items():
            sources[key] = sources.get(key, 0) + count
        for row, response_id in enumerate(ordered.tolist()):
            chosen, confidence = float(found.chosen[row]), float(found.confidence[row])
            if np.isfinite(chosen) and np.isfinite(confidence):
                by_response[int(response_id)][aspect] = (chosen, confidence)
    return UnitScores(by_response, sources)


def task_confidence(scores: dict[str, tuple[float, float]], aspects: list[str]) -> float | None:
    """A task's confidence: the lowest over its aspects; None when the judge gave no confidence on one of them."""
    if any(aspect not in scores for aspect in aspects):
        return None
    return min(scores[aspect][1] for aspect in aspects)


def hybrid_calibrate(
    *,
    campaign: Campaign,
    version: JudgeVersion,
    target: float,
    delta: float,
    min_kept: int,
    user: User | None,
) -> HybridCalibration:
    """Calibrate the version's confidence threshold on its certificate's frozen reference set and store the result,
    defined or undefined with the reason. Refused (HybridError) for a version without a passing certificate."""
    from judging.statistics.trust_escalate import modal_label, trust_or_escalate  # noqa: PLC0415 - scipy

    if not (0 < target < 1 and 0 < delta < 1):
        raise HybridError(f"the target agreement and δ must lie strictly between 0 and 1, not {target} and {delta}")
    if min_kept < 1:
        raise HybridError(f"the minimum kept must be at least 1, not {min_kept}")
    if HybridCalibration.objects.filter(campaign=campaign).exclude(apply_status="").exists():
        raise HybridError("this campaign's tasks were already handed to a judge; it cannot be calibrated again")
    _one_answer_per_task(campaign)
    certificate = passing_certificate(version=version, campaign=campaign)
    if certificate.run is None:
        raise HybridError("the certificate's run was deleted, so there are no judge confidences to calibrate on")
    aspects = _campaign_aspect_names(campaign)
    human: dict[int, dict[str, list[float]]] = {}
    for response_id, aspect, value in certificate.reference_set.ratings.filter(aspect_name__in=aspects).values_list(
        "response_id", "aspect_name", "value"
    ):
        human.setdefault(response_id, {}).setdefault(aspect, []).append(value)
    scores = unit_scores(certificate.run, list(human), aspects)
    confidence: list[float] = []
    agreed: list[bool] = []
    for response_id in sorted(human):
        labels = {aspect: modal_label(human[response_id].get(aspect, [])) for aspect in aspects}
        unit_confidence = task_confidence(scores.by_response.get(response_id, {}), aspects)
        if unit_confidence is None or any(label is None for label in labels.values()):
            continue
        confidence.append(unit_confidence)
        agreed.append(all(scores.by_response[response_id][aspect][0] == labels[aspect] for aspect in aspects))
    result = trust_or_escalate(confidence, agreed, target=target, delta=delta, min_kept=min_kept)
    reason = result["undefined"] or ""
    if not confidence:
        reason = (
            "the judge gave no confidence on the reference answers: its configuration must ask for log-probabilities "
            "(logprobs) or several samples"
        )
    return HybridCalibration.objects.create(
        campaign=campaign,
        version=version,
        certificate=certificate,
        target=target,
        delta=delta,
        min_kept=min_kept,
        n=result["n"],
        kept=result["kept"],
        threshold=result["threshold"]["value"],
        coverage=result["coverage"]["value"],
        empirical_agreement=result["empirical_agreement"]["value"],
        agreement_lower_bound=result["agreement_lower_bound"]["value"],
        p_value=result["p_value"]["value"],
        undefined_reason=reason,
        left_out=len(human) - len(confidence),
        confidence_sources=scores.sources,
        created_by=user,
    )


def _campaign_response_ids(campaign: Campaign) -> list[int]:
    return sorted(
        set(Task.objects.filter(campaign=campaign, is_gold=False).values_list("responses", flat=True)) - {None}
    )


def hybrid_apply(*, calibration: HybridCalibration, user: User | None) -> HybridCalibration:
    """Run the calibrated version on the campaign's answers (a normal judge run, on the workers); the tasks are
    handed out when the run ends. Refused when the calibration is undefined, the certificate no longer passes, or
    the campaign already applied one."""
    if calibration.threshold is None:
        raise HybridError(f"the calibration is undefined ({calibration.undefined_reason}); the campaign stays human")
    campaign = calibration.campaign
    certificate = Certificate.objects.get(pk=calibration.certificate_id)
    if certificate.status != CertificateStatus.PASSED:
        raise HybridError(
            f"the certificate of judge version {calibration.version.short} is {certificate.status} "
            f"({certificate.suspension_reason or certificate.reason}); calibrate a certified version"
        )
    try:
        with transaction.atomic():
            claimed = HybridCalibration.objects.filter(pk=calibration.pk, apply_status="").update(
                apply_status=HybridApplyStatus.RUNNING
            )
            if not claimed:
                raise HybridError("this calibration was already applied")
            run = judge_run_launch(
                dataset=campaign.dataset,
                config=fresh_config(calibration.version),
                launched_by=user,
                response_ids=_campaign_response_ids(campaign),
                name=free_run_name(campaign.dataset, f"hybrid {campaign.name[:150]} {calibration.version.short}"),
            )
            HybridCalibration.objects.filter(pk=calibration.pk).update(run=run)
    except IntegrityError:
        raise HybridError("this campaign's tasks were already handed to a judge") from None
    except LaunchError as exc:
        raise HybridError(str(exc)) from None
    calibration.refresh_from_db()
    return calibration


def hybrid_fill(*, calibration_id: int) -> str:
    """Once the run has ended, hand the judge every task whose confidence clears the threshold and whose slots are
    all still free; the rest stay with the humans. Safe twice: the first call claims running → applying."""
    claimed = HybridCalibration.objects.filter(
        pk=calibration_id, apply_status=HybridApplyStatus.RUNNING, run__status__in=ENDED
    ).update(apply_status=HybridApplyStatus.APPLYING)
    if not claimed:
        return "not claimed"
    calibration = HybridCalibration.objects.select_related("run", "run__judge", "version", "campaign").get(
        pk=calibration_id
    )
    judged, human, note = _fill(calibration)
    HybridCalibration.objects.filter(pk=calibration_id, apply_status=HybridApplyStatus.APPLYING).update(
        apply_status=HybridApplyStatus.DONE,
        judged_tasks=judged,
        human_tasks=human,
        apply_note=note,
        applied_at=timezone.now(),
    )
    return "done"


def _sampled_for_humans(
    campaign: Campaign, run: JudgeRun, tasks: list[Task], aspects: list[str], unscored: set[int]
) -> set[int] | None:
    """Under a sampling policy, the tasks drawn for the humans, each task's probability stored on it first; None when
    the campaign keeps the calibrated threshold. A task the judge left without a score always goes to the humans
    (probability 1), since the estimates need the judge's score wherever a human's may be missing."""
    from judging.hybrid.sampling import judge_uncertainty_by_aspect, sampling_plan  # noqa: PLC0415 - numpy

    if not campaign.human_sampling:
        return None
    answers = {task.pk: list(task.responses.all()) for task in tasks if task.pk not in unscored}
    spread = judge_uncertainty_by_aspect(run, [a.pk for found in answers.values() for a in found], aspects)
    by_aspect = {
        pk: {aspect: max((spread.get(a.pk, {}).get(aspect, 0.0) for a in found), default=0.0) for aspect in aspects}
        for pk, found in answers.items()
    }
    plan = sampling_plan(
        campaign=campaign,
        tasks=[task for task in tasks if task.pk not in unscored],
        uncertainty={pk: max(values.values(), default=0.0) for pk, values in by_aspect.items()},
        systems={pk: found[0].system.key if found else "" for pk, found in answers.items()},
        aspect_uncertainty=by_aspect,
    )
    for task in tasks:
        task.human_probability = plan.probability.get(task.pk, 1.0)
        task.human_stratum = plan.stratum.get(task.pk, "")
    Task.objects.bulk_update(tasks, ["human_probability", "human_stratum"])
    return plan.to_humans | unscored


def _fill(calibration: HybridCalibration) -> tuple[int, int, str]:
    run = calibration.run
    tasks = list(
        Task.objects.filter(campaign=calibration.campaign, is_gold=False)
        .order_by("position")
        .prefetch_related("responses__system")
    )
    if run is None or run.status != RunStatus.SUCCEEDED:
        status = run.status if run is not None else "deleted"
        return 0, len(tasks), f"the judge run ended {status}; every task stays with the human raters"
    if run.version_id != calibration.version_id:
        return (
            0,
            len(tasks),
            f"the run is not judge version {calibration.version.short} (the provider or configuration changed), so "
            f"the calibration does not apply to it; every task stays with the human raters",
        )
    if not Certificate.objects.filter(pk=calibration.certificate_id, status=CertificateStatus.PASSED).exists():
        return 0, len(tasks), "the certificate no longer passes (suspended); every task stays with the human raters"
    assert calibration.threshold is not None  # applying requires a defined calibration (a database constraint)
    aspects = list(calibration.campaign.aspects.order_by("position", "pk").values_list("name", "pk"))
    names = [name for name, _ in aspects]
    response_ids = [response.pk for task in tasks for response in task.responses.all()]
    scores = unit_scores(run, response_ids, names)
    unscored = {
        task.pk
        for task in tasks
        if not task.responses.all()
        or any(task_confidence(scores.by_response.get(a.pk, {}), names) is None for a in task.responses.all())
    }
    to_humans = _sampled_for_humans(calibration.campaign, run, tasks, names, unscored)
    judged = 0
    for task in tasks:
        answers = list(task.responses.all())
        confidences = [task_confidence(scores.by_response.get(answer.pk, {}), names) for answer in answers]
        kept_by_threshold = all(c is not None and c >= calibration.threshold for c in confidences)
        if task.pk in unscored or (task.pk in to_humans if to_humans is not None else not kept_by_threshold):
            continue
        values = [
            FilledValue(response_id=answer.pk, aspect_id=aspect_id, value=scores.by_response[answer.pk][name][0])
            for answer in answers
            for name, aspect_id in aspects
        ]
        if task_judge_fill(
            task_id=task.pk,
            values=values,
            confidence=min(c for c in confidences if c is not None),
            judge_name=run.judge.name,
            judge_version=calibration.version.fingerprint,
        ):
            judged += 1
    return judged, len(tasks) - judged, ""


def campaign_stop_check(*, campaign_id: int) -> str:
    """Read the campaign's stopping rule on its ratings so far (or, for "certified", on its judge version's
    certificates) and, once it is met, stop the campaign with the evidence (the sequence or the certificate, n and
    the time). Safe twice: only the call that sets stopped_at stores the evidence."""
    campaign = Campaign.objects.filter(pk=campaign_id).first()
    if campaign is None or not campaign.stop_rule or campaign.stopped_at is not None:
        return "nothing to check"
    evidence = stopping_evidence(campaign)
    if evidence is None or not evidence["met"]:
        return "not met"
    moment = timezone.now()
    stopped = Campaign.objects.filter(pk=campaign_id, stopped_at__isnull=True).update(
        stopped_at=moment, stop_evidence={**evidence, "stopped_at": moment.isoformat()}
    )
    return "stopped" if stopped else "already stopped"


def campaign_sampling_set(
    *,
    campaign: Campaign,
    human_sampling: str,
    human_share: float,
    sampling_stratum: str,
    stop_rule: str,
    stop_aspect_id: int | None,
    stop_first: str,
    stop_second: str,
    stop_width: float | None,
) -> None:
    """Set the campaign's human sampling policy and stopping rule. The policy is refused once the judge's tasks were
    handed out (the probabilities are fixed then); the rule is refused once the campaign stopped."""
    if not 0 < human_share <= 1:
        raise HybridError(f"the share of tasks for the raters must be more than 0 and at most 1, not {human_share}")
    if stop_rule and stop_aspect_id is None:
        raise HybridError("a stopping rule needs the aspect it is read on")
    if sampling_stratum not in SamplingStratum.values:
        raise HybridError(f"the strata must be one of {', '.join(SamplingStratum.values)}, not {sampling_stratum!r}")
    if stop_rule not in ("", *StopRule.values):
        raise HybridError(f"the stopping rule must be one of {', '.join(StopRule.values)}, not {stop_rule!r}")
    if stop_rule in (StopRule.BEATS, StopRule.WIDTH) and not stop_first:
        raise HybridError("a stopping rule needs the system (A) it is read on")
    if stop_rule == "beats" and (not stop_second or stop_second == stop_first):
        raise HybridError("“A beats B” needs a second system, other than A")
    if stop_rule == "width" and stop_width is None:
        raise HybridError("“width ≤ w” needs the largest width w")
    applied = HybridCalibration.objects.filter(campaign=campaign).exclude(apply_status="").exists()
    changed = (human_sampling, human_share, sampling_stratum) != (
        campaign.human_sampling,
        campaign.human_share,
        campaign.sampling_stratum,
    )
    if applied and changed:
        raise HybridError("the judge already took its tasks, so the sampling policy can no longer change")
    if campaign.stopped_at is not None:
        raise HybridError("the campaign already stopped; its stopping rule can no longer change")
    updated = Campaign.objects.filter(pk=campaign.pk, stopped_at__isnull=True).update(
        human_sampling=human_sampling,
        human_share=human_share,
        sampling_stratum=sampling_stratum,
        stop_rule=stop_rule,
        stop_aspect_id=stop_aspect_id if stop_rule else None,
        stop_first=stop_first if stop_rule in (StopRule.BEATS, StopRule.WIDTH) else "",
        stop_second=stop_second if stop_rule == "beats" else "",
        stop_width=stop_width if stop_rule == "width" else None,
    )
    if not updated:
        raise HybridError("the campaign already stopped; its stopping rule can no longer change")
    campaign.refresh_from_db()
    if stop_rule:
        # The ratings given so far may already answer the question.
        run_task_enqueue(CAMPAIGN_STOP_CHECK, campaign.pk, on_commit=True)

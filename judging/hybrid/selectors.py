"""Reads of hybrid campaigns: the versions a researcher may choose, the campaign's calibrations and its panel."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from annotations.hybrid.selectors import HybridCounts, hybrid_counts
from annotations.models import Aspect, Campaign, HumanSampling, StopRule, Task
from judging.analysis.selectors import campaign_ratings
from judging.certification.selectors import version_standing
from judging.models import CertificateStatus, HybridCalibration, JudgeVersion, Judgment, JudgmentStatus


@dataclass(frozen=True)
class VersionChoice:
    version: JudgeVersion
    standing: str


def version_choices(campaign: Campaign) -> list[VersionChoice]:
    """The judge versions with a run on the campaign's dataset, each with its standing (certified ones first)."""
    versions = JudgeVersion.objects.filter(runs__dataset_id=campaign.dataset_id).distinct().order_by("-created_at")
    rows = [VersionChoice(version, version_standing(version)) for version in versions]
    return sorted(rows, key=lambda row: row.standing != "certified")


def versions_of_campaign_dataset(campaign: Campaign) -> QuerySet[JudgeVersion]:
    return JudgeVersion.objects.filter(runs__dataset_id=campaign.dataset_id).distinct()


def calibrations_of_campaign(campaign: Campaign) -> QuerySet[HybridCalibration]:
    return HybridCalibration.objects.filter(campaign=campaign).select_related("version", "certificate", "run")


@dataclass(frozen=True)
class HybridPanel:
    calibration: HybridCalibration | None  # the applied one, else the newest
    counts: HybridCounts

    @property
    def coverage(self) -> float | None:
        """The share of the campaign's tasks the judge kept."""
        if self.calibration is None or self.calibration.apply_status != "done" or not self.counts.tasks:
            return None
        return self.counts.judged_tasks / self.counts.tasks


def hybrid_panel(campaign: Campaign) -> HybridPanel:
    calibrations = calibrations_of_campaign(campaign)
    chosen = calibrations.exclude(apply_status="").first() or calibrations.first()
    return HybridPanel(calibration=chosen, counts=hybrid_counts(campaign))


MAX_LOOKS_SHOWN = 40


def _ratings_in_order(campaign: Campaign, aspect_id: int) -> list[tuple[int, str, float]]:
    """The campaign's human ratings on one aspect in the order they were given: (response, system key, value)."""
    rows = (
        campaign_ratings(campaign)
        .filter(
            response_id__in=Task.responses.through.objects.filter(task__campaign=campaign, task__is_gold=False).values(
                "response_id"
            ),
            aspect_id=aspect_id,
            value__isnull=False,
        )
        .order_by("created_at", "pk")
        .values_list("response__turn_id", "response__system__key", "value")
    )
    return [(turn, key, float(value or 0.0)) for turn, key, value in rows]


def stopping_evidence(campaign: Campaign) -> dict[str, Any] | None:
    """The campaign's stopping rule read on its human ratings so far: the betting confidence sequence (one look per
    rating, or per completed pair for "beats"), the decision, n and the looks (at most MAX_LOOKS_SHOWN, evenly spaced,
    the last always kept). None when the campaign states no rule."""
    from judging.statistics.sequences import (  # noqa: PLC0415 - numpy
        confidence_sequence,
        difference_decision,
        first_ratings_paired,
        paired_difference_sequence,
        width_decision,
    )

    if not campaign.stop_rule or campaign.stop_aspect_id is None:
        return None
    aspect = Aspect.objects.get(pk=campaign.stop_aspect_id)
    if campaign.stop_rule == StopRule.CERTIFIED:
        return certification_evidence(campaign, aspect)
    rows = _ratings_in_order(campaign, aspect.pk)
    if campaign.stop_rule == StopRule.BEATS:
        pairs = first_ratings_paired(rows, campaign.stop_first, campaign.stop_second)
        looks = paired_difference_sequence(
            [a for a, _ in pairs], [b for _, b in pairs], lower=aspect.min_value, upper=aspect.max_value
        )
        decision = difference_decision(looks, first=campaign.stop_first, second=campaign.stop_second)
    else:
        values = [value for _turn, key, value in rows if key == campaign.stop_first]
        looks = confidence_sequence(values, lower=aspect.min_value, upper=aspect.max_value)
        decision = width_decision(looks, float(campaign.stop_width or 0.0))
    step = max(1, -(-len(looks) // MAX_LOOKS_SHOWN))
    shown = [look for i, look in enumerate(looks) if i % step == 0 or i == len(looks) - 1]
    return {
        "rule": decision["rule"],
        "aspect": aspect.name,
        "met": bool(decision["met"]),
        "decision": decision["decision"] or decision["undefined"],
        "n": decision["n"],
        "low": decision["evidence"]["low"],
        "high": decision["evidence"]["high"],
        "method": "betting (Waudby-Smith & Ramdas 2024), 95%",
        "looks": [[look["n"], look["interval"]["low"], look["interval"]["high"]] for look in shown],
        "lower": aspect.min_value,
        "upper": aspect.max_value,
    }


def campaign_judge_version(campaign: Campaign) -> JudgeVersion | None:
    """The campaign's judge version: that of the calibration that handed out the tasks, else the newest one
    calibrated; None before any calibration."""
    calibrations = HybridCalibration.objects.filter(campaign=campaign).select_related("version")
    chosen = calibrations.exclude(apply_status="").first() or calibrations.order_by("-created_at", "-pk").first()
    return None if chosen is None else chosen.version


def certification_evidence(campaign: Campaign, aspect: Aspect) -> dict[str, Any]:
    """The rule "the judge is certified on the aspect": met once a certificate of the campaign's judge version has
    passed (and is not suspended) with a passing alternative-annotator test on the aspect. The evidence names the
    certificate, its test on the aspect (ε, ω, ρ) and n, the answers it was read on."""
    base: dict[str, Any] = {
        "rule": "certified",
        "aspect": aspect.name,
        "met": False,
        "n": 0,
        "low": None,
        "high": None,
        "method": "alternative-annotator test (Calderon, Reichart and Dror 2025)",
        "looks": [],
        "lower": aspect.min_value,
        "upper": aspect.max_value,
    }
    version = campaign_judge_version(campaign)
    if version is None:
        return base | {"decision": "no judge version is calibrated on this campaign yet"}
    certificates = version.certificates.order_by("-certified_at", "-created_at", "-pk")
    for certificate in certificates.filter(status=CertificateStatus.PASSED):
        test = certificate.results.get(aspect.name)
        if isinstance(test, dict) and test.get("verdict") == "passed":
            return base | {
                "met": True,
                "decision": f"judge version {version.short} passed certificate {certificate.pk}",
                "n": int(test.get("n_answers", 0)),
                "version": version.short,
                "certificate": certificate.pk,
                "certificate_status": certificate.status,
                "test": {key: test.get(key) for key in ("epsilon", "q", "metric", "omega", "rho", "verdict")},
            }
    newest = certificates.first()
    decision = (
        f"judge version {version.short} holds no certificate"
        if newest is None
        else f"judge version {version.short}: its newest certificate ({newest.pk}) is {newest.status}"
    )
    return base | {"decision": decision, "version": version.short}


@dataclass(frozen=True)
class ActiveRow:
    aspect: str
    result: dict[str, Any]  # active_ppi.ActivePPIResult
    sent: int  # tasks drawn for the humans
    rated: int  # of those, rated so far


def active_estimates(campaign: Campaign) -> list[ActiveRow]:
    """Per aspect, the campaign's mean by inverse-probability-weighted PPI++ (active inference) from each task's
    human mean, judge score and sampling probability, beside the interval uniform sampling would give for the same
    expected number of ratings. Empty unless a sampling policy handed tasks out and the judge's run still exists."""
    from judging.statistics.active_ppi import active_ppi_mean  # noqa: PLC0415 - numpy

    calibration = (
        HybridCalibration.objects.filter(campaign=campaign, apply_status="done", run__isnull=False)
        .select_related("run")
        .first()
    )
    if not campaign.human_sampling or calibration is None or calibration.run is None:
        return []
    tasks = list(
        Task.objects.filter(campaign=campaign, is_gold=False, human_probability__isnull=False)
        .prefetch_related("responses", "assignments")
        .order_by("position")
    )
    rows = []
    for aspect in campaign.aspects.order_by("position", "pk"):
        judge: dict[int, list[float]] = {}
        for response_id, score in Judgment.objects.filter(
            run=calibration.run,
            aspect_name=aspect.name,
            other_response__isnull=True,
            status=JudgmentStatus.DONE,
            score__isnull=False,
        ).values_list("response_id", "score"):
            judge.setdefault(response_id, []).append(float(score or 0.0))
        human: dict[int, list[float]] = {}
        answers = [r.pk for t in tasks for r in t.responses.all()]
        for response_id, value in (
            campaign_ratings(campaign)
            .filter(response_id__in=answers, aspect=aspect, value__isnull=False)
            .values_list("response_id", "value")
        ):
            human.setdefault(response_id, []).append(float(value or 0.0))
        y, f, pi, strata = [], [], [], []
        sent = rated = 0
        for task in tasks:
            answer = task.responses.all()[0]
            if answer.pk not in judge:
                continue
            drawn = any(slot.status != "judged" for slot in task.assignments.all())
            values = human.get(answer.pk)
            sent += drawn
            rated += bool(drawn and values)
            y.append(sum(values) / len(values) if drawn and values else None)
            f.append(sum(judge[answer.pk]) / len(judge[answer.pk]))
            pi.append(float(task.human_probability or 1.0))
            strata.append(task.human_stratum)
        if f:
            result: dict[str, Any] = dict(active_ppi_mean(y, f, pi))
            if campaign.human_sampling == HumanSampling.STRATIFIED:
                stratified = _stratified(y, f, strata)
                result |= stratified | {"undefined": stratified["undefined"] or result["undefined"]}
            rows.append(ActiveRow(aspect.name, result, sent, rated))
    return rows


def _stratified(y: list[float | None], f: list[float], strata: list[str]) -> dict[str, Any]:
    """The stratified PPI++ estimate over the strata the tasks were drawn in, in place of the weighted one: the same
    design-unbiased target, with each stratum's own λ. The uniform comparison and ratings saved stay the active
    design's, since stratified sampling with π = n_k / N_k is one of its designs."""
    from judging.statistics.stratified_ppi import Stratum, stratified_ppi_mean  # noqa: PLC0415 - numpy

    grouped: dict[str, Stratum] = {}
    for human, judge, name in zip(y, f, strata, strict=True):
        stratum = grouped.setdefault(name, {"name": name, "human": [], "judge_labelled": [], "judge_unlabelled": []})
        if human is None:
            stratum["judge_unlabelled"].append(judge)  # type: ignore[attr-defined]
        else:
            stratum["human"].append(human)  # type: ignore[attr-defined]
            stratum["judge_labelled"].append(judge)  # type: ignore[attr-defined]
    result = stratified_ppi_mean([grouped[name] for name in sorted(grouped)])
    return {
        "active": result["stratified"],
        "strata": result["strata"],
        "design": "stratified",
        "undefined": result["undefined"],
    }


def stopping_panel(campaign: Campaign) -> dict[str, Any] | None:
    """What the progress page shows of the stopping rule: the stored evidence once the campaign stopped, else the
    rule read on the ratings so far."""
    if not campaign.stop_rule:
        return None
    if campaign.stopped_at is not None:
        return {**campaign.stop_evidence, "stopped": True}
    evidence = stopping_evidence(campaign)
    return None if evidence is None else {**evidence, "stopped": False}

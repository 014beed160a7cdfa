"""Reads of hybrid campaigns: the versions a researcher may choose, the campaign's calibrations and its panel."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet

from annotations.hybrid.selectors import HybridCounts, hybrid_counts
from annotations.models import Campaign
from judging.certification.selectors import version_standing
from judging.models import HybridCalibration, JudgeVersion


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

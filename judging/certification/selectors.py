"""Reads of judge versions and certificates: a version's standing, a dataset's versions over time, notices."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet

from annotations.models import Dataset
from judging.models import (
    Certificate,
    CertificateStatus,
    JudgeExemplar,
    JudgeRun,
    JudgeTeaching,
    JudgeVersion,
    ReferenceRating,
    ReferenceSet,
)
from judging.standing import CERTIFIED as CERTIFIED
from judging.standing import SUSPENDED as SUSPENDED
from judging.standing import UNCERTIFIED as UNCERTIFIED
from judging.standing import standing_of_judge_ids as standing_of_judge_ids
from judging.standing import version_standing


def judge_certification(dataset: Dataset, judge_name: str) -> dict[str, Any]:
    """{"standing", "version"} of a dataset's judge by name, for the API and exports beside its scores."""
    run = JudgeRun.objects.filter(dataset=dataset, judge__name=judge_name).select_related("version").first()
    version = run.version if run is not None else None
    return {"standing": version_standing(version), "version": version.fingerprint if version is not None else None}


@dataclass
class VersionRow:
    version: JudgeVersion
    standing: str
    runs: list[JudgeRun] = field(default_factory=list)
    certificates: list[Certificate] = field(default_factory=list)


def versions_of_dataset(dataset: Dataset) -> list[VersionRow]:
    """The judge versions that have runs on this dataset, each with its runs in time order and its certificates.
    Runs are grouped strictly by version: a run that belongs to no version appears in no group."""
    runs = (
        JudgeRun.objects.filter(dataset=dataset, version__isnull=False)
        .select_related("judge", "version")
        .order_by("created_at", "pk")
    )
    rows: dict[int, VersionRow] = {}
    for run in runs:
        assert run.version is not None
        row = rows.setdefault(run.version.pk, VersionRow(version=run.version, standing=""))
        row.runs.append(run)
    for row in rows.values():
        row.standing = version_standing(row.version)
        row.certificates = list(row.version.certificates.select_related("reference_set").order_by("-created_at")[:20])
    return sorted(rows.values(), key=lambda r: (r.version.config_name, r.version.created_at))


def unversioned_runs(dataset: Dataset) -> QuerySet[JudgeRun]:
    return JudgeRun.objects.filter(dataset=dataset).exclude(version_problem="").select_related("judge")


def reference_sets_of_dataset(dataset: Dataset) -> QuerySet[ReferenceSet]:
    return ReferenceSet.objects.filter(dataset=dataset).select_related("campaign").order_by("-created_at")


def suspension_notices(user: AbstractBaseUser | AnonymousUser, dataset: Dataset | None = None) -> list[Certificate]:
    """Suspended certificates that the user asked for: what they must be told."""
    if not user.is_authenticated:
        return []
    found = Certificate.objects.filter(status=CertificateStatus.SUSPENDED, requested_by_id=user.pk)
    if dataset is not None:
        found = found.filter(reference_set__dataset=dataset)
    return list(found.select_related("version", "reference_set").order_by("-suspended_at")[:20])


def certificate_summary(certificate: Certificate) -> list[dict[str, Any]]:
    """Per aspect, the figures a certificate states, for pages and exports."""
    return [{"aspect": aspect, **row} for aspect, row in sorted(certificate.results.items())]


def reference_ratings_for(reference_set: ReferenceSet, *versions: JudgeVersion | None) -> QuerySet[ReferenceRating]:
    """The set's ratings of the answers the given versions may be measured on: every answer either version shows as
    a rated example is left out, so an example never counts in a certificate, a drift check or a comparison."""
    shown = JudgeExemplar.objects.filter(version__in=[v for v in versions if v is not None]).values("response_id")
    return reference_set.ratings.exclude(response_id__in=shown)


def exemplars_of_version(version: JudgeVersion) -> QuerySet[JudgeExemplar]:
    return version.exemplars.select_related("response").order_by("aspect_name", "label", "response_id")


def teachings_of_dataset(dataset: Dataset) -> QuerySet[JudgeTeaching]:
    """Teachings measured on this dataset's reference sets, newest first."""
    return (
        JudgeTeaching.objects.filter(reference_set__dataset=dataset)
        .select_related("parent", "taught_version", "reference_set")
        .order_by("-created_at")
    )


def judge_version_and_reference_set(
    dataset: Dataset, judge_name: str, reference_set_name: str
) -> tuple[JudgeVersion, ReferenceSet]:
    """The version of a dataset's judge run and a reference set of the dataset, both by name, for the commands that
    certify or teach it; a LookupError names what is missing."""
    run = JudgeRun.objects.filter(dataset=dataset, judge__name=judge_name).select_related("version").first()
    if run is None:
        raise LookupError(f"no judge run named {judge_name!r} on {dataset.name!r}")
    if run.version is None:
        raise LookupError(f"judge {judge_name!r} has no version: {run.version_problem or 'its run has not ended'}")
    reference = ReferenceSet.objects.filter(dataset=dataset, name=reference_set_name).first()
    if reference is None:
        raise LookupError(f"no reference set named {reference_set_name!r} on {dataset.name!r}")
    return run.version, reference

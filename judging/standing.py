"""A judge version's standing (certified, uncertified, suspended), read from its certificates. It sits below the
certification package so that the reads of judge scores, which label every score with its version's standing,
need nothing of certification's services."""

from __future__ import annotations

from judging.models import Certificate, CertificateStatus, JudgeRun, JudgeVersion

CERTIFIED, UNCERTIFIED, SUSPENDED = "certified", "uncertified", "suspended"


def version_standing(version: JudgeVersion | None) -> str:
    """certified while a certificate of this very version has passed and is not suspended; suspended when its last
    passing certificate was suspended; uncertified otherwise (and for scores that belong to no version)."""
    if version is None:
        return UNCERTIFIED
    statuses = set(version.certificates.values_list("status", flat=True))
    if CertificateStatus.PASSED in statuses:
        return CERTIFIED
    if CertificateStatus.SUSPENDED in statuses:
        return SUSPENDED
    return UNCERTIFIED


def standing_of_judge_ids(ids: list[int]) -> dict[int, str]:
    """Judge id → standing. Imported and derived judges have no version, so they are uncertified."""
    version_of = dict(JudgeRun.objects.filter(judge_id__in=ids).values_list("judge_id", "version_id"))
    statuses: dict[int, set[str]] = {}
    for version_id, status in Certificate.objects.filter(version_id__in=set(version_of.values()) - {None}).values_list(
        "version_id", "status"
    ):
        statuses.setdefault(version_id, set()).add(status)
    standing = {}
    for judge_id in ids:
        seen = statuses.get(version_of.get(judge_id) or -1, set())
        standing[judge_id] = (
            CERTIFIED
            if CertificateStatus.PASSED in seen
            else SUSPENDED
            if CertificateStatus.SUSPENDED in seen
            else UNCERTIFIED
        )
    return standing

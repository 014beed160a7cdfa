"""Reads of rater exclusions: the exclusion in force of a rater, and the raters a researcher may exclude."""

from __future__ import annotations

from django.http import Http404

from annotations.models import Campaign, Rater, RaterExclusion


def rater_exclusion_in_force(rater: Rater) -> RaterExclusion | None:
    """The rater's exclusion in force, if any (at most one, a database constraint)."""
    return RaterExclusion.objects.filter(rater=rater, revoked_at__isnull=True).select_related("rater").first()


def exclusion_disputes_closed(exclusion: RaterExclusion) -> int:
    """How many open disputes the exclusion closed when it was recorded."""
    return exclusion.closed_disputes.count()


def campaign_rater_or_404(campaign: Campaign, rater_id: int) -> Rater:
    """A rater of the campaign's dataset; any other id is not found, so a forged id reveals nothing."""
    rater = Rater.objects.select_related("user").filter(dataset_id=campaign.dataset_id, pk=rater_id).first()
    if rater is None:
        raise Http404("no such rater in this campaign's dataset")
    return rater

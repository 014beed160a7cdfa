"""Writes of rater quality: excluding a rater from the statistics, revoking that, and reopening their slots.

An exclusion leaves every rating of the rater out of the agreement and correlation statistics of their dataset
(judging.analysis reads the exclusions in force; a scope can bring them back in for comparison). It is recorded and
reversible: revoking keeps the row with who revoked it and when.

Reopening slots
---------------
So that a task still gets N ratings that count, each submitted (non-gold) slot of the excluded rater in the
campaign gets one free replacement slot on the same task (annotations.slots, "replacement slots"), handed out by
the normal claim rule. The rater leaves the campaign's pool, so they stop taking tasks; they could not take a
replacement anyway (one slot per task and person). Revoking the exclusion deletes the replacements nobody has
taken yet; a replacement someone took stays, so such a task may then hold N+1 ratings that count. The rater stays
out of the pool until a researcher adds them back.

The bound, kept after any chain of excluding, reopening and revoking: a task never holds more than N+1 ratings
that count. Reopening appends a replacement only to a task whose slots that count or may still count (free and
leased slots, submitted slots of raters not excluded) are fewer than N, so taking replacements never brings a task
above N; and a revocation that would bring one of the rater's tasks above N+1 (when earlier replacements of other
excluded raters were taken too) is refused, with the reason, and changes nothing.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from annotations.adjudication.services import dispute_find
from annotations.campaigns.setup import campaign_annotator_remove
from annotations.models import (
    Assignment,
    AssignmentStatus,
    Campaign,
    Dispute,
    DisputeClosure,
    Rater,
    RaterExclusion,
    Task,
)
from annotations.slots import slots_replace, slots_unreplace
from annotations.slots.campaign_slots import CAMPAIGN_SLOTS
from annotations.text.storable import NUL, unstorable_character

MAX_REASON_CHARS = 2000


class ExclusionError(ValueError):
    """An exclusion, its revocation or a reopening was refused; the message says why."""


def _clean_reason(reason: str) -> str:
    cleaned = (reason or "").strip()
    if not cleaned:
        raise ExclusionError(_("Give a reason for excluding the rater."))
    if len(cleaned) > MAX_REASON_CHARS:
        raise ExclusionError(
            _("The reason is %(n)d characters long; at most %(max)d are allowed.")
            % {"n": len(cleaned), "max": MAX_REASON_CHARS}
        )
    bad = unstorable_character(cleaned)
    if bad == NUL:
        raise ExclusionError(_("The reason contains a NUL character."))
    if bad:
        raise ExclusionError(_("The reason contains an unpaired surrogate."))
    return cleaned


def rater_exclude(
    *,
    rater: Rater,
    reason: str,
    by: User | None,
    campaign: Campaign | None = None,
    reopen_slots: bool = False,
) -> RaterExclusion:
    """Leaves the rater out of the statistics from now on; with `reopen_slots`, also reopens their slots in the
    campaign (see the module docstring). All or nothing. ExclusionError when the rater is already excluded or is
    a list position rather than a person, the reason is missing, or the campaign is of another dataset."""
    cleaned = _clean_reason(reason)
    if rater.is_positional:
        # Without a "raters" list in the imported file, "#2" is the second rating of each answer, given by
        # different people on different answers: leaving it out would drop a haphazard set of people.
        raise ExclusionError(
            _("%(rater)s is a position in the imported rating lists, not a person, so it cannot be excluded.")
            % {"rater": rater.pseudonym}
        )
    if campaign is not None and campaign.dataset_id != rater.dataset_id:
        raise ExclusionError(_("The rater does not belong to this campaign's dataset."))
    if reopen_slots and campaign is None:
        raise ExclusionError(_("Reopening slots needs the campaign whose slots to reopen."))
    with transaction.atomic():
        try:
            with transaction.atomic():
                exclusion = RaterExclusion.objects.create(
                    rater=rater, campaign=campaign, reason=cleaned, excluded_by=by
                )
        except IntegrityError:
            raise ExclusionError(
                _("%(rater)s is already excluded; revoke that exclusion first to record a new one.")
                % {"rater": rater.pseudonym}
            ) from None
        if reopen_slots:
            rater_slots_reopen(exclusion=exclusion)
        _disputes_recheck(rater, closed_by=exclusion)
    return exclusion


def _disputes_recheck(rater: Rater, *, closed_by: RaterExclusion | None = None) -> None:
    """An exclusion or its revocation changes which ratings count, so the disputes of the tasks the rater submitted
    are decided again (a dispute that lost a counting rating is dropped; one that regains it comes back). The open
    disputes an exclusion (`closed_by`) drops are recorded as closed by it, so the researcher is told how many and
    an adjudicator opening one learns why it is gone."""
    if rater.user_id is None:
        return
    submitted = (
        Assignment.objects.filter(
            campaign__dataset_id=rater.dataset_id,
            campaign__adjudication_rule__isnull=False,
            annotator_id=rater.user_id,
            status=AssignmentStatus.SUBMITTED,
            is_gold=False,
        )
        .values_list("task_id", flat=True)
        .distinct()
        .order_by("task_id")
    )
    task_ids = list(submitted)
    open_before = {
        pk: (task_id, campaign_id)
        for pk, task_id, campaign_id in Dispute.objects.filter(
            task_id__in=task_ids, resolved_at__isnull=True
        ).values_list("pk", "task_id", "campaign_id")
    }
    for task_id in task_ids:
        dispute_find(task_id=task_id)
    if closed_by is None or not open_before:
        return
    remaining = set(Dispute.objects.filter(pk__in=list(open_before)).values_list("pk", flat=True))
    DisputeClosure.objects.bulk_create(
        [
            DisputeClosure(dispute_number=pk, task_id=task_id, campaign_id=campaign_id, exclusion=closed_by)
            for pk, (task_id, campaign_id) in sorted(open_before.items())
            if pk not in remaining
        ]
    )


def _excluded_users(dataset_id: int) -> set[int]:
    return set(
        RaterExclusion.objects.filter(
            revoked_at__isnull=True, rater__dataset_id=dataset_id, rater__user__isnull=False
        ).values_list("rater__user_id", flat=True)
    )


def _lock_tasks(slot_ids: list[int]) -> dict[int, int]:
    """The task of each slot, with the tasks locked in id order (as slots_replace locks them), so that two
    reopenings or revocations touching one task decide one after the other."""
    task_of = dict(Assignment.objects.filter(pk__in=slot_ids).values_list("pk", "task_id"))
    list(Task.objects.select_for_update().filter(pk__in=set(task_of.values())).order_by("pk").values_list("pk"))
    return task_of


def _counting(task_ids: set[int], excluded: set[int]) -> tuple[dict[int, int], dict[int, int]]:
    """Per task: the submitted non-gold slots of raters not excluded (ratings that count), and those plus the free
    and leased slots (ratings that count or may still count)."""
    counting: dict[int, int] = dict.fromkeys(task_ids, 0)
    possible: dict[int, int] = dict.fromkeys(task_ids, 0)
    for task_id, status, annotator_id in Assignment.objects.filter(task_id__in=task_ids, is_gold=False).values_list(
        "task_id", "status", "annotator_id"
    ):
        if status == AssignmentStatus.SUBMITTED:
            if annotator_id not in excluded:
                counting[task_id] += 1
                possible[task_id] += 1
        else:
            possible[task_id] += 1
    return counting, possible


def _excluded_slots(exclusion: RaterExclusion) -> list[int]:
    """The submitted, non-gold slots of the excluded rater's account in the exclusion's campaign."""
    user_id = exclusion.rater.user_id
    if exclusion.campaign_id is None or user_id is None:
        return []
    return list(
        Assignment.objects.filter(
            campaign_id=exclusion.campaign_id, annotator_id=user_id, status=AssignmentStatus.SUBMITTED, is_gold=False
        ).values_list("pk", flat=True)
    )


def rater_slots_reopen(*, exclusion: RaterExclusion, campaign: Campaign | None = None) -> int:
    """Takes the excluded rater out of the campaign's pool and gives each of their submitted non-gold slots one free
    replacement. Idempotent and safe when run concurrently: a slot is replaced at most once. Returns how many
    replacement slots were added now. `campaign`, when given, is the campaign the request came from: an exclusion
    recorded in another one is reopened there, not here."""
    if exclusion.revoked_at is not None:
        raise ExclusionError(_("This exclusion was revoked; its rater's slots are not reopened."))
    if exclusion.campaign_id is None:
        raise ExclusionError(_("This exclusion was recorded without a campaign; its slots cannot be reopened."))
    if campaign is not None and exclusion.campaign_id != campaign.pk:
        raise ExclusionError(
            _("%(rater)s was excluded in another campaign; reopen their tasks there.")
            % {"rater": exclusion.rater.pseudonym}
        )
    user_id = exclusion.rater.user_id
    if user_id is None:
        raise ExclusionError(
            _("%(rater)s is an imported rater: there are no campaign slots of theirs to reopen.")
            % {"rater": exclusion.rater.pseudonym}
        )
    campaign = exclusion.campaign
    assert campaign is not None  # checked above; for the type checker
    with transaction.atomic():
        campaign_annotator_remove(campaign=campaign, user=User.objects.get(pk=user_id))
        slot_ids = _excluded_slots(exclusion)
        task_of = _lock_tasks(slot_ids)
        _counting_now, possible = _counting(set(task_of.values()), _excluded_users(campaign.dataset_id))
        # A task that already has N ratings that count or may still count needs no replacement.
        wanted = [pk for pk in slot_ids if possible[task_of[pk]] < campaign.raters_per_item]
        return slots_replace(pool=CAMPAIGN_SLOTS, slot_ids=wanted)


def rater_exclusion_revoke(*, exclusion: RaterExclusion, by: User | None) -> RaterExclusion:
    """Brings the rater back into the statistics; the record stays, marked revoked. Replacement slots nobody has
    taken are deleted; taken ones stay. Revoking a revoked exclusion changes nothing."""
    with transaction.atomic():
        locked = RaterExclusion.objects.select_for_update().get(pk=exclusion.pk)
        if locked.revoked_at is not None:
            return locked
        slot_ids = _excluded_slots(locked)
        if slot_ids and locked.campaign is not None:
            task_of = _lock_tasks(slot_ids)
            excluded = _excluded_users(locked.rater.dataset_id) - {locked.rater.user_id}
            counting, _possible = _counting(set(task_of.values()), excluded)
            limit = locked.campaign.raters_per_item + 1
            over = sum(1 for count in counting.values() if count > limit)
            if over:
                raise ExclusionError(
                    _(
                        "Revoking this exclusion would give %(n)d task(s) more than %(limit)d ratings that count, "
                        "because other raters took the slots reopened for it. Nothing was changed."
                    )
                    % {"n": over, "limit": limit}
                )
        locked.revoked_at = max(timezone.now(), locked.created_at)
        locked.revoked_by = by
        locked.save(update_fields=["revoked_at", "revoked_by"])
        slots_unreplace(pool=CAMPAIGN_SLOTS, slot_ids=_excluded_slots(locked))
        _disputes_recheck(locked.rater)
    return locked

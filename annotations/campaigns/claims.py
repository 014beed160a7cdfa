"""Handing out tasks: the annotator's next task, gold tasks mixed into their queue, and skips.

"Next task" first resumes the annotator's open lease, if any (at most one per campaign, a DB constraint). Otherwise
it takes the lowest-positioned free slot of a task the annotator has not rated, leased or skipped. Slots whose lease
expired count as free. Filling the front of the queue first means tasks are completed one after another: at any
moment only a few tasks are partly rated, so a stopped campaign leaves whole items with N ratings (what agreement
statistics need) instead of many items with one. An expired or skipped slot sits near the front and is therefore
redone first. The claim rule itself, in its one-statement and ORM forms, belongs to the slot engine
(annotations.slots), which fact review shares."""

from datetime import datetime

from django.contrib.auth.models import User
from django.db import connection, transaction
from django.utils.translation import gettext as _

from annotations.campaigns.answers import MAX_TEXT_CHARS
from annotations.campaigns.drafts import task_drafts_drop
from annotations.campaigns.errors import CampaignError
from annotations.gold.selectors import gold_is_due, gold_task_next
from annotations.models import Assignment, Campaign, Skip, SkipReason, Task, Turn
from annotations.recruitment.selectors import worker_skips_left, worker_tasks_left
from annotations.slots import (
    Claim,
    ClaimDetails,
    slot_claim,
    slot_personal_claim,
    slot_personal_lease,
    slot_personal_state,
    slot_skip,
)
from annotations.slots.campaign_slots import CAMPAIGN_SLOTS
from annotations.slots.statements import instance_from_row

_TASK_COLUMNS = ("id", "campaign_id", "turn_id", "chunk", "position", "is_gold")


_TURN_COLUMNS = ("id", "item_id", "index", "prompt", "reference", "context")


# What showing a claimed task needs, read by the claim itself: its task, turn and candidates. The columns are
# spelled out here (no string building from input); keep them in step with the tuples above.
_CLAIM_DETAILS = ClaimDetails(
    related=("task__turn", "campaign"),
    columns=""",
       task.id, task.campaign_id, task.turn_id, task.chunk, task.position, task.is_gold,
       turn.id, turn.item_id, turn.index, turn.prompt, turn.reference, turn.context,
       candidates.ids, candidates.texts""",
    joins="""
JOIN annotations_task task ON task.id = held.task_id
JOIN annotations_turn turn ON turn.id = task.turn_id
CROSS JOIN LATERAL (
    SELECT array_agg(response.id ORDER BY response.id) AS ids, array_agg(response.text ORDER BY response.id) AS texts
    FROM annotations_task_responses shown
    JOIN annotations_response response ON response.id = shown.response_id
    WHERE shown.task_id = held.task_id
) candidates""",
)


def assignment_claim(*, campaign: Campaign, user: User, now: datetime | None = None) -> Assignment | None:
    """The annotator's next task (see the module docstring for the order), or None when nothing is left for them.

    Resumes an open lease (and extends it); otherwise leases the first claimable slot. Safe under concurrency.
    The returned assignment carries its task, turn and campaign, so showing it needs no further lookups.
    With a gold rate, some positions of the annotator's queue get a gold task instead (annotations.gold.selectors
    says which): a personal slot appended for them, which the claim rule never hands to anyone else."""
    if worker_tasks_left(campaign, user) == 0:
        return None  # a crowd worker's quota is used up, whichever page or API asks; gold tasks count toward it
    gold = _gold_assignment_lease(campaign=campaign, user=user, now=now)
    if gold is not None:
        return gold
    claim = slot_claim(pool=CAMPAIGN_SLOTS, campaign=campaign, user=user, now=now, details=_CLAIM_DETAILS)
    if claim is None:
        return None
    return _claimed_assignment(campaign=campaign, claim=claim)


def _claimed_assignment(*, campaign: Campaign, claim: Claim) -> Assignment:
    assignment: Assignment = claim.slot
    if claim.details:
        row, t = claim.details, len(_TASK_COLUMNS)
        task = instance_from_row(Task, _TASK_COLUMNS, row[:t])
        task.turn = instance_from_row(Turn, _TURN_COLUMNS, row[t:-2])
        task.candidate_texts = dict(zip(row[-2] or [], row[-1] or [], strict=True))  # type: ignore[attr-defined]
        task.campaign = campaign
        assignment.task = task
    assignment.campaign = campaign
    return assignment


def _gold_assignment_lease(*, campaign: Campaign, user: User, now: datetime | None) -> Assignment | None:
    if campaign.gold_rate <= 0:
        return None
    state = slot_personal_state(pool=CAMPAIGN_SLOTS, campaign=campaign, user=user, now=now)
    if state.leased or not state.regular_available:
        return None
    if not gold_is_due(campaign=campaign, user_id=user.pk, handed_out=state.held):
        return None
    if connection.vendor == "postgresql":
        # One statement like the regular claim, so that handing out gold costs what a regular task costs.
        claim = slot_personal_claim(pool=CAMPAIGN_SLOTS, campaign=campaign, user=user, now=now, details=_CLAIM_DETAILS)
        return _claimed_assignment(campaign=campaign, claim=claim) if claim is not None else None
    task = gold_task_next(campaign=campaign, user=user)
    if task is None:
        return None
    assignment: Assignment | None = slot_personal_lease(
        pool=CAMPAIGN_SLOTS, campaign=campaign, task=task, user=user, now=now, related=_CLAIM_DETAILS.related
    )
    return assignment


def assignment_skip(*, assignment: Assignment, user: User, reason: str, note: str = "") -> Skip:
    """Records why the annotator declined and returns the slot to the pool; they will not see the task again."""
    if reason not in SkipReason.values:
        raise CampaignError(_("Choose a reason for skipping."))
    if len(note) > MAX_TEXT_CHARS:
        raise CampaignError(_("The note is too long."))
    skips_left = worker_skips_left(assignment.campaign, user)
    if skips_left == 0:
        raise CampaignError(_("You have used every skip this session allows; please answer this task."))
    with transaction.atomic():
        skip: Skip = slot_skip(pool=CAMPAIGN_SLOTS, slot=assignment, user=user, reason=reason, note=note)
        task_drafts_drop(task_id=assignment.task_id, user=user)
    return skip

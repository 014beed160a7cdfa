"""Drafts: what an annotator has entered so far on a task, kept across reloads and lost leases.

The draft save has two forms side by side: one SQL statement on Postgres, and the portable ORM code, which defines
the semantics and names every refusal. tests/annotations/campaigns/test_submit_twin_paths.py runs both on the same
cases."""

import json
import re
from collections.abc import Mapping
from typing import Any

from django.contrib.auth.models import User
from django.db import connection, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from annotations.campaigns.answers import MAX_TEXT_CHARS, TaskAnswer, answer_form_values, value_limit
from annotations.campaigns.errors import DraftInvalid
from annotations.campaigns.selectors import campaign_has_annotator
from annotations.campaigns.tasks import draftable_assignment
from annotations.models import Assignment, AssignmentDraft, Campaign, Task
from annotations.rubrics.task_sheet import campaign_scales, rating_field_id
from annotations.slots import NotInPool, slot_pool_sql
from annotations.slots.campaign_slots import CAMPAIGN_SLOTS
from annotations.slots.statements import statement_rows
from annotations.text.storable import is_storable

DRAFT_TEXT_FIELDS = ("rationale", "comment")


DRAFT_CHOICE_FIELDS = ("preference", "none_appropriate")


def _draft_problem(*, values: Mapping[str, Any], known_fields: set[str]) -> str | None:
    unknown = set(values) - known_fields
    if unknown:
        return _("The draft names fields that are not on this form.")
    for name, value in values.items():
        if not isinstance(value, str) or not is_storable(value):
            return _("The draft holds a value that is not text.")
        limit = MAX_TEXT_CHARS if name in DRAFT_TEXT_FIELDS else value_limit(value)
        if len(value) > limit:
            return _("The draft holds a value that is too long.")
    return None


def assignment_draft_save(*, campaign: Campaign, task_id: int, user: User, values: Mapping[str, Any]) -> None:
    """Keeps what the annotator has entered so far on their leased task, replacing their earlier draft of it.

    `values` are the form's own fields (the rating cells of this task, preference, none_appropriate, rationale,
    comment) as text; anything else, or a value over the form's limits, raises DraftInvalid and stores nothing.
    A submitted task takes drafts of its correction while the campaign allows corrections. Outside the pool
    NotInPool; for a task not leased to the user, what the task page answers (404 or 403)."""
    if connection.vendor == "postgresql" and _draft_save_in_one_statement(
        campaign=campaign, task_id=task_id, user=user, values=values
    ):
        return
    _draft_save_portable(campaign=campaign, task_id=task_id, user=user, values=values)


def _draft_save_portable(*, campaign: Campaign, task_id: int, user: User, values: Mapping[str, Any]) -> None:
    if not campaign_has_annotator(campaign, user):
        raise NotInPool()
    with transaction.atomic():
        # Locked: a submit of the same lease that finished first leaves no lease to find here, and one that started
        # meanwhile waits for this draft and deletes it with the lease. On Postgres the exception is the first draft
        # of a lease saved while the submit's statement is already running (its snapshot cannot see the new row):
        # that draft stays on a submitted slot, where nothing reads it.
        assignment = draftable_assignment(campaign=campaign, task_id=task_id, user=user, lock=True)
        candidates = Task.responses.through.objects.filter(task_id=task_id).count()
        known_fields = {
            rating_field_id(number, scale.index)
            for number in range(1, candidates + 1)
            for scale in campaign_scales(campaign)
        } | {*DRAFT_TEXT_FIELDS, *DRAFT_CHOICE_FIELDS}
        problem = _draft_problem(values=values, known_fields=known_fields)
        if problem:
            raise DraftInvalid(problem)
        kept = {name: value for name, value in values.items() if value}
        AssignmentDraft.objects.update_or_create(assignment=assignment, annotator=user, defaults={"values": kept})


_DRAFT_FIELD = re.compile(r"^r-([0-9]{1,3})-([0-9]{1,3})$")


# assignment_draft_save in one statement: the slot (the user's lease, or their submitted slot while corrections are
# allowed) is locked as in the portable code, the pool and the number of candidates the draft names are checked, and
# the draft replaced. No row back means a refusal, which the portable code then names.
_DRAFT_SQL = f"""
WITH target AS (
    SELECT slot.id FROM annotations_assignment slot
    WHERE slot.campaign_id = %(campaign)s AND slot.task_id = %(task)s AND slot.annotator_id = %(user)s
      AND (slot.status = 'leased' OR (slot.status = 'submitted' AND %(revisit)s))
      AND (SELECT count(*) FROM annotations_task_responses shown WHERE shown.task_id = %(task)s) >= %(candidates)s
      AND {slot_pool_sql(CAMPAIGN_SLOTS)}
    FOR UPDATE OF slot
)
INSERT INTO annotations_assignmentdraft (assignment_id, annotator_id, "values", updated_at)
SELECT id, %(user)s, %(values)s::jsonb, %(now)s FROM target
ON CONFLICT (assignment_id, annotator_id) DO UPDATE SET "values" = EXCLUDED."values", updated_at = EXCLUDED.updated_at
RETURNING 1
"""  # noqa: S608  # nosec B608 - the pool fragment is built from model metadata


def _draft_save_in_one_statement(*, campaign: Campaign, task_id: int, user: User, values: Mapping[str, Any]) -> bool:
    """True when the draft was stored; False sends the request to the portable code, which stores it or says why
    not. Field names and limits are checked here first, against the largest candidate number the draft names."""
    scales = len(campaign_scales(campaign))
    candidates = 0
    for name in values:
        match = _DRAFT_FIELD.match(str(name))
        if match and 1 <= int(match[2]) <= scales and int(match[1]) >= 1:
            candidates = max(candidates, int(match[1]))
        elif name not in DRAFT_TEXT_FIELDS and name not in DRAFT_CHOICE_FIELDS:
            return False
    if _draft_problem(values=values, known_fields=set(values)):
        return False
    params = {
        "campaign": campaign.pk,
        "task": task_id,
        "user": user.pk,
        "revisit": campaign.allow_revisit,
        "candidates": candidates,
        "values": json.dumps({name: value for name, value in values.items() if value}),
        "now": timezone.now(),
    }
    return bool(statement_rows(_DRAFT_SQL, params))


def task_drafts_drop(*, task_id: int, user: User) -> None:
    AssignmentDraft.objects.filter(assignment__task_id=task_id, annotator=user).delete()


def assignment_draft_keep_answer(*, slot: Assignment, user: User, answer: TaskAnswer) -> None:
    AssignmentDraft.objects.update_or_create(
        assignment=slot, annotator=user, defaults={"values": answer_form_values(answer)}
    )

"""An annotator's tasks in a campaign, reached only through a lease they hold (or their submitted slot while they may
correct it): the lease checks, their drafts and submitted answers as form values, and the blinded candidates in
their own order. No read here selects system keys, other raters' ratings or judge scores."""

import hashlib
import json
import random
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import connection
from django.db.models import Model
from django.http import Http404

from annotations.gold.selectors import attention_instructions
from annotations.models import (
    Assignment,
    AssignmentDraft,
    AssignmentStatus,
    Campaign,
    Rating,
    Response,
    Task,
    Turn,
)
from annotations.roles import AnyUser
from annotations.rubrics.specs import format_number
from annotations.rubrics.task_sheet import (
    NA_TOKEN,
    Candidate,
    campaign_scales,
    rating_field_id,
)
from annotations.slots.statements import instance_from_row, statement_cursor
from annotations.text.opaque import is_row_key


def _columns(model: type[Model]) -> tuple[str, ...]:
    return tuple(f.attname for f in model._meta.concrete_fields)


_SLOT_COLUMNS, _TASK_COLUMNS, _TURN_COLUMNS = _columns(Assignment), _columns(Task), _columns(Turn)


def _select_list(alias: str, model: type[Model]) -> str:
    # Quoted: a column may be named like an SQL keyword (the turn's "index").
    return ", ".join(f'{alias}."{f.column}"' for f in model._meta.concrete_fields)


# The slot with its task and turn and the user's latest draft of the task, in one statement: the task page reads it
# on every view, and building the ORM query cost more than running it. The draft is found on whichever of the task's
# slots the user held when they wrote it: an answer kept after its lease passed to someone else is found again when
# the user gets another slot of the task.
_OWN_SLOT_SQL = f"""
SELECT {_select_list("slot", Assignment)}, {_select_list("task", Task)}, {_select_list("turn", Turn)},
       (SELECT draft."values" FROM annotations_assignmentdraft draft
        JOIN annotations_assignment held ON held.id = draft.assignment_id
        WHERE held.task_id = slot.task_id AND draft.annotator_id = slot.annotator_id
        ORDER BY draft.updated_at DESC LIMIT 1)
FROM annotations_assignment slot
JOIN annotations_task task ON task.id = slot.task_id
JOIN annotations_turn turn ON turn.id = task.turn_id
WHERE slot.campaign_id = %(campaign)s AND slot.task_id = %(task)s AND slot.annotator_id = %(user)s
  AND slot.status IN ({{statuses}})
ORDER BY slot.task_position, slot.slot
LIMIT 1
"""  # noqa: S608  # nosec B608 - the column lists are built from model metadata


def _own_slot_sql(statuses: int, *, lock: bool) -> str:
    sql = _OWN_SLOT_SQL.replace("{statuses}", ", ".join(f"%(status{i})s" for i in range(statuses)))
    # Only the slot's row, as select_for_update(of=("self",)); SQLite runs one writer at a time and has no such clause.
    return sql + "FOR UPDATE OF slot" if lock and connection.vendor == "postgresql" else sql


def _own_assignment(
    *, campaign: Campaign, task_id: int, user: AnyUser, statuses: tuple[str, ...], lock: bool
) -> Assignment | None:
    if not is_row_key(task_id) or user.pk is None:
        return None
    params: dict[str, Any] = {"campaign": campaign.pk, "task": task_id, "user": user.pk}
    params.update({f"status{i}": str(status) for i, status in enumerate(statuses)})
    with statement_cursor() as cursor:
        cursor.execute(_own_slot_sql(len(statuses), lock=lock), params)
        row = cursor.fetchone()
    if row is None:
        return None
    slot_end = len(_SLOT_COLUMNS)
    task_end = slot_end + len(_TASK_COLUMNS)
    turn_end = task_end + len(_TURN_COLUMNS)
    assignment = instance_from_row(Assignment, _SLOT_COLUMNS, row[:slot_end])
    task = instance_from_row(Task, _TASK_COLUMNS, row[slot_end:task_end])
    task.turn = instance_from_row(Turn, _TURN_COLUMNS, row[task_end:turn_end])
    task.campaign = campaign
    assignment.task = task
    assignment.campaign = campaign
    # The draft's JSON read as its own model field reads it.
    assignment.draft_values = instance_from_row(AssignmentDraft, ("values",), row[turn_end:]).values  # type: ignore[attr-defined]
    return assignment


def _not_yours(campaign: Campaign, task_id: int) -> Exception:
    if not Task.objects.filter(pk=task_id, campaign=campaign).exists():
        return Http404("no such task")
    return PermissionDenied("this task is not leased to you")


def leased_assignment(*, campaign: Campaign, task_id: int, user: AnyUser, lock: bool = False) -> Assignment:
    """The user's open lease on a task of this campaign; 404 for a task outside the campaign, 403 for a task that
    is not leased to the user (never leased, leased to someone else, expired and taken over, or already done).

    Its draft comes with it, so the task page reads it without a query of its own. `lock` holds the row until the
    caller's transaction ends, so a write that depends on the lease cannot interleave with the submit."""
    assignment = _own_assignment(
        campaign=campaign, task_id=task_id, user=user, statuses=(AssignmentStatus.LEASED,), lock=lock
    )
    if assignment is None:
        raise _not_yours(campaign, task_id)
    return assignment


def revisable_assignment(*, campaign: Campaign, task_id: int, user: AnyUser) -> Assignment | None:
    """The user's submitted slot of a task when the campaign lets them correct it, with its draft; else None."""
    if not campaign.allow_revisit:
        return None
    return _own_assignment(
        campaign=campaign, task_id=task_id, user=user, statuses=(AssignmentStatus.SUBMITTED,), lock=False
    )


def draftable_assignment(*, campaign: Campaign, task_id: int, user: AnyUser, lock: bool = False) -> Assignment:
    """The slot a draft of this task belongs to: the user's open lease, or their submitted slot while they may
    correct it. Otherwise what the task page answers (404 outside the campaign, 403)."""
    statuses: tuple[str, ...] = (AssignmentStatus.LEASED,)
    if campaign.allow_revisit:
        statuses = (AssignmentStatus.LEASED, AssignmentStatus.SUBMITTED)
    assignment = _own_assignment(campaign=campaign, task_id=task_id, user=user, statuses=statuses, lock=lock)
    if assignment is None:
        raise _not_yours(campaign, task_id)
    return assignment


def assignment_draft_values(*, assignment: Assignment, user: AnyUser) -> dict[str, str]:
    """The form values the user saved as a draft of this task, or {}. Only the user's own draft: a slot whose
    lease expired may have passed to them from someone else, whose draft stays theirs."""
    if hasattr(assignment, "draft_values"):
        values = assignment.draft_values if assignment.annotator_id == user.pk else None
    else:
        values = (
            AssignmentDraft.objects.filter(assignment__task_id=assignment.task_id, annotator_id=user.pk)
            .order_by("-updated_at")
            .values_list("values", flat=True)
            .first()
        )
    if not values:
        return {}
    return {str(name): str(value) for name, value in values.items()}


def submission_form_values(*, assignment: Assignment, user: AnyUser) -> dict[str, str]:
    """The user's current answer to a submitted task as the form's field values, to show it for correction."""
    submission = assignment.submission
    candidates = task_candidates(assignment=assignment, user_id=int(user.pk or 0))
    number_of = {c.response_id: c.number for c in candidates}
    index_of = {scale.aspect.pk: scale.index for scale in campaign_scales(assignment.campaign)}
    values: dict[str, str] = {}
    for response_id, aspect_id, raw, value, is_missing in Rating.objects.filter(
        rater__user_id=int(user.pk or 0),
        rater__dataset_id=assignment.campaign.dataset_id,
        response_id__in=list(number_of),
        aspect_id__in=list(index_of),
    ).values_list("response_id", "aspect_id", "raw", "value", "is_missing"):
        field_id = rating_field_id(number_of[response_id], index_of[aspect_id])
        if isinstance(raw, dict) and not is_missing:  # a span aspect's token, in code points as the form reads it
            values[field_id] = json.dumps(raw, ensure_ascii=False)
        else:
            values[field_id] = NA_TOKEN if is_missing or value is None else format_number(value)
    preferred = number_of.get(submission.preferred_response_id or 0)
    values["preference"] = str(preferred) if preferred else ""
    values["none_appropriate"] = "1" if submission.none_appropriate else ""
    values["rationale"] = submission.rationale
    values["comment"] = submission.comment
    return values


@dataclass(frozen=True)
class SubmittedTask:
    task_id: int
    prompt: str
    submitted_at: datetime | None
    revised_at: datetime | None
    version: int


SUBMITTED_LIST_LIMIT = 200


def submitted_tasks(*, campaign: Campaign, user: AnyUser) -> list[SubmittedTask]:
    """The tasks the user submitted in this campaign, latest first (at most SUBMITTED_LIST_LIMIT)."""
    rows = (
        Assignment.objects.filter(campaign=campaign, annotator_id=user.pk, status=AssignmentStatus.SUBMITTED)
        .order_by("-submitted_at", "-pk")
        .values_list("task_id", "task__turn__prompt", "submitted_at", "submission__revised_at", "submission__version")[
            :SUBMITTED_LIST_LIMIT
        ]
    )
    return [
        SubmittedTask(task_id=task_id, prompt=prompt, submitted_at=at, revised_at=revised, version=version or 1)
        for task_id, prompt, at, revised, version in rows
    ]


def has_submitted_task(*, campaign: Campaign, task_id: int, user: AnyUser) -> bool:
    return Assignment.objects.filter(
        campaign=campaign, task_id=task_id, annotator_id=user.pk, status=AssignmentStatus.SUBMITTED
    ).exists()


def open_assignment(*, campaign: Campaign, user: AnyUser) -> Assignment | None:
    return (
        Assignment.objects.filter(campaign=campaign, annotator_id=user.pk, status=AssignmentStatus.LEASED)
        .select_related("task")
        .first()
    )


def candidate_order(*, campaign: Campaign, task: Task, user_id: int, response_ids: list[int]) -> list[int]:
    """The response ids in this annotator's order for this task: shuffled, but the same on every visit.

    Seeded with the campaign's secret seed so the order cannot be predicted from public ids, and shuffled per
    annotator so position effects do not line up with any one system across raters."""
    digest = hashlib.sha256(f"{campaign.shuffle_seed}:{task.pk}:{user_id}".encode()).digest()
    order = sorted(response_ids)
    random.Random(int.from_bytes(digest[:8], "big")).shuffle(order)
    return order


_TASK_TEXTS_SQL = """
SELECT response.id, response.text
FROM annotations_task_responses shown
JOIN annotations_response response ON response.id = shown.response_id
WHERE shown.task_id = %(task)s
"""


def task_candidates(*, assignment: Assignment, user_id: int) -> list[Candidate]:
    """Blinded candidates: only ids (never shown) and texts. System keys stay in the database."""
    task = assignment.task
    # The claim statement reads them along with the task it hands out.
    texts: dict[int, str] | None = getattr(task, "candidate_texts", None)
    if texts is None:
        with statement_cursor() as cursor:
            cursor.execute(_TASK_TEXTS_SQL, {"task": task.pk})
            texts = dict(cursor.fetchall())
    order = candidate_order(campaign=assignment.campaign, task=task, user_id=user_id, response_ids=list(texts))
    earlier: dict[int, list[str]] = {pk: [] for pk in order}
    if task.turn.index > 0:
        # The same system's answers to the earlier turns, matched in the database so system ids never leave it.
        system_of = dict(Response.objects.filter(pk__in=order).values_list("pk", "system_id"))
        by_system: dict[int, list[str]] = {}
        for system_id, text in (
            Response.objects.filter(turn__item_id=task.turn.item_id, turn__index__lt=task.turn.index)
            .filter(system_id__in=set(system_of.values()))
            .order_by("turn__index")
            .values_list("system_id", "text")
        ):
            by_system.setdefault(system_id, []).append(text)
        earlier = {pk: by_system.get(system_of[pk], []) for pk in order}
    instructions = attention_instructions(task=task, response_ids=order) if task.is_gold else {}
    return [
        Candidate(
            number=i + 1,
            response_id=pk,
            text=texts[pk],
            earlier_answers=earlier[pk],
            instruction=instructions.get(pk, ""),
        )
        for i, pk in enumerate(order)
    ]


def earlier_prompts(turn: Turn) -> list[str]:
    if turn.index == 0:
        return []
    return list(
        Turn.objects.filter(item_id=turn.item_id, index__lt=turn.index)
        .order_by("index")
        .values_list("prompt", flat=True)
    )

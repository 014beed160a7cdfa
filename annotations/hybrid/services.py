"""Writes of hybrid campaigns in the annotations domain: a task handed to the judge instead of its human raters."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from annotations.models import Assignment, AssignmentStatus, JudgeFilledRating, Task


@dataclass(frozen=True)
class FilledValue:
    response_id: int
    aspect_id: int
    value: float


@transaction.atomic
def task_judge_fill(
    *, task_id: int, values: list[FilledValue], confidence: float, judge_name: str, judge_version: str
) -> bool:
    """Store the judge's ratings of a task and close its slots, both or neither. Only a task whose every slot is
    still free is filled: a rating a person has started or given stays theirs. True when this call filled it, so a
    second call (or a task someone took meanwhile) changes nothing."""
    if not values:
        raise ValueError("a judge-filled task needs at least one value")
    task = Task.objects.select_for_update().get(pk=task_id)
    slots = list(Assignment.objects.select_for_update().filter(task_id=task_id).values_list("status", flat=True))
    if not slots or any(status != AssignmentStatus.FREE for status in slots):
        return False
    closed = Assignment.objects.filter(task_id=task_id, status=AssignmentStatus.FREE).update(
        status=AssignmentStatus.JUDGED
    )
    if closed != len(slots):
        raise RuntimeError(f"task {task_id}: {closed} of {len(slots)} slots closed under a lock")
    JudgeFilledRating.objects.bulk_create(
        [
            JudgeFilledRating(
                campaign_id=task.campaign_id,
                task_id=task_id,
                response_id=value.response_id,
                aspect_id=value.aspect_id,
                value=value.value,
                confidence=confidence,
                judge_name=judge_name,
                judge_version=judge_version,
            )
            for value in values
        ]
    )
    return True

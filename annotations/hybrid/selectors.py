"""Reads of hybrid campaigns in the annotations domain: how many tasks and slots the judge took over."""

from __future__ import annotations

from dataclasses import dataclass

from annotations.models import Assignment, AssignmentStatus, Campaign, Task


@dataclass(frozen=True)
class HybridCounts:
    tasks: int  # the campaign's tasks, gold ones left out
    judged_tasks: int  # tasks the judge filled
    saved_slots: int  # human ratings of a task (slots) nobody needs to give

    @property
    def human_tasks(self) -> int:
        return self.tasks - self.judged_tasks


def hybrid_counts(campaign: Campaign) -> HybridCounts:
    judged = Assignment.objects.filter(campaign=campaign, status=AssignmentStatus.JUDGED)
    return HybridCounts(
        tasks=Task.objects.filter(campaign=campaign, is_gold=False).count(),
        judged_tasks=judged.values("task_id").distinct().count(),
        saved_slots=judged.count(),
    )

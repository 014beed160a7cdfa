"""An annotator's own progress in a campaign: what the task page's counter and the campaign list show.

It reads the slots, the gold rule and a crowd worker's quota, so it sits above the campaign reads and the
recruitment package, which both stay free of each other."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from datetime import datetime

from django.contrib.auth.models import User
from django.db.models import Count, Max, Q
from django.utils import timezone

from annotations.gold.selectors import gold_still_due, gold_tasks_left
from annotations.models import Assignment, AssignmentStatus, Campaign, RaterExclusion, Skip, Task
from annotations.recruitment.selectors import worker_session_done, worker_tasks_left
from annotations.roles import AnyUser
from annotations.selectors import counts_by
from annotations.slots import slot_counts, slot_personal_state
from annotations.slots.campaign_slots import CAMPAIGN_SLOTS


@dataclass(frozen=True)
class AnnotatorProgress:
    done: int
    available: int
    has_open_task: bool

    @property
    def total(self) -> int:
        return self.done + self.available


def annotator_progress(*, campaign: Campaign, user: AnyUser) -> AnnotatorProgress:
    """Done = tasks this annotator submitted (in their current session, for a crowd worker with a quota per session);
    available = the open task, the tasks that still have a free slot they
    could take, and the gold tasks the gold rule will hand them along the way, capped by a crowd worker's quota.

    Gold counts exactly like a regular task: handing out either moves one task from "to come" to "open", so no
    figure changes with the kind of task served (a gold task appended at hand-out would otherwise add one)."""
    counts = slot_counts(pool=CAMPAIGN_SLOTS, campaign=campaign, user=user)
    has_open = bool(counts.leased)
    available = counts.available + (1 if has_open else 0)
    if campaign.gold_rate > 0 and user.is_authenticated:
        state = slot_personal_state(pool=CAMPAIGN_SLOTS, campaign=campaign, user=user)
        available += gold_still_due(
            campaign=campaign,
            user_id=int(user.pk or 0),
            handed_out=state.held,
            regular_left=counts.available,
            gold_left=gold_tasks_left(campaign=campaign, user=user),
        )
    quota_left = worker_tasks_left(campaign, user)
    if quota_left is not None:
        available = min(available, quota_left)
    # With a quota per session, a worker's session is their study: count it alone, or a second session would read
    # "3 of 6" where three tasks are asked of them.
    session_done = worker_session_done(campaign, user)
    done = counts.done if session_done is None else session_done
    return AnnotatorProgress(done=done, available=available, has_open_task=has_open)


@dataclass(frozen=True)
class AnnotatorRow:
    username: str
    in_pool: bool
    done: int
    skipped: int
    median_seconds: float | None
    last_active: datetime | None
    open_task: bool


@dataclass(frozen=True)
class TaskRow:
    task_id: int
    position: int
    item_id: str
    turn: int
    candidates: int
    submitted: int
    leased: int
    needed: int
    # Slots closed because a certified judge rated the task (hybrid campaigns): the task needs no rater.
    judged: int = 0

    @property
    def is_full(self) -> bool:
        return self.judged > 0 or self.submitted >= self.needed


@dataclass
class CampaignProgress:
    annotators: list[AnnotatorRow]
    tasks: list[TaskRow]
    tasks_total: int
    tasks_complete: int
    ratings_submitted: int
    slots_total: int
    # Pseudonyms of the excluded raters who submitted tasks here: their ratings do not count towards a task's N.
    excluded_raters: list[str] = field(default_factory=list)
    # Gold tasks stay out of the counts above: each annotator gets them in turn, so they never fill up.
    gold_tasks: int = 0
    gold_answers: int = 0


def campaign_progress(campaign: Campaign) -> CampaignProgress:
    """Researcher view: per annotator (done, median seconds per task, last active) and per task fill level; gold
    tasks apart, as a count of tasks and of answers collected."""
    pool = set(campaign.annotators.values_list("pk", flat=True))
    seconds: dict[int, list[float]] = {}
    last: dict[int, datetime] = {}
    open_by: set[int] = set()
    for annotator_id, status, spent, submitted_at, leased_at in Assignment.objects.filter(
        campaign=campaign, annotator__isnull=False
    ).values_list("annotator_id", "status", "seconds_spent", "submitted_at", "leased_at"):
        if status == AssignmentStatus.SUBMITTED:
            seconds.setdefault(annotator_id, []).append(spent or 0.0)
        else:
            open_by.add(annotator_id)
        moment = submitted_at or leased_at
        if moment and (annotator_id not in last or moment > last[annotator_id]):
            last[annotator_id] = moment
    skips = counts_by(Skip.objects.filter(task__campaign=campaign), "annotator_id")
    for annotator_id, moment in (
        Skip.objects.filter(task__campaign=campaign)
        .values("annotator_id")
        .annotate(m=Max("created_at"))
        .values_list("annotator_id", "m")
    ):
        if annotator_id not in last or moment > last[annotator_id]:
            last[annotator_id] = moment
    people = pool | set(seconds) | open_by | set(skips)
    names = dict(User.objects.filter(pk__in=people).values_list("pk", "username"))
    rows = [
        AnnotatorRow(
            username=names.get(pk, "?"),
            in_pool=pk in pool,
            done=len(seconds.get(pk, [])),
            skipped=skips.get(pk, 0),
            median_seconds=statistics.median(seconds[pk]) if seconds.get(pk) else None,
            last_active=last.get(pk),
            open_task=pk in open_by,
        )
        for pk in people
    ]
    rows.sort(key=lambda row: (-row.done, row.username))
    now = timezone.now()
    # A slot of an excluded rater does not count towards the N ratings a task needs; its replacement does.
    excluded_names = dict(
        RaterExclusion.objects.filter(
            rater__dataset_id=campaign.dataset_id, revoked_at__isnull=True, rater__user__isnull=False
        ).values_list("rater__user_id", "rater__pseudonym")
    )
    excluded = list(excluded_names)
    tasks = [
        TaskRow(
            task_id=t["pk"],
            position=t["position"] + 1,
            item_id=t["turn__item__external_id"],
            turn=t["turn__index"] + 1,
            candidates=t["n_candidates"],
            submitted=t["n_submitted"],
            leased=t["n_leased"],
            needed=campaign.raters_per_item,
            judged=t["n_judged"],
        )
        for t in Task.objects.filter(campaign=campaign, is_gold=False)
        .order_by("position")
        .values("pk", "position", "turn__item__external_id", "turn__index")
        .annotate(
            n_candidates=Count("responses", distinct=True),
            n_submitted=Count(
                "assignments",
                filter=Q(assignments__status=AssignmentStatus.SUBMITTED) & ~Q(assignments__annotator_id__in=excluded),
                distinct=True,
            ),
            n_leased=Count(
                "assignments",
                filter=Q(assignments__status=AssignmentStatus.LEASED, assignments__lease_expires_at__gte=now),
                distinct=True,
            ),
            n_judged=Count("assignments", filter=Q(assignments__status=AssignmentStatus.JUDGED), distinct=True),
        )
    ]
    human_tasks = [t for t in tasks if not t.judged]
    return CampaignProgress(
        annotators=rows,
        tasks=tasks,
        tasks_total=len(tasks),
        tasks_complete=sum(1 for t in tasks if t.is_full),
        ratings_submitted=sum(min(t.submitted, t.needed) for t in human_tasks),
        slots_total=len(human_tasks) * campaign.raters_per_item,
        excluded_raters=sorted(name for pk, name in excluded_names.items() if pk in seconds),
        gold_tasks=Task.objects.filter(campaign=campaign, is_gold=True).count(),
        gold_answers=Assignment.objects.filter(
            campaign=campaign, is_gold=True, status=AssignmentStatus.SUBMITTED
        ).count(),
    )

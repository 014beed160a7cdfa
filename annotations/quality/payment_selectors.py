"""The rows of a campaign's payment export: per crowd worker and per account annotator, the work done, the
sessions and skips, and the quality flags a researcher checks before paying. The one place a platform worker id
leaves the database."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from annotations.models import Assignment, AssignmentStatus, Campaign, Rater, Skip
from annotations.quality.selectors import rater_quality
from annotations.recruitment.models import CrowdSession, CrowdWorker
from annotations.selectors import counts_by


@dataclass(frozen=True)
class PaymentRow:
    platform: str
    worker_id: str  # the platform's id: personal data, only ever in this export
    rater: str
    user_id: int
    tasks_done: int
    gold_tasks: int
    seconds_spent: float
    first_activity: datetime | None
    last_activity: datetime | None
    sessions: int
    sessions_completed: int
    # Sessions that ended with the no-more-tasks code (the campaign ran out before the link's minimum) and never
    # completed, and every task the worker skipped: what a researcher checks before paying.
    sessions_out_of_tasks: int
    skips: int
    session_ids: list[str]  # the platform's session (Prolific) or assignment (MTurk) ids, to approve the work by
    completion_code: str
    flag_reasons: list[str]


def _earliest(*moments: datetime | None) -> datetime | None:
    return min((m for m in moments if m is not None), default=None)


def _latest(*moments: datetime | None) -> datetime | None:
    return max((m for m in moments if m is not None), default=None)


def _no_work() -> dict[str, Any]:
    return {"done": 0, "gold": 0, "seconds": 0.0, "first": None, "last": None}


def payment_rows(campaign: Campaign) -> list[PaymentRow]:
    """Per crowd worker who joined through one of the campaign's links (even with nothing done yet) and per
    account annotator who submitted a task: what a researcher pays by."""
    quality = {row.user_id: row for row in rater_quality(campaign)}
    work: dict[int, dict[str, Any]] = defaultdict(_no_work)
    for user_id, is_gold, seconds, submitted_at, leased_at in Assignment.objects.filter(
        campaign=campaign, status=AssignmentStatus.SUBMITTED
    ).values_list("annotator_id", "is_gold", "seconds_spent", "submitted_at", "leased_at"):
        entry = work[user_id]
        entry["done"] += 1
        entry["gold"] += int(is_gold)
        entry["seconds"] += seconds or 0.0
        entry["first"] = _earliest(entry["first"], leased_at, submitted_at)
        entry["last"] = _latest(entry["last"], submitted_at)
    workers = list(
        CrowdWorker.objects.filter(link__campaign=campaign)
        .select_related("link")
        .order_by("link__platform", "joined_at", "pk")
    )
    session_ids: dict[int, list[str]] = defaultdict(list)
    completed: dict[int, int] = defaultdict(int)
    out_of_tasks: dict[int, int] = defaultdict(int)
    for worker_id, session_key, completed_at, ran_out_at in (
        CrowdSession.objects.filter(worker__link__campaign=campaign)
        .order_by("started_at", "pk")
        .values_list("worker_id", "session_key", "completed_at", "ran_out_at")
    ):
        session_ids[worker_id].append(session_key)
        completed[worker_id] += completed_at is not None
        out_of_tasks[worker_id] += completed_at is None and ran_out_at is not None
    skips = counts_by(Skip.objects.filter(task__campaign=campaign), "annotator_id")
    pseudonyms = dict(
        Rater.objects.filter(
            dataset_id=campaign.dataset_id, user_id__in=[*work, *(w.user_id for w in workers)]
        ).values_list("user_id", "pseudonym")
    )
    rows = []
    for worker in workers:
        entry = work.pop(worker.user_id) if worker.user_id in work else _no_work()
        rows.append(
            PaymentRow(
                platform=worker.link.platform,
                worker_id=worker.platform_worker_id,
                rater=pseudonyms.get(worker.user_id, ""),
                user_id=worker.user_id,
                tasks_done=entry["done"],
                gold_tasks=entry["gold"],
                seconds_spent=entry["seconds"],
                first_activity=_earliest(entry["first"], worker.joined_at),
                last_activity=_latest(entry["last"], worker.last_seen_at, worker.joined_at),
                sessions=len(session_ids[worker.pk]),
                sessions_completed=completed[worker.pk],
                sessions_out_of_tasks=out_of_tasks[worker.pk],
                skips=skips.get(worker.user_id, 0),
                session_ids=session_ids[worker.pk],
                completion_code=worker.link.completion_code,
                flag_reasons=quality[worker.user_id].flag_reasons if worker.user_id in quality else [],
            )
        )
    for user_id, entry in sorted(work.items(), key=lambda item: pseudonyms.get(item[0], "")):
        rows.append(
            PaymentRow(
                platform="",
                worker_id="",
                rater=pseudonyms.get(user_id, ""),
                user_id=user_id,
                tasks_done=entry["done"],
                gold_tasks=entry["gold"],
                seconds_spent=entry["seconds"],
                first_activity=entry["first"],
                last_activity=entry["last"],
                sessions=0,
                sessions_completed=0,
                sessions_out_of_tasks=0,
                skips=skips.get(user_id, 0),
                session_ids=[],
                completion_code="",
                flag_reasons=quality[user_id].flag_reasons if user_id in quality else [],
            )
        )
    return rows

"""Reads for crowd recruitment: links by token, a worker's remaining quota, and the researcher's recruitment panel.

Platform ids never leave this module through the panel: the researcher sees each worker's pseudonymous rater id
(or the pseudonymous account name before the first rating), never the id the platform gave the worker."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth.models import User
from django.db.models import Count, Q
from django.utils import timezone

from annotations.models import Assignment, AssignmentStatus, Campaign, Rater, Skip, Task
from annotations.recruitment.models import (
    CrowdSession,
    CrowdWorker,
    Platform,
    RecruitmentLink,
    ScreeningOutcome,
    ScreeningOutcomeKind,
)
from annotations.roles import AnyUser
from annotations.selectors import counts_by

WORKER_USERNAME_PREFIX = "worker-"
# A worker seen within this many minutes counts as active on the panel, even between two tasks.
ACTIVE_MINUTES = 15


def link_by_token(token: str) -> RecruitmentLink | None:
    if not token or len(token) > 64:
        return None
    return RecruitmentLink.objects.select_related("campaign").filter(token=token).first()


def crowd_worker_of(user: AnyUser) -> CrowdWorker | None:
    """The crowd identity behind a signed-in account, or None for an account a researcher created."""
    if not user.is_authenticated:
        return None
    return CrowdWorker.objects.select_related("link", "link__campaign").filter(user_id=user.pk).first()


def is_crowd_worker(user: AnyUser) -> bool:
    return user.is_authenticated and CrowdWorker.objects.filter(user_id=user.pk).exists()


def current_session(worker: CrowdWorker) -> CrowdSession | None:
    return worker.sessions.order_by("-started_at", "-pk").first()


def _submitted(campaign: Campaign, user_id: int) -> Q:
    return Q(campaign=campaign, annotator_id=user_id, status=AssignmentStatus.SUBMITTED)


def is_crowd_account(user: AnyUser) -> bool:
    """Whether the account was made for a crowd worker, read from its name alone: crowd accounts get the prefix when
    they are made (services._worker_account) and have no other way in."""
    return user.get_username().startswith(WORKER_USERNAME_PREFIX)


def worker_session_done(campaign: Campaign, user: AnyUser) -> int | None:
    """The tasks a crowd worker submitted in their current session, when their link sets a quota per session: their
    counter runs against that quota, session by session. None otherwise (the counter covers the whole campaign)."""
    if not is_crowd_account(user):
        return None
    worker = (
        CrowdWorker.objects.filter(user_id=int(user.pk or 0), link__campaign=campaign)
        .select_related("link")
        .only("pk", "link__tasks_per_session")
        .first()
    )
    if worker is None or worker.link.tasks_per_session is None:
        return None
    session = current_session(worker)
    started = session.started_at if session else timezone.now()
    return Assignment.objects.filter(_submitted(campaign, int(user.pk or 0)), submitted_at__gte=started).count()


def worker_tasks_left(campaign: Campaign, user: AnyUser, *, lock: bool = False) -> int | None:
    """How many more tasks a crowd worker may submit in this campaign under their link's quotas (per session and in
    total, gold tasks included); None when no quota applies (an account a researcher created, or no quota set).

    lock: inside a transaction, locks the worker's row first, so that whoever stores an answer after this count
    holds the only right to do so until the transaction ends (the submit counts and stores under this lock)."""
    if not is_crowd_account(user):
        # Every claim asks; the account name, already loaded, spares other accounts the lookup.
        return None
    workers = CrowdWorker.objects.filter(user_id=int(user.pk or 0), link__campaign=campaign)
    if lock:
        workers = workers.select_for_update(of=("self",))
    worker = workers.select_related("link").only("pk", "link__tasks_per_session", "link__tasks_per_worker").first()
    if worker is None:
        return None
    link = worker.link
    limits: list[int] = []
    if link.tasks_per_worker is not None:
        done = Assignment.objects.filter(_submitted(campaign, int(user.pk or 0))).count()
        limits.append(link.tasks_per_worker - done)
    if link.tasks_per_session is not None:
        session = current_session(worker)
        started = session.started_at if session else timezone.now()
        done_here = Assignment.objects.filter(
            _submitted(campaign, int(user.pk or 0)), submitted_at__gte=started
        ).count()
        limits.append(link.tasks_per_session - done_here)
    if not limits:
        return None
    return max(0, min(limits))


def session_submitted(*, campaign: Campaign, user: AnyUser, session: CrowdSession) -> int:
    """Tasks the worker submitted in this campaign since the session started."""
    mine = Assignment.objects.filter(_submitted(campaign, int(user.pk or 0)))
    return mine.filter(submitted_at__gte=session.started_at).count()


def worker_skips_left(campaign: Campaign, user: AnyUser) -> int | None:
    """How many more tasks a crowd worker may skip in their current session; None for other accounts."""
    if not is_crowd_account(user):
        return None
    worker = (
        CrowdWorker.objects.filter(user_id=int(user.pk or 0), link__campaign=campaign).select_related("link").first()
    )
    if worker is None:
        return None
    session = current_session(worker)
    skipped = Skip.objects.filter(annotator_id=user.pk, task__campaign=campaign)
    if session is not None:
        skipped = skipped.filter(created_at__gte=session.started_at)
    return max(0, worker.link.skips_per_session - skipped.count())


def example_task(campaign: Campaign) -> tuple[Task, list[str]] | None:
    """The first task of the queue that is not gold, with its answers' texts, for a preview that stores nothing."""
    task = Task.objects.filter(campaign=campaign, is_gold=False).select_related("turn").order_by("position").first()
    if task is None:
        return None
    texts = list(task.responses.order_by("pk").values_list("text", flat=True))
    return task, texts


# --- the researcher's panel -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkerRow:
    account: str
    rater_id: str
    platform: str
    done: int
    quota: int | None
    active: bool
    finished: bool
    last_seen: datetime | None


@dataclass(frozen=True)
class LinkRow:
    link: RecruitmentLink
    workers: int
    active: int
    finished: int
    tasks_done: int


@dataclass(frozen=True)
class RecruitmentPanel:
    links: list[LinkRow]
    workers: list[WorkerRow]
    missing_platforms: list[tuple[str, str]]

    @property
    def active(self) -> int:
        return sum(1 for row in self.workers if row.active)

    @property
    def finished(self) -> int:
        return sum(1 for row in self.workers if row.finished)


def recruitment_panel(campaign: Campaign, *, now: datetime | None = None) -> RecruitmentPanel:
    now = now or timezone.now()
    links = list(RecruitmentLink.objects.filter(campaign=campaign).order_by("platform"))
    workers = list(
        CrowdWorker.objects.filter(link__campaign=campaign)
        .select_related("link")
        .annotate(completed=Count("sessions", filter=Q(sessions__completed_at__isnull=False)))
        .order_by("joined_at", "pk")
    )
    user_ids = [worker.user_id for worker in workers]
    done = counts_by(
        Assignment.objects.filter(campaign=campaign, annotator_id__in=user_ids, status=AssignmentStatus.SUBMITTED),
        "annotator_id",
    )
    leased = set(
        Assignment.objects.filter(
            campaign=campaign, annotator_id__in=user_ids, status=AssignmentStatus.LEASED, lease_expires_at__gte=now
        ).values_list("annotator_id", flat=True)
    )
    pseudonyms = dict(
        Rater.objects.filter(dataset_id=campaign.dataset_id, user_id__in=user_ids).values_list("user_id", "pseudonym")
    )
    usernames = dict(User.objects.filter(pk__in=user_ids).values_list("pk", "username"))
    recent = now - timedelta(minutes=ACTIVE_MINUTES)
    rows: list[WorkerRow] = []
    for worker in workers:
        count = done.get(worker.user_id, 0)
        quota = worker.link.tasks_per_worker
        finished = bool(getattr(worker, "completed", 0)) or (quota is not None and count >= quota)
        seen = worker.last_seen_at
        rows.append(
            WorkerRow(
                account=usernames.get(worker.user_id, "?"),
                rater_id=pseudonyms.get(worker.user_id, ""),
                platform=worker.link.get_platform_display(),
                done=count,
                quota=quota,
                active=not finished and (worker.user_id in leased or (seen is not None and seen >= recent)),
                finished=finished,
                last_seen=seen,
            )
        )
    by_link: dict[int, list[tuple[CrowdWorker, WorkerRow]]] = {}
    for worker, row in zip(workers, rows, strict=True):
        by_link.setdefault(worker.link_id, []).append((worker, row))
    link_rows = [
        LinkRow(
            link=link,
            workers=len(by_link.get(link.pk, [])),
            active=sum(1 for _, row in by_link.get(link.pk, []) if row.active),
            finished=sum(1 for _, row in by_link.get(link.pk, []) if row.finished),
            tasks_done=sum(row.done for _, row in by_link.get(link.pk, [])),
        )
        for link in links
    ]
    present = {link.platform for link in links}
    missing = [(value, str(label)) for value, label in Platform.choices if value not in present]
    return RecruitmentPanel(links=link_rows, workers=rows, missing_platforms=missing)


def screening_ended_for(*, link: RecruitmentLink, platform_worker_id: str) -> bool:
    """Whether the participant declined consent or was screened out on this link before: they are not asked again."""
    return (
        ScreeningOutcome.objects.filter(link=link, platform_worker_id=platform_worker_id)
        .exclude(outcome=ScreeningOutcomeKind.PASSED)
        .exists()
    )

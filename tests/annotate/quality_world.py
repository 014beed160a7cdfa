"""A crowd study for the rater-quality tests: a campaign whose last items are gold items or attention checks, raters
who answer chosen tasks with chosen values through the real submit service, and crowd workers with platform ids."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

from django.contrib.auth.models import User
from django.utils import timezone

from annotations.campaigns.answers import MISSING, TaskAnswer
from annotations.campaigns.submissions import submission_create
from annotations.campaigns.tasks import task_candidates
from annotations.gold.models import GoldItem, GoldKind
from annotations.models import Assignment, AssignmentStatus, Campaign, Response, Task
from annotations.recruitment.models import CrowdSession, CrowdWorker, Platform, RecruitmentLink
from tests.annotate.factories import make_campaign, make_dataset

ASPECTS = ("factuality", "amount_info")  # 0..3 and -1..1 (N/A allowed) in tests/annotate/factories.py
NA = "na"

Scores = Callable[[int, str, str], float | str]  # (item position, system key, aspect name) -> value or NA


def study(
    researcher: User,
    annotators: list[User],
    *,
    items: int = 6,
    gold: dict[int, dict[str, dict[str, float]]] | None = None,
    attention: dict[int, dict[str, dict[str, float]]] | None = None,
    tolerance: float = 0.5,
    raters_per_item: int = 3,
) -> Campaign:
    """Items 0..items-1 are ordinary; `gold` and `attention` map further item positions to their expected values."""
    gold, attention = gold or {}, attention or {}
    total = items + len(gold) + len(attention)
    dataset = make_dataset(owner=researcher, items=total, systems=2, name=f"study-{uuid.uuid4().hex[:6]}")
    campaign = make_campaign(dataset, annotators, raters_per_item=raters_per_item, name="crowd study")
    for position, expected, kind in [
        *((p, e, GoldKind.GOLD) for p, e in gold.items()),
        *((p, e, GoldKind.ATTENTION) for p, e in attention.items()),
    ]:
        item = dataset.items.get(position=position)
        GoldItem.objects.create(
            item=item,
            kind=kind,
            expected=expected,
            tolerance=tolerance,
            instruction="Choose the value asked for" if kind == GoldKind.ATTENTION else "",
        )
        tasks = Task.objects.filter(campaign=campaign, turn__item=item)
        tasks.update(is_gold=True)
        Assignment.objects.filter(task__in=tasks).update(is_gold=True)
    return campaign


def task_of(campaign: Campaign, position: int) -> Task:
    return Task.objects.get(campaign=campaign, turn__item__position=position)


def rate(
    campaign: Campaign,
    position: int,
    user: User,
    scores: Scores,
    *,
    seconds: float = 30.0,
    at: datetime | None = None,
) -> None:
    """`user` takes a free slot of the item's task and submits `scores` for every candidate and aspect."""
    task = task_of(campaign, position)
    moment = at or timezone.now()
    slot = Assignment.objects.filter(task=task, status=AssignmentStatus.FREE).order_by("slot").first()
    assert slot is not None, f"no free slot left on item {position}"
    slot.annotator = user
    slot.status = AssignmentStatus.LEASED
    slot.leased_at = moment - timedelta(seconds=seconds)
    slot.lease_expires_at = moment + timedelta(hours=1)
    slot.save()
    system_of = dict(Response.objects.filter(campaign_tasks=task).values_list("pk", "system__key"))
    ratings = {}
    for candidate in task_candidates(assignment=slot, user_id=user.pk):
        for index, aspect in enumerate(ASPECTS, start=1):
            value = scores(position, system_of[candidate.response_id], aspect)
            ratings[(candidate.number, index)] = MISSING if value == NA else value
    submission_create(
        campaign=campaign,
        task_id=task.pk,
        user=user,
        idempotency_key=uuid.uuid4().hex,
        answer=TaskAnswer(ratings=ratings, preference=1, rationale="the first one is clearer"),
        now=moment,
    )


def crowd_worker(
    campaign: Campaign,
    platform_worker_id: str,
    *,
    platform: str = Platform.PROLIFIC,
    completion_code: str = "C1A2B3",
    sessions: int = 1,
    completed: int = 1,
) -> User:
    """A worker who joined through the campaign's link: a passwordless account in the pool, bound to their id."""
    link, _ = RecruitmentLink.objects.get_or_create(
        campaign=campaign,
        platform=platform,
        defaults={"token": secrets.token_urlsafe(32), "completion_code": completion_code},
    )
    user = User.objects.create_user(username=f"crowd-{secrets.token_hex(4)}", password=None)
    campaign.annotators.add(user)
    worker = CrowdWorker.objects.create(link=link, platform_worker_id=platform_worker_id, user=user)
    now = timezone.now()
    for index in range(sessions):
        CrowdSession.objects.create(
            worker=worker,
            session_key=f"session-{index}",
            study_key="study-1",
            started_at=now - timedelta(hours=1),
            completed_at=now if index < completed else None,
        )
    return user


def careful(position: int, system: str, aspect: str) -> float:
    """Values that vary with the item and the system, as an attentive rater's would."""
    base = (position * 7 + (3 if system == "sys_alpha" else 1)) % 4
    return float(base) if aspect == "factuality" else float(base % 3 - 1)


def careful_but_noisy(shift: int) -> Scores:
    def scores(position: int, system: str, aspect: str) -> float:
        value = careful(position, system, aspect)
        if (position + shift) % 3 == 0:
            value += 1 if aspect == "factuality" and value < 3 else (-1 if value > -1 else 1)
        return value

    return scores


def one_value(value: float) -> Scores:
    return lambda position, system, aspect: value

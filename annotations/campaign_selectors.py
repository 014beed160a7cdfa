"""Reads for annotation campaigns, every one scoped by the requesting user.

Annotators reach campaigns only through their pool membership and tasks only through a lease they hold; the
querysets built here never select system keys, model names, other raters' ratings or judge scores, so a view
cannot leak them by accident.

Why one module of this size: every read of a campaign is scoped by the requesting user through the same pool and
lease checks defined here, and kept together no read can skip them.
"""

import functools
import hashlib
import random
import statistics
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.db.models import Count, JSONField, Max, Model, OuterRef, Q, QuerySet, Subquery
from django.http import Http404
from django.utils import timezone
from django.utils.translation import get_language

from annotations.campaign_settings import SETTING_NAMES
from annotations.campaign_slots import CAMPAIGN_SLOTS
from annotations.gold.selectors import attention_instructions
from annotations.models import (
    Aspect,
    Assignment,
    AssignmentDraft,
    AssignmentStatus,
    Campaign,
    RaterExclusion,
    Rating,
    Response,
    Skip,
    Task,
    Turn,
)
from annotations.rubrics import format_number
from annotations.selectors import datasets_for_user
from annotations.slots import slot_pool_has
from annotations.statements import instance_from_row, statement_cursor

AnyUser = AbstractBaseUser | AnonymousUser


# Scales with at most this many integer steps get one option per value; wider or fractional ones get a number box.
MAX_DISCRETE_OPTIONS = 11
# A row of one button per value still reads at a glance up to seven values; longer scales stay drop-downs.
MAX_BUTTON_VALUES = 7

ModelT = TypeVar("ModelT", bound=Model)


# --- campaigns --------------------------------------------------------------------------------------------------


def campaigns_for_annotator(user: AnyUser) -> QuerySet[Campaign]:
    if not user.is_authenticated:
        return Campaign.objects.none()
    return Campaign.objects.filter(annotators__pk=user.pk, is_active=True).order_by("name")


# Every campaign column the annotator pages and API read; created_at is left out (deferred) because the annotator
# side never shows it and its row repeats once per aspect, each a Python timestamp parse.
CAMPAIGN_COLUMNS = (
    "id",
    "name",
    "dataset_id",
    "raters_per_item",
    "candidates_per_task",
    *SETTING_NAMES,
    "shuffle_seed",
    "created_by_id",
)
ASPECT_COLUMNS = (
    "id",
    "dataset_id",
    "name",
    "label",
    "description",
    "min_value",
    "max_value",
    "ideal",
    "level",
    "labels",
    "missing",
    "position",
    "translations",
)
# The campaign, whether the user is in its pool, and its aspects in display order (one row per aspect).
_CAMPAIGN_FOR_ANNOTATOR_SQL = """
SELECT campaign.id, campaign.name, campaign.dataset_id, campaign.raters_per_item, campaign.candidates_per_task,
       campaign.guidelines, campaign.show_reference, campaign.show_context, campaign.ask_preference,
       campaign.rationale_required, campaign.scale_dropdowns, campaign.lease_minutes, campaign.is_active,
       campaign.allow_revisit, campaign.gold_rate,
       campaign.shuffle_seed, campaign.created_by_id,
       EXISTS (
           SELECT 1 FROM annotations_campaign_annotators member
           WHERE member.campaign_id = campaign.id AND member.user_id = %(user)s
       ),
       EXISTS (SELECT 1 FROM annotations_adjudicationrule rule WHERE rule.campaign_id = campaign.id),
       dataset.answer_format,
       aspect.id, aspect.dataset_id, aspect.name, aspect.label, aspect.description, aspect.min_value,
       aspect.max_value, aspect.ideal, aspect.level, aspect.labels, aspect.missing, aspect.position,
       aspect.translations
FROM annotations_campaign campaign
JOIN annotations_dataset dataset ON dataset.id = campaign.dataset_id
LEFT JOIN annotations_campaign_aspects shown ON shown.campaign_id = campaign.id
LEFT JOIN annotations_aspect aspect ON aspect.id = shown.aspect_id
WHERE campaign.id = %(campaign)s
ORDER BY aspect.position, aspect.id
"""


def campaign_for_annotator(user: AnyUser, pk: int) -> Campaign:
    """The campaign if the user is in its pool; 404 if it does not exist or the user is not (or no longer)
    one of its annotators. Its scales come with it (campaign_scales needs no further query)."""
    with statement_cursor() as cursor:
        cursor.execute(_CAMPAIGN_FOR_ANNOTATOR_SQL, {"campaign": pk, "user": user.pk or 0})
        rows = cursor.fetchall()
    if not rows:
        raise Http404("no such campaign")
    first, width = rows[0], len(CAMPAIGN_COLUMNS)
    campaign = instance_from_row(Campaign, CAMPAIGN_COLUMNS, first[:width])
    if not user.is_authenticated or not (campaign.is_active and first[width]):
        # Outside the pool the campaign is outside the user's scope: 404, so its existence is not revealed.
        raise Http404("no such campaign")
    campaign._adjudicates = bool(first[width + 1])  # type: ignore[attr-defined]
    campaign._answer_format = first[width + 2]  # type: ignore[attr-defined]
    aspect_rows = tuple(tuple(row[width + 3 :]) for row in rows if row[width + 3])
    campaign._scales_cache = list(  # type: ignore[attr-defined]
        _scales_of_rows(aspect_rows, connection.vendor, get_language() or "")
    )
    return campaign


@functools.lru_cache(maxsize=512)
def _scales_of_rows(aspect_rows: tuple[tuple[Any, ...], ...], vendor: str, language: str) -> "tuple[Scale, ...]":
    """Every annotator request reads its campaign's aspects, and building their instances and scales again cost a
    tenth of the request. Keyed on the rows exactly as read, so an edited aspect is a new key, never a stale hit;
    the scales are shared between requests and only read."""
    del vendor, language  # part of the key: converters differ between backends, value labels between languages
    aspects = [instance_from_row(Aspect, ASPECT_COLUMNS, row) for row in aspect_rows]
    return tuple(aspect_scale(aspect, i) for i, aspect in enumerate(aspects, start=1))


def campaign_has_annotator(campaign: Campaign, user: User) -> bool:
    return slot_pool_has(pool=CAMPAIGN_SLOTS, campaign=campaign, user=user)


def campaigns_for_researcher(user: AnyUser) -> QuerySet[Campaign]:
    return Campaign.objects.filter(dataset__in=datasets_for_user(user)).select_related("dataset").order_by("name")


def campaign_for_researcher(user: AnyUser, pk: int) -> Campaign:
    """403 for anyone who is not a researcher, 404 for a campaign outside the researcher's datasets."""
    if not user.is_authenticated or not getattr(user, "is_staff", False):
        raise PermissionDenied("researcher access is required")
    campaign = campaigns_for_researcher(user).filter(pk=pk).first()
    if campaign is None:
        raise Http404("no such campaign")
    return campaign


def campaign_answer_format(campaign: Campaign) -> str:
    """How the campaign's dataset shows its answers (annotations.models.AnswerFormat); read with the campaign on the
    annotator's pages (campaign_for_annotator), else asked here."""
    known: str | None = getattr(campaign, "_answer_format", None)
    if known is None:
        known = campaign.dataset.answer_format
    return known


def campaign_aspects(campaign: Campaign) -> list[Aspect]:
    return list(campaign.aspects.order_by("position", "pk"))


# --- tasks and leases -------------------------------------------------------------------------------------------


def _latest_draft(task_ref: Any, user_ref: Any) -> Subquery:
    """The user's latest draft of a task, on whichever of its slots they held when they wrote it: an answer kept
    after its lease passed to someone else is found again when the user gets another slot of the task."""
    return Subquery(
        AssignmentDraft.objects.filter(assignment__task_id=task_ref, annotator_id=user_ref)
        .order_by("-updated_at")
        .values("values")[:1],
        output_field=JSONField(),
    )


def _own_assignment(
    *, campaign: Campaign, task_id: int, user: AnyUser, statuses: tuple[str, ...], lock: bool
) -> Assignment | None:
    found = (
        Assignment.objects.filter(campaign=campaign, task_id=task_id, annotator_id=user.pk, status__in=statuses)
        .select_related("task__turn")
        .annotate(draft_values=_latest_draft(OuterRef("task_id"), OuterRef("annotator_id")))
    )
    if lock:
        found = found.select_for_update(of=("self",))
    assignment = found.first()
    if assignment is not None:
        assignment.campaign = campaign
        assignment.task.campaign = campaign
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


def rating_field_id(candidate: int, aspect_index: int) -> str:
    return f"r-{candidate}-{aspect_index}"


def submission_form_values(*, assignment: Assignment, user: AnyUser) -> dict[str, str]:
    """The user's current answer to a submitted task as the form's field values, to show it for correction."""
    submission = assignment.submission
    candidates = task_candidates(assignment=assignment, user_id=int(user.pk or 0))
    number_of = {c.response_id: c.number for c in candidates}
    index_of = {scale.aspect.pk: scale.index for scale in campaign_scales(assignment.campaign)}
    values: dict[str, str] = {}
    for response_id, aspect_id, value, is_missing in Rating.objects.filter(
        rater__user_id=int(user.pk or 0),
        rater__dataset_id=assignment.campaign.dataset_id,
        response_id__in=list(number_of),
        aspect_id__in=list(index_of),
    ).values_list("response_id", "aspect_id", "value", "is_missing"):
        field_id = rating_field_id(number_of[response_id], index_of[aspect_id])
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


def closed_campaign_for_annotator(user: AnyUser, pk: int) -> Campaign | None:
    """The campaign when it exists, is closed, and the user is in its pool: the pages then say it is closed instead
    of answering 404 to someone who was working on it."""
    if not user.is_authenticated:
        return None
    return Campaign.objects.filter(pk=pk, is_active=False, annotators__pk=user.pk).first()


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


@dataclass(frozen=True)
class Candidate:
    number: int  # 1-based label shown to the annotator: "Candidate 1"
    response_id: int
    text: str
    earlier_answers: list[str] = field(default_factory=list)
    # An attention check's instruction for this answer ("choose 2 for this aspect"); empty on every other task.
    instruction: str = ""


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


# --- scales -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScaleOption:
    token: str  # the form value
    value: float
    label: str  # "3 · accurate"
    key: str  # keyboard shortcut, "" if none


@dataclass(frozen=True)
class Scale:
    aspect: Aspect
    index: int  # 1-based position among the campaign's aspects, used in field names
    options: list[ScaleOption]
    allows_missing: bool
    missing_token: Any  # what is stored when the annotator picks N/A

    @property
    def is_discrete(self) -> bool:
        return bool(self.options)

    @property
    def fits_button_row(self) -> bool:
        return self.is_discrete and len(self.options) <= MAX_BUTTON_VALUES

    @property
    def is_signed(self) -> bool:
        return self.aspect.min_value < 0

    @property
    def range_text(self) -> str:
        return f"{format_number(self.aspect.min_value)}–{format_number(self.aspect.max_value)}"


NA_TOKEN = "na"  # noqa: S105 - a form value, not a secret
NA_KEY = "n"


def _is_whole(value: float) -> bool:
    return float(value).is_integer()


def _option_key(value: int, position: int, values: list[int]) -> str:
    """The key shown on an option. A digit must never mean anything but its own value: on a signed scale "1"
    picking -1 would be a lie, so there "-" and "+" step from 0 (the page script) and only 0 has a key of its
    own; scales that are neither signed nor single-digit pick the n-th option."""
    if values[0] < 0:
        return {0: "0", -1: "-", 1: "+"}.get(value, "")
    if values[-1] <= 9:
        return str(value)
    return str(position) if position <= 9 else ""


def aspect_scale(aspect: Aspect, index: int) -> Scale:
    options: list[ScaleOption] = []
    lo, hi = aspect.min_value, aspect.max_value
    value_labels = aspect.display_value_labels()
    if _is_whole(lo) and _is_whole(hi) and hi - lo + 1 <= MAX_DISCRETE_OPTIONS:
        values = list(range(int(lo), int(hi) + 1))
        for position, value in enumerate(values, start=1):
            text = format_number(value)
            meaning = value_labels.get(text) or value_labels.get(f"{value}.0") or ""
            key = _option_key(value, position, values)
            options.append(
                ScaleOption(token=text, value=float(value), label=f"{text} · {meaning}" if meaning else text, key=key)
            )
    missing = list(aspect.missing or [])
    missing_token: Any = None
    if missing:
        missing_token = "NA" if "NA" in missing else next((m for m in missing if m is not None), missing[0])
    return Scale(aspect=aspect, index=index, options=options, allows_missing=bool(missing), missing_token=missing_token)


def campaign_scales(campaign: Campaign) -> list[Scale]:
    """Memoised on the campaign object: a request asks for them in the view and again in the service."""
    cached: list[Scale] | None = getattr(campaign, "_scales_cache", None)
    if cached is None:
        cached = [aspect_scale(aspect, i) for i, aspect in enumerate(campaign_aspects(campaign), start=1)]
        campaign._scales_cache = cached  # type: ignore[attr-defined]
    return cached


# --- progress ---------------------------------------------------------------------------------------------------


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
    skips = dict(
        Skip.objects.filter(task__campaign=campaign)
        .values("annotator_id")
        .annotate(n=Count("pk"))
        .values_list("annotator_id", "n")
    )
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

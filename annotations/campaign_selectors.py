"""Reads for annotation campaigns, every one scoped by the requesting user.

Annotators reach campaigns only through their pool membership and tasks only through a lease they hold; the
querysets built here never select system keys, model names, other raters' ratings or judge scores, so a view
cannot leak them by accident.
"""

import functools
import hashlib
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import Count, Max, Model, Q, QuerySet
from django.http import Http404
from django.utils import timezone

from annotations.models import Aspect, Assignment, AssignmentStatus, Campaign, Response, Skip, Task, Turn
from annotations.rubrics import format_number
from annotations.selectors import datasets_for_user

AnyUser = AbstractBaseUser | AnonymousUser

# Scales with at most this many integer steps get one option per value; wider or fractional ones get a number box.
MAX_DISCRETE_OPTIONS = 11

ModelT = TypeVar("ModelT", bound=Model)


# --- rows read with plain SQL -----------------------------------------------------------------------------------
# The annotator's every request runs the same few reads and writes. Written as SQL they cost a fraction of the
# ORM's query building, which dominated the time of a request; the scoping rules are the same as in the ORM code.


@functools.cache
def _preparing_cursor_class() -> type:
    import psycopg

    class PreparingCursor(psycopg.Cursor):  # type: ignore[type-arg]
        """Binds values on the server and has Postgres prepare each statement the first time it runs on a
        connection (psycopg keeps the last 100 per connection), so it is parsed and planned once."""

        def execute(self, query: Any, params: Any = None, *, prepare: bool | None = None, binary: bool | None = None):  # type: ignore[no-untyped-def, override]
            return super().execute(query, params, prepare=True if prepare is None else prepare, binary=binary)

    return PreparingCursor


def statement_cursor() -> Any:
    """A cursor for the hand-written statements of this module and campaign_services. On Postgres they are prepared
    statements: planning was most of the database time of these short queries, run thousands of times with new
    values. Django's own cursors bind on the client and never prepare (it keeps poolers such as PgBouncer in
    transaction mode working; with such a pooler, it needs prepared-statement support, PgBouncer 1.21+). The cursor
    is wrapped like any Django cursor: errors become django.db errors and queries are logged and counted."""
    # One lookup of this thread's connection: each attribute read through django.db.connection repeats it.
    wrapper = connections[DEFAULT_DB_ALIAS]
    if wrapper.vendor != "postgresql":
        return wrapper.cursor()
    wrapper.close_if_health_check_failed()
    wrapper.ensure_connection()
    database = wrapper.connection
    if database.prepare_threshold is None:
        # Django turns preparing off for the whole connection; allow it for cursors that ask for it (only this one:
        # Django's client-binding cursors cannot prepare, so the very high threshold never triggers for them).
        database.prepare_threshold = 2**31 - 1
    with wrapper.wrap_database_errors:
        return wrapper._prepare_cursor(_preparing_cursor_class()(database))  # type: ignore[attr-defined]


@functools.cache
def _row_loader(
    model: type[Model], names: tuple[str, ...], vendor: str
) -> tuple[list[int], list[tuple[str, list[Callable[..., Any]], Any]]]:
    """How to turn columns named `names` into `model` field values: their order among the model's fields, and the
    converters the ORM itself would apply (database adapters, JSON decoding)."""
    del vendor  # part of the cache key: converters differ between database backends
    position = {name: i for i, name in enumerate(names)}
    ordered = [f for f in model._meta.concrete_fields if f.attname in position]
    if len(ordered) != len(names):
        raise ValueError(f"unknown columns for {model.__name__}: {names}")
    plan = []
    for f in ordered:
        column = f.get_col(model._meta.db_table)
        plan.append((f.attname, [*connection.ops.get_db_converters(column), *f.get_db_converters(connection)], column))
    return [position[f.attname] for f in ordered], plan


def instance_from_row(model: type[ModelT], names: Sequence[str], values: Sequence[Any]) -> ModelT:
    """A model instance from columns read with SQL, as the ORM would have loaded it; other fields stay deferred."""
    wrapper = connections[DEFAULT_DB_ALIAS]
    order, plan = _row_loader(model, tuple(names), wrapper.vendor)
    converted = []
    for index, (_name, converters, column) in zip(order, plan, strict=True):
        value = values[index]
        for convert in converters:
            value = convert(value, column, wrapper)
        converted.append(value)
    return model.from_db(DEFAULT_DB_ALIAS, [name for name, _, _ in plan], converted)  # type: ignore[return-value]


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
    "guidelines",
    "show_reference",
    "show_context",
    "ask_preference",
    "rationale_required",
    "lease_minutes",
    "is_active",
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
)
# The campaign, whether the user is in its pool, and its aspects in display order (one row per aspect).
_CAMPAIGN_FOR_ANNOTATOR_SQL = """
SELECT campaign.id, campaign.name, campaign.dataset_id, campaign.raters_per_item, campaign.candidates_per_task,
       campaign.guidelines, campaign.show_reference, campaign.show_context, campaign.ask_preference,
       campaign.rationale_required, campaign.lease_minutes, campaign.is_active, campaign.shuffle_seed,
       campaign.created_by_id,
       EXISTS (
           SELECT 1 FROM annotations_campaign_annotators member
           WHERE member.campaign_id = campaign.id AND member.user_id = %(user)s
       ),
       aspect.id, aspect.dataset_id, aspect.name, aspect.label, aspect.description, aspect.min_value,
       aspect.max_value, aspect.ideal, aspect.level, aspect.labels, aspect.missing, aspect.position
FROM annotations_campaign campaign
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
    aspect_rows = tuple(tuple(row[width + 1 :]) for row in rows if row[width + 1])
    campaign._scales_cache = list(_scales_of_rows(aspect_rows, connection.vendor))  # type: ignore[attr-defined]
    return campaign


@functools.lru_cache(maxsize=512)
def _scales_of_rows(aspect_rows: tuple[tuple[Any, ...], ...], vendor: str) -> "tuple[Scale, ...]":
    """Every annotator request reads its campaign's aspects, and building their instances and scales again cost a
    tenth of the request. Keyed on the rows exactly as read, so an edited aspect is a new key, never a stale hit;
    the scales are shared between requests and only read."""
    del vendor  # part of the key: the converters differ between database backends
    aspects = [instance_from_row(Aspect, ASPECT_COLUMNS, row) for row in aspect_rows]
    return tuple(aspect_scale(aspect, i) for i, aspect in enumerate(aspects, start=1))


def campaign_has_annotator(campaign: Campaign, user: User) -> bool:
    return campaign.is_active and campaign.annotators.filter(pk=user.pk).exists()


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


def campaign_aspects(campaign: Campaign) -> list[Aspect]:
    return list(campaign.aspects.order_by("position", "pk"))


# --- tasks and leases -------------------------------------------------------------------------------------------


def leased_assignment(*, campaign: Campaign, task_id: int, user: AnyUser) -> Assignment:
    """The user's open lease on a task of this campaign; 404 for a task outside the campaign, 403 for a task that
    is not leased to the user (never leased, leased to someone else, expired and taken over, or already done)."""
    assignment = (
        Assignment.objects.filter(
            campaign=campaign, task_id=task_id, annotator_id=user.pk, status=AssignmentStatus.LEASED
        )
        .select_related("task__turn")
        .first()
    )
    if assignment is None:
        if not Task.objects.filter(pk=task_id, campaign=campaign).exists():
            raise Http404("no such task")
        raise PermissionDenied("this task is not leased to you")
    assignment.campaign = campaign
    assignment.task.campaign = campaign
    return assignment


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
    return [
        Candidate(number=i + 1, response_id=pk, text=texts[pk], earlier_answers=earlier[pk])
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
    def range_text(self) -> str:
        return f"{format_number(self.aspect.min_value)}–{format_number(self.aspect.max_value)}"


NA_TOKEN = "na"  # noqa: S105 - a form value, not a secret
NA_KEY = "n"


def _is_whole(value: float) -> bool:
    return float(value).is_integer()


def aspect_scale(aspect: Aspect, index: int) -> Scale:
    options: list[ScaleOption] = []
    lo, hi = aspect.min_value, aspect.max_value
    if _is_whole(lo) and _is_whole(hi) and hi - lo + 1 <= MAX_DISCRETE_OPTIONS:
        values = list(range(int(lo), int(hi) + 1))
        # Digits type the value itself when every value is a single digit; otherwise they pick the n-th option.
        typed_as_value = all(0 <= v <= 9 for v in values)
        for position, value in enumerate(values, start=1):
            text = format_number(value)
            meaning = aspect.labels.get(text) or aspect.labels.get(f"{value}.0") or ""
            key = str(value) if typed_as_value else (str(position) if position <= 9 else "")
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
class AnnotatorProgress:
    done: int
    available: int
    has_open_task: bool

    @property
    def total(self) -> int:
        return self.done + self.available


# Done, open and available for one annotator in one read: available counts tasks with a claimable slot that the
# annotator has not rated, leased or skipped (the same rule as the claim in campaign_services).
_ANNOTATOR_PROGRESS_SQL = """
SELECT
    (SELECT COUNT(*) FROM annotations_assignment
     WHERE campaign_id = %(campaign)s AND annotator_id = %(user)s AND status = 'submitted'),
    (SELECT COUNT(*) FROM annotations_assignment
     WHERE campaign_id = %(campaign)s AND annotator_id = %(user)s AND status = 'leased'),
    (SELECT COUNT(DISTINCT slot.task_id) FROM annotations_assignment slot
     WHERE slot.campaign_id = %(campaign)s
       AND (slot.status = 'free' OR (slot.status = 'leased' AND slot.lease_expires_at < %(now)s))
       AND slot.task_id NOT IN (
           SELECT task_id FROM annotations_assignment WHERE campaign_id = %(campaign)s AND annotator_id = %(user)s
       )
       AND slot.task_id NOT IN (
           SELECT skip.task_id FROM annotations_skip skip JOIN annotations_task task ON task.id = skip.task_id
           WHERE skip.annotator_id = %(user)s AND task.campaign_id = %(campaign)s
       ))
"""


def annotator_progress(*, campaign: Campaign, user: AnyUser) -> AnnotatorProgress:
    """Done = tasks this annotator submitted; available = tasks that still have a free slot they could take."""
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    with statement_cursor() as cursor:
        cursor.execute(_ANNOTATOR_PROGRESS_SQL, {"campaign": campaign.pk, "user": user.pk or 0, "now": now})
        done, open_leases, available = cursor.fetchone()
    has_open = bool(open_leases)
    return AnnotatorProgress(done=done, available=available + (1 if has_open else 0), has_open_task=has_open)


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

    @property
    def is_full(self) -> bool:
        return self.submitted >= self.needed


@dataclass
class CampaignProgress:
    annotators: list[AnnotatorRow]
    tasks: list[TaskRow]
    tasks_total: int
    tasks_complete: int
    ratings_submitted: int
    slots_total: int


def campaign_progress(campaign: Campaign) -> CampaignProgress:
    """Researcher view: per annotator (done, median seconds per task, last active) and per task fill level."""
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
        )
        for t in Task.objects.filter(campaign=campaign)
        .order_by("position")
        .values("pk", "position", "turn__item__external_id", "turn__index")
        .annotate(
            n_candidates=Count("responses", distinct=True),
            n_submitted=Count("assignments", filter=Q(assignments__status=AssignmentStatus.SUBMITTED), distinct=True),
            n_leased=Count(
                "assignments",
                filter=Q(assignments__status=AssignmentStatus.LEASED, assignments__lease_expires_at__gte=now),
                distinct=True,
            ),
        )
    ]
    return CampaignProgress(
        annotators=rows,
        tasks=tasks,
        tasks_total=len(tasks),
        tasks_complete=sum(1 for t in tasks if t.is_full),
        ratings_submitted=sum(t.submitted for t in tasks),
        slots_total=len(tasks) * campaign.raters_per_item,
    )

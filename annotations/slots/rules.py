"""The slot engine's vocabulary and its rules written once: the pool a campaign kind names (`SlotPool`), the claim's
result types, the SQL fragments of the pool, the claim rule and completing, and building a task's N slots."""

# The statements below are assembled from table and column names read from model metadata, never from input, and
# bind every value as a parameter.
# ruff: noqa: S608

import enum
import functools
import hashlib
import random
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from django.db import connection
from django.db.models import Model

from annotations.models.slot_rows import SlotRow, SlotStatus
from annotations.roles import AnyUser
from annotations.slots.statements import statement_cursor

SlotT = TypeVar("SlotT", bound=SlotRow)


class LeasingCampaign(Protocol):
    """What the engine reads of the campaign a slot belongs to (an annotation campaign or a FActScore review):
    its key and how long a lease lasts."""

    @property
    def pk(self) -> Any: ...

    @property
    def lease_minutes(self) -> int: ...


CLAIM_ATTEMPTS = 8


class NotInPool(Exception):
    """The user is not (or no longer) in the campaign's pool, or the campaign is closed."""


class NotLeased(Exception):
    """The task is not leased to the user: never was, expired and went to someone else, or is already done."""


@dataclass(frozen=True)
class SlotPool(Generic[SlotT]):
    """Where one kind of campaign keeps its rows.

    campaign: is_active, lease_minutes and an `annotators` many-to-many to users; task: campaign, position;
    slot: a SlotRow with campaign, task and annotator foreign keys; skip: task, annotator."""

    campaign: type[Model]
    task: type[Model]
    slot: type[SlotT]
    skip: type[Model]
    # A boolean slot column marking slots appended for one person (see "personal slots"); the claim rule never
    # hands such a slot to anyone else, even when its lease expired. Empty when the pool has none.
    personal: str = ""
    # An SQL condition, true when the user may not take the task whose id is the expression `{task}` (params:
    # campaign, user): a task they could not submit. The claim rule never hands such a task out and an open lease on
    # one is given back instead of resumed. Empty when every task is open to everyone.
    barred: str = ""
    # Nullable timestamp columns of the campaign bounding when new slots are handed out (see "the hand-out window").
    # Empty when the pool's campaigns have no such window.
    opens: str = ""
    closes: str = ""
    # A nullable campaign column set when the campaign stops handing out tasks (its stopping rule was met): from
    # then on the claim rule takes no new slot, while a lease already held may still be resumed and submitted.
    # Empty when the campaigns of the pool never stop early.
    stopped: str = ""


@dataclass(frozen=True)
class ClaimDetails:
    """What a caller reads along with a claimed slot: `related` (select_related paths) on the portable path;
    `columns` (", task.id, ...") and `joins` (" JOIN ... ON ... = held.task_id") in the one-statement claim,
    which reads them from `held`, the claimed row."""

    related: tuple[str, ...] = ()
    columns: str = ""
    joins: str = ""


NO_DETAILS = ClaimDetails()


@dataclass(frozen=True)
class Claim(Generic[SlotT]):
    slot: SlotT  # an instance of the pool's slot model
    resumed: bool  # the user's open lease, extended; otherwise a slot taken now
    details: tuple[Any, ...]  # the ClaimDetails columns (one-statement claim only)


@dataclass(frozen=True)
class SlotCounts:
    done: int  # slots the user completed
    leased: int  # open leases the user holds (0 or 1)
    available: int  # tasks with a slot the user may claim now


SLOT_COLUMNS = (
    "id",
    "campaign_id",
    "task_id",
    "task_position",
    "slot",
    "slot_limit",
    "annotator_id",
    "status",
    "leased_at",
    "lease_expires_at",
    "submitted_at",
    "seconds_spent",
)


_IN_POOL = """EXISTS (
    SELECT 1 FROM {members} member JOIN {campaigns} campaign ON campaign.id = member.{member_campaign}
    WHERE member.{member_campaign} = %(campaign)s AND member.{member_user} = %(user)s AND campaign.is_active
)"""
_LEASE_OPEN = "({alias}.status = 'free' OR ({alias}.status = 'leased' AND {alias}.lease_expires_at < %(now)s))"
_CLAIMABLE = (
    "{alias}.campaign_id = %(campaign)s AND "  # nosec B608 - model-metadata names, bound values
    + _LEASE_OPEN
    + """
    AND {alias}.task_id NOT IN (
        SELECT mine.task_id FROM {slots} mine WHERE mine.campaign_id = %(campaign)s AND mine.annotator_id = %(user)s
    )
    AND {alias}.task_id NOT IN (
        SELECT skip.task_id FROM {skips} skip JOIN {tasks} task ON task.id = skip.task_id
        WHERE skip.annotator_id = %(user)s AND task.campaign_id = %(campaign)s
    )"""  # nosec B608 - model-metadata names, bound values
)
_WINDOW_OPEN = """EXISTS (
    SELECT 1 FROM {campaigns} timing WHERE timing.id = %(campaign)s
    AND (timing.{opens} IS NULL OR timing.{opens} <= %(now)s) AND (timing.{closes} IS NULL OR %(now)s < timing.{closes})
)"""  # nosec B608 - model-metadata names, bound values
_COMPLETE = (
    "UPDATE {slots} SET status = 'submitted', submitted_at = %(now)s, seconds_spent = %(spent)s\n"
    "    WHERE id = %(slot)s AND annotator_id = %(user)s AND status = 'leased' AND " + _IN_POOL  # nosec B608 - model-metadata names, bound values
)


@functools.cache
def _names(pool: SlotPool[Any]) -> dict[str, str]:
    members = pool.campaign._meta.get_field("annotators")
    return {
        "campaigns": pool.campaign._meta.db_table,
        "tasks": pool.task._meta.db_table,
        "slots": pool.slot._meta.db_table,
        "skips": pool.skip._meta.db_table,
        "members": members.m2m_db_table(),  # type: ignore[union-attr]
        "member_campaign": members.m2m_column_name(),  # type: ignore[union-attr]
        "member_user": members.m2m_reverse_name(),  # type: ignore[union-attr]
    }


def _fragment(pool: SlotPool[Any], template: str, alias: str = "slot") -> str:
    return template.format(alias=alias, **_names(pool))


def window_open_sql(pool: SlotPool[Any]) -> str:
    """The hand-out window as a boolean SQL expression (params: campaign, now): true from the campaign's opening
    time (inclusive) until its closing time (exclusive), either of which may be empty. New slots are handed out
    only while it holds; outside it an open lease is resumed without being extended, and only until it ends."""
    if not (pool.opens and pool.closes):
        return "(1 = 1)"
    return _WINDOW_OPEN.format(opens=pool.opens, closes=pool.closes, **_names(pool))


class HandOut(enum.StrEnum):
    """Where a moment falls in a campaign's hand-out window."""

    OPEN = "open"
    NOT_YET_OPEN = "not_yet_open"
    CLOSED = "closed"


def hand_out_window(*, opens_at: datetime | None, closes_at: datetime | None, now: datetime) -> HandOut:
    """The window of window_open_sql for pages to show, which hold the campaign already: the opening moment is
    inside, the closing moment outside. tests/annotations/campaigns/test_slots.py checks both say the same at the
    boundaries."""
    if opens_at is not None and now < opens_at:
        return HandOut.NOT_YET_OPEN
    if closes_at is not None and now >= closes_at:
        return HandOut.CLOSED
    return HandOut.OPEN


def _lease_still_runs(pool: SlotPool[Any], alias: str) -> str:
    """A lease of the user may be resumed or completed: inside the window any lease the user still holds (a lease
    that expired counts while nobody took it), outside it only one whose time has not run out."""
    return f"({window_open_sql(pool)} OR {alias}.lease_expires_at >= %(now)s)"


def _barred(pool: SlotPool[Any], task: str) -> str:
    """`SlotPool.barred` for the task id expression given, or a condition that is never true."""
    return f"({pool.barred.format(task=task)})" if pool.barred else "(1 = 0)"


def _not_stopped(pool: SlotPool[Any]) -> str:
    """True while the campaign still hands out tasks (SlotPool.stopped), or always when its pool never stops."""
    if not pool.stopped:
        return "(1 = 1)"
    campaigns = _names(pool)["campaigns"]
    return (
        f"NOT EXISTS (SELECT 1 FROM {campaigns} halted WHERE halted.id = %(campaign)s"  # nosec B608 - model-metadata names, bound values
        f" AND halted.{pool.stopped} IS NOT NULL)"
    )


def handing_out_sql(pool: SlotPool[Any]) -> str:
    """Whether the campaign hands out new slots (params: campaign, now): inside its window and until it stops. Every
    claim of a new slot, shared or personal, asks this one condition."""
    return f"{window_open_sql(pool)} AND {_not_stopped(pool)}"


def _barred_slot_by_slot(pool: SlotPool[Any], task: str) -> str:
    """_barred, asked of one slot at a time. Postgres turns a bare EXISTS into an anti-join, and where it expects many
    claimable slots (a large campaign) it joins them against all of the user's ratings in the dataset, read in full
    on every claim, so the claim slowed down with each task they rated. The subquery's OFFSET keeps it a subplan run
    for the few slots at the front of the queue that pass the cheaper conditions, through the task's answers."""
    if not pool.barred:
        return _barred(pool, task)
    return f"EXISTS (SELECT 1 FROM (SELECT 1) one WHERE {_barred(pool, task)} LIMIT 1 OFFSET 0)"  # nosec B608 - model-metadata names, bound values


def _claimable(pool: SlotPool[Any], alias: str = "slot", *, counting: bool = False) -> str:
    """The claim rule for a slot. Claims and "is any slot left" probes stop at the first slot that passes; `counting`
    is for reads that pass over every slot of the campaign, which the planner may join in one go."""
    barred = _barred(pool, f"{alias}.task_id") if counting else _barred_slot_by_slot(pool, f"{alias}.task_id")
    rule = f"{_fragment(pool, _CLAIMABLE, alias)} AND NOT {barred} AND {handing_out_sql(pool)}"
    return f"{rule} AND NOT {alias}.{pool.personal}" if pool.personal else rule


def _no_open_lease(pool: SlotPool[Any]) -> str:
    """None of the user's leases in the campaign is open: the claim takes a new slot only then (a lease that became
    barred is given back first, see slot_claim)."""
    return (
        f"NOT EXISTS (SELECT 1 FROM {_names(pool)['slots']} open_lease WHERE open_lease.campaign_id = %(campaign)s"
        " AND open_lease.annotator_id = %(user)s AND open_lease.status = 'leased')"  # nosec B608 - model-metadata names, bound values
    )


def slot_pool_sql(pool: SlotPool[Any]) -> str:
    """The pool rule as a boolean SQL expression (params: campaign, user), for statements that build on it."""
    return _fragment(pool, _IN_POOL)


@functools.cache
def slot_complete_sql(pool: SlotPool[Any]) -> str:
    """The completing UPDATE (params: slot, user, campaign, now, spent), for statements that build on it."""
    slots = _names(pool)["slots"]
    return f"{_fragment(pool, _COMPLETE)} AND {_lease_still_runs(pool, slots)}"


def resume_sql(pool: SlotPool[Any]) -> str:
    """The UPDATE that resumes the user's open lease (params: campaign, user, now, expires), for the one-statement
    claims, whose CTE `pool` holds a row when the user is in the pool. Outside the hand-out window the lease keeps its
    end, so work leased before the close can be finished but not held on to."""
    slots = _names(pool)["slots"]
    return f"""UPDATE {slots}
    SET lease_expires_at = CASE WHEN {window_open_sql(pool)} THEN %(expires)s ELSE {slots}.lease_expires_at END
    WHERE campaign_id = %(campaign)s AND annotator_id = %(user)s AND status = 'leased' AND EXISTS (SELECT 1 FROM pool)
      AND NOT {_barred(pool, f"{slots}.task_id")} AND {_lease_still_runs(pool, slots)}"""  # nosec B608 - model-metadata names, bound values


def claim_statement(pool: SlotPool[Any], details: ClaimDetails, *, picked: str, claimed: str) -> str:
    """The shape of every claim statement: the pool check and the resume of the user's open lease, then `picked` and
    `claimed`, the caller's own choice and taking of a slot (`claimed` returns SLOT_COLUMNS), and the slot held with
    its details; one Postgres round trip, whichever slot it hands out."""
    return f"""
WITH pool AS (SELECT 1 WHERE {slot_pool_sql(pool)}),
resumed AS (
    {resume_sql(pool)}
    RETURNING {", ".join(SLOT_COLUMNS)}
),
picked AS ({picked}),
claimed AS ({claimed}),
held AS (SELECT *, FALSE AS taken FROM resumed UNION ALL SELECT *, TRUE AS taken FROM claimed)
SELECT {", ".join(f"held.{c}" for c in SLOT_COLUMNS)}, held.taken{details.columns}
FROM held{details.joins}
"""  # nosec B608 - model-metadata names, bound values


@functools.cache
def _claim_sql(pool: SlotPool[Any], details: ClaimDetails) -> str:
    """The pool check, the resume and the claim as one Postgres statement. `picked` is the lowest claimable slot,
    locked with SKIP LOCKED; `claimed` re-checks its lease while taking it; the unique indexes raise IntegrityError
    when a concurrent request of the same user won."""
    slots = _names(pool)["slots"]
    picked = f"""
    SELECT slot.id FROM {slots} slot
    WHERE {_claimable(pool)}
      AND EXISTS (SELECT 1 FROM pool) AND {_no_open_lease(pool)}
    ORDER BY slot.task_position, slot.slot
    LIMIT 1
    FOR UPDATE SKIP LOCKED
"""  # nosec B608 - model-metadata names, bound values
    claimed = f"""
    UPDATE {slots} target
    SET annotator_id = %(user)s, status = 'leased', leased_at = %(now)s, lease_expires_at = %(expires)s,
        submitted_at = NULL, seconds_spent = NULL
    FROM picked
    WHERE target.id = picked.id AND {_fragment(pool, _LEASE_OPEN, "target")}
    RETURNING {", ".join(f"target.{c}" for c in SLOT_COLUMNS)}
"""  # nosec B608 - model-metadata names, bound values
    return claim_statement(pool, details, picked=picked, claimed=claimed)


@functools.cache
def _pick_sql(pool: SlotPool[Any], skip_locked: bool, *, in_task: bool = False) -> str:
    """The lowest claimable slot in hand-out order; `in_task`, the lowest of one task (%(task)s)."""
    where, order = (" AND slot.task_id = %(task)s", "slot.slot") if in_task else ("", "slot.task_position, slot.slot")
    return (
        f"SELECT slot.id FROM {_names(pool)['slots']} slot"
        f" WHERE {_claimable(pool)}{where}"  # nosec B608 - model-metadata names, bound values
        f" ORDER BY {order} LIMIT 1" + (" FOR UPDATE SKIP LOCKED" if skip_locked else "")
    )


@functools.cache
def _take_sql(pool: SlotPool[Any]) -> str:
    slots = _names(pool)["slots"]
    return (
        f"UPDATE {slots} SET annotator_id = %(user)s, status = 'leased', leased_at = %(now)s,"
        " lease_expires_at = %(expires)s, submitted_at = NULL, seconds_spent = NULL"  # nosec B608 - model-metadata names, bound values
        f" WHERE id = %(slot)s AND {_fragment(pool, _LEASE_OPEN, slots)}"
    )


@functools.cache
def _in_pool_sql(pool: SlotPool[Any]) -> str:
    return f"SELECT {slot_pool_sql(pool)}"


@functools.cache
def _counts_sql(pool: SlotPool[Any]) -> str:
    slots = _names(pool)["slots"]
    return f"""
SELECT
    (SELECT COUNT(*) FROM {slots}
     WHERE campaign_id = %(campaign)s AND annotator_id = %(user)s AND status = 'submitted'),
    (SELECT COUNT(*) FROM {slots}
     WHERE campaign_id = %(campaign)s AND annotator_id = %(user)s AND status = 'leased'),
    (SELECT COUNT(DISTINCT slot.task_id) FROM {slots} slot WHERE {_claimable(pool, counting=True)})
"""  # nosec B608 - model-metadata names, bound values


def _moment(value: datetime) -> Any:
    """A datetime as a parameter of hand-written SQL, stored the way the ORM stores it (naive UTC text on SQLite)."""
    return connection.ops.adapt_datetimefield_value(value)


def _execute(sql: str, params: dict[str, Any]) -> int:
    with statement_cursor() as cursor:
        cursor.execute(sql, params)
        return int(cursor.rowcount)


def seeded_random(seed: str, *parts: object) -> random.Random:
    """A generator fixed by a campaign's secret seed and the parts named, the same on every machine."""
    digest = hashlib.sha256(":".join([seed, *map(str, parts)]).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def hand_out_order(seed: str, n: int) -> list[int]:
    """Positions for n tasks in one seeded random order shared by every annotator: random, so a campaign stopped
    early is still a random sample; shared, so annotators converge on the same tasks."""
    order = list(range(n))
    seeded_random(seed, "order").shuffle(order)
    return order


def slots_build(*, pool: SlotPool[Any], campaign: LeasingCampaign, tasks: Iterable[Any], per_task: int) -> None:
    """The N slots of each new task; the only place slot rows are inserted."""
    pool.slot.objects.bulk_create(  # type: ignore[attr-defined]
        [
            pool.slot(campaign=campaign, task=task, task_position=task.position, slot=slot, slot_limit=per_task)
            for task in tasks
            for slot in range(1, per_task + 1)
        ],
        batch_size=5000,
    )


def slot_pool_has(*, pool: SlotPool[Any], campaign: LeasingCampaign, user: AnyUser) -> bool:
    """Whether the user may take slots of the campaign: in its pool, and the campaign is active."""
    with statement_cursor() as cursor:
        cursor.execute(_in_pool_sql(pool), {"campaign": campaign.pk, "user": user.pk or 0})
        return bool(cursor.fetchone()[0])


def slots_release_outside_pool(*, pool: SlotPool[Any], campaign: Any) -> int:
    """Frees the open leases of people who left the pool, so their slots go to someone who may still take them."""
    return (
        pool.slot.objects.filter(campaign=campaign, status=SlotStatus.LEASED)  # type: ignore[attr-defined]
        .exclude(annotator__in=campaign.annotators.all())
        .update(status=SlotStatus.FREE, annotator=None, leased_at=None, lease_expires_at=None)
    )

"""The slot-and-lease engine: N distinct people each take a task once, handed out in one shared order.

Annotation campaigns (annotations.campaigns) and FActScore's fact review (judging.factscore.services) both
run on it; each names the four models that hold its campaigns, tasks, slots and skips in a `SlotPool`, and those
models share the column names used below (see the two `SlotPool` definitions).

The rules, each written once here
---------------------------------
* Building: a task gets exactly N slot rows (slot 1..N) when it is created; afterwards they are only updated,
  never inserted, so with `unique(task, slot)` and `check(1 <= slot <= slot_limit)` a task cannot collect more than
  N people, and `unique(task, annotator)` keeps them distinct. The one later insert is a replacement slot (see
  "replacement slots" at the end): one per slot whose rater no longer counts, at most one, so the task can still
  reach N people who count.
* The pool: only a member of an active campaign's pool takes, resumes or completes slots (`_IN_POOL`).
* The claim rule (`_CLAIMABLE`): a slot of the campaign whose lease is open (free, or leased and expired) on a task
  the user has never held and never skipped, not barred to them (`SlotPool.barred`, such as a task whose answer
  they already rated elsewhere), and not a personal slot (one appended for somebody else, such as a gold task
  handed to one annotator). "Next" first resumes the user's open lease (at most one per campaign, a unique
  constraint) unless its task became barred to them, which gives it back; otherwise it leases the claimable slot
  lowest in hand-out order. The same fragment is the Postgres one-statement claim, the portable claim and the
  "available" count of the progress query.
* A claim locks the picked row (`FOR UPDATE SKIP LOCKED` where supported) and re-checks the open lease in the
  conditional UPDATE that takes it (which is also what keeps SQLite correct), so two requests never take one slot.
* Releasing (skip, leaving the pool) and completing are conditional updates on the user's open lease.

On Postgres a claim runs as one statement (data-modifying CTEs) in autocommit: one round trip instead of a
transaction of five ORM queries, with the same locks, conditional updates and constraints; the portable path serves
the other databases (SQLite in development). Table names come from the models' metadata, never from input.

Why one module of this size: the claim rule's one-statement SQL form and its portable form, and the fragments the
submission statement reuses, must agree; they are written side by side here so that a change to one is made next to
the other.
"""

# The statements below are assembled from table and column names read from model metadata, never from input, and
# bind every value as a parameter.
# ruff: noqa: S608

import functools
import hashlib
import random
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import IntegrityError, connection, models, transaction
from django.db.models import Max, Model
from django.utils import timezone

from annotations.slot_rows import SlotRow, SlotStatus
from annotations.statements import instance_from_row, statement_cursor, statement_rows

AnyUser = AbstractBaseUser | AnonymousUser
SlotT = TypeVar("SlotT", bound=SlotRow)

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

# --- the rules, as SQL fragments ------------------------------------------------------------------------------

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


def _barred(pool: SlotPool[Any], task: str) -> str:
    """`SlotPool.barred` for the task id expression given, or a condition that is never true."""
    return f"({pool.barred.format(task=task)})" if pool.barred else "(1 = 0)"


def _claimable(pool: SlotPool[Any], alias: str = "slot") -> str:
    rule = f"{_fragment(pool, _CLAIMABLE, alias)} AND NOT {_barred(pool, f'{alias}.task_id')}"
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


def slot_complete_sql(pool: SlotPool[Any]) -> str:
    """The completing UPDATE (params: slot, user, campaign, now, spent), for statements that build on it."""
    return _fragment(pool, _COMPLETE)


@functools.cache
def _claim_sql(pool: SlotPool[Any], details: ClaimDetails) -> str:
    """The pool check, the resume and the claim as one Postgres statement. `picked` is the lowest claimable slot,
    locked with SKIP LOCKED; `claimed` re-checks its lease while taking it; the unique indexes raise IntegrityError
    when a concurrent request of the same user won."""
    names = _names(pool)
    columns = ", ".join(SLOT_COLUMNS)
    return f"""
WITH pool AS (SELECT 1 WHERE {slot_pool_sql(pool)}),
resumed AS (
    UPDATE {names["slots"]} SET lease_expires_at = %(expires)s
    WHERE campaign_id = %(campaign)s AND annotator_id = %(user)s AND status = 'leased' AND EXISTS (SELECT 1 FROM pool)
      AND NOT {_barred(pool, f"{names['slots']}.task_id")}
    RETURNING {columns}
),
picked AS (
    SELECT slot.id FROM {names["slots"]} slot
    WHERE {_claimable(pool)}
      AND EXISTS (SELECT 1 FROM pool) AND {_no_open_lease(pool)}
    ORDER BY slot.task_position, slot.slot
    LIMIT 1
    FOR UPDATE SKIP LOCKED
),
claimed AS (
    UPDATE {names["slots"]} target
    SET annotator_id = %(user)s, status = 'leased', leased_at = %(now)s, lease_expires_at = %(expires)s,
        submitted_at = NULL, seconds_spent = NULL
    FROM picked
    WHERE target.id = picked.id AND {_fragment(pool, _LEASE_OPEN, "target")}
    RETURNING {", ".join(f"target.{c}" for c in SLOT_COLUMNS)}
),
held AS (SELECT *, FALSE AS taken FROM resumed UNION ALL SELECT *, TRUE AS taken FROM claimed)
SELECT {", ".join(f"held.{c}" for c in SLOT_COLUMNS)}, held.taken{details.columns}
FROM held{details.joins}
"""  # nosec B608 - model-metadata names, bound values


@functools.cache
def _pick_sql(pool: SlotPool[Any], skip_locked: bool) -> str:
    return (
        f"SELECT slot.id FROM {_names(pool)['slots']} slot"
        f" WHERE {_claimable(pool)}"  # nosec B608 - model-metadata names, bound values
        " ORDER BY slot.task_position, slot.slot LIMIT 1" + (" FOR UPDATE SKIP LOCKED" if skip_locked else "")
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
    (SELECT COUNT(DISTINCT slot.task_id) FROM {slots} slot WHERE {_claimable(pool)})
"""  # nosec B608 - model-metadata names, bound values


def _moment(value: datetime) -> Any:
    """A datetime as a parameter of hand-written SQL, stored the way the ORM stores it (naive UTC text on SQLite)."""
    return connection.ops.adapt_datetimefield_value(value)


def _execute(sql: str, params: dict[str, Any]) -> int:
    with statement_cursor() as cursor:
        cursor.execute(sql, params)
        return int(cursor.rowcount)


# --- building ---------------------------------------------------------------------------------------------------


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


def slots_build(*, pool: SlotPool[Any], campaign: Model, tasks: Iterable[Any], per_task: int) -> None:
    """The N slots of each new task; the only place slot rows are inserted."""
    pool.slot.objects.bulk_create(  # type: ignore[attr-defined]
        [
            pool.slot(campaign=campaign, task=task, task_position=task.position, slot=slot, slot_limit=per_task)
            for task in tasks
            for slot in range(1, per_task + 1)
        ],
        batch_size=5000,
    )


# --- the pool ---------------------------------------------------------------------------------------------------


def slot_pool_has(*, pool: SlotPool[Any], campaign: Model, user: AnyUser) -> bool:
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


# --- claiming ---------------------------------------------------------------------------------------------------


def slot_claim(
    *, pool: SlotPool[SlotT], campaign: Any, user: Any, now: datetime | None = None, details: ClaimDetails = NO_DETAILS
) -> Claim[SlotT] | None:
    """The user's open lease (extended), else the claimable slot lowest in hand-out order, leased to them; None when
    nothing is left for them. NotInPool outside the pool. Safe under concurrency."""
    if connection.vendor == "postgresql":
        return _claim_in_one_statement(pool=pool, campaign=campaign, user=user, now=now, details=details)
    return _claim_portable(pool=pool, campaign=campaign, user=user, now=now, details=details)


def _claim_in_one_statement(
    *, pool: SlotPool[SlotT], campaign: Any, user: Any, now: datetime | None, details: ClaimDetails
) -> Claim[SlotT] | None:
    lease = timedelta(minutes=campaign.lease_minutes)
    for _attempt in range(CLAIM_ATTEMPTS):
        moment = now or timezone.now()
        params = {"campaign": campaign.pk, "user": user.pk, "now": moment, "expires": moment + lease}
        try:
            rows = statement_rows(_claim_sql(pool, details), params)
        except IntegrityError:
            continue  # a concurrent request of the same user won the race; retrying resumes its lease
        if not rows:
            if not slot_pool_has(pool=pool, campaign=campaign, user=user):
                raise NotInPool()
            if slot_release_barred(pool=pool, campaign=campaign, user=user):
                continue  # their open lease could not be submitted any more: given back, now the next task
            return None
        row, width = rows[0], len(SLOT_COLUMNS)
        slot = instance_from_row(pool.slot, SLOT_COLUMNS, row[:width])
        return Claim(slot=slot, resumed=not row[width], details=tuple(row[width + 1 :]))
    return None


def _claim_portable(
    *, pool: SlotPool[SlotT], campaign: Any, user: Any, now: datetime | None, details: ClaimDetails
) -> Claim[SlotT] | None:
    if not slot_pool_has(pool=pool, campaign=campaign, user=user):
        raise NotInPool()
    lease = timedelta(minutes=campaign.lease_minutes)
    pick = _pick_sql(pool, connection.features.has_select_for_update_skip_locked)
    for _attempt in range(CLAIM_ATTEMPTS):
        moment = now or timezone.now()
        try:
            with transaction.atomic():
                current = (
                    pool.slot.objects.select_for_update(of=("self",))  # type: ignore[attr-defined]
                    .select_related(*details.related)
                    .filter(campaign=campaign, annotator=user, status=SlotStatus.LEASED)
                    .first()
                )
                if current is not None and not _is_barred(pool=pool, slot=current, user=user):
                    current.lease_expires_at = moment + lease
                    current.save(update_fields=["lease_expires_at"])
                    return Claim(slot=current, resumed=True, details=())
                if current is not None:
                    slot_release(pool=pool, slot_id=current.pk, user=user)
                params = {
                    "campaign": campaign.pk,
                    "user": user.pk,
                    "now": _moment(moment),
                    "expires": _moment(moment + lease),
                }
                with statement_cursor() as cursor:
                    cursor.execute(pick, params)
                    picked = cursor.fetchone()
                if picked is None:
                    return None
                if _execute(_take_sql(pool), params | {"slot": picked[0]}) == 1:
                    slot = pool.slot.objects.select_related(*details.related).get(pk=picked[0])  # type: ignore[attr-defined]
                    return Claim(slot=slot, resumed=False, details=())
        except IntegrityError:
            # A concurrent request of the same user won the race (one open lease, one slot per task): retry, which
            # resumes what that request leased.
            continue
    return None


@functools.cache
def _barred_sql(pool: SlotPool[Any]) -> str:
    return f"SELECT {_barred(pool, '%(task)s')}"


def _is_barred(*, pool: SlotPool[Any], slot: SlotRow, user: Any) -> bool:
    if not pool.barred:
        return False
    with statement_cursor() as cursor:
        cursor.execute(_barred_sql(pool), {"task": slot.task_id, "campaign": slot.campaign_id, "user": user.pk})
        return bool(cursor.fetchone()[0])


@functools.cache
def _release_barred_sql(pool: SlotPool[Any]) -> str:
    slots = _names(pool)["slots"]
    return (
        f"UPDATE {slots} SET status = 'free', annotator_id = NULL, leased_at = NULL, lease_expires_at = NULL"
        " WHERE campaign_id = %(campaign)s AND annotator_id = %(user)s AND status = 'leased'"  # nosec B608 - model-metadata names, bound values
        f" AND {_barred(pool, f'{slots}.task_id')}"
    )


def slot_release_barred(*, pool: SlotPool[Any], campaign: Model, user: Any) -> int:
    """Gives back the user's open lease in the campaign if its task became barred to them meanwhile (for instance
    they rated its answer in another campaign while holding it), so "next" moves on instead of resuming a task they
    cannot submit. Returns how many leases were given back (0 or 1)."""
    if not pool.barred:
        return 0
    return _execute(_release_barred_sql(pool), {"campaign": campaign.pk, "user": user.pk})


@functools.cache
def _reclaim_pick_sql(pool: SlotPool[Any], skip_locked: bool) -> str:
    return (
        f"SELECT slot.id FROM {_names(pool)['slots']} slot"
        f" WHERE {_claimable(pool)} AND slot.task_id = %(task)s"  # nosec B608 - model-metadata names, bound values
        " ORDER BY slot.slot LIMIT 1" + (" FOR UPDATE SKIP LOCKED" if skip_locked else "")
    )


def slot_reclaim(
    *, pool: SlotPool[SlotT], campaign: Any, task_id: int, user: Any, now: datetime | None = None
) -> SlotT | None:
    """For a late answer whose lease expired and went to someone else: leases the user a slot of the same task if one
    is still open to them under the claim rule, taken with the same conditional update as a claim; None when the
    task is full or the user already holds another open lease (one per campaign). Must run inside the transaction
    that completes the slot, so the slot is never left leased without the answer."""
    if not connection.in_atomic_block:
        raise RuntimeError("slot_reclaim must run inside the transaction that completes the slot")
    if not slot_pool_has(pool=pool, campaign=campaign, user=user):
        raise NotInPool()
    moment = now or timezone.now()
    params = {
        "campaign": campaign.pk,
        "user": user.pk,
        "task": task_id,
        "now": _moment(moment),
        "expires": _moment(moment + timedelta(minutes=campaign.lease_minutes)),
    }
    with statement_cursor() as cursor:
        cursor.execute(_reclaim_pick_sql(pool, connection.features.has_select_for_update_skip_locked), params)
        picked = cursor.fetchone()
    if picked is None:
        return None
    try:
        with transaction.atomic():
            taken = _execute(_take_sql(pool), params | {"slot": picked[0]})
    except IntegrityError:
        return None  # the user holds another open lease in this campaign
    if taken != 1:
        return None
    return pool.slot.objects.select_for_update().get(pk=picked[0])  # type: ignore[attr-defined]


# --- releasing, skipping, completing ----------------------------------------------------------------------------


def slot_release(*, pool: SlotPool[Any], slot_id: int, user: Any) -> bool:
    """Returns the user's open lease to the pool; False when it is not (or no longer) theirs."""
    released: int = pool.slot.objects.filter(  # type: ignore[attr-defined]
        pk=slot_id, annotator=user, status=SlotStatus.LEASED
    ).update(status=SlotStatus.FREE, annotator=None, leased_at=None, lease_expires_at=None)
    return released == 1


def slot_skip(*, pool: SlotPool[SlotT], slot: SlotT, user: Any, **skip_fields: Any) -> Any:
    """Releases the user's lease and records the skip, so the task is never offered to them again. NotLeased when
    the slot is not (or no longer) leased to them."""
    with transaction.atomic():
        if not slot_release(pool=pool, slot_id=slot.pk, user=user):
            raise NotLeased()
        skip, _created = pool.skip.objects.get_or_create(  # type: ignore[attr-defined]
            task_id=slot.task_id, annotator=user, defaults=skip_fields
        )
    return skip


def slot_complete(*, pool: SlotPool[SlotT], slot: SlotT, user: Any, now: datetime, seconds_spent: float | None) -> bool:
    """Marks the user's open lease done, if it still is theirs and they are still in the pool; False otherwise."""
    params = {
        "slot": slot.pk,
        "user": user.pk,
        "campaign": slot.campaign_id,
        "now": _moment(now),
        "spent": seconds_spent,
    }
    return _execute(slot_complete_sql(pool), params) == 1


# --- personal slots (gold) ---------------------------------------------------------------------------------------
# A gold task measures each annotator, so it has no fixed N: it gets one slot per person it is handed to, appended
# and leased to them at once. The slot is personal (`SlotPool.personal`): the claim rule never gives it to anybody
# else, and its owner resumes it like any other open lease.

# The largest smallint, so appended slot numbers always fit `check(slot <= slot_limit)`.
PERSONAL_SLOT_LIMIT = 32767


@dataclass(frozen=True)
class PersonalState:
    # The tasks handed to the user so far: the slots they hold in the campaign, in any state, and the tasks they
    # skipped (whose slots went back to the pool). Counting skips keeps a skip from moving the gold positions, which
    # would tell a skipped gold task from a skipped regular one in the progress count.
    held: int
    leased: bool  # they hold an open lease, which "next" resumes
    regular_available: bool  # a slot the claim rule would hand them exists


@functools.cache
def _personal_state_sql(pool: SlotPool[Any]) -> str:
    names = _names(pool)
    slots = names["slots"]
    return f"""
SELECT
    (SELECT COUNT(*) FROM {slots} WHERE campaign_id = %(campaign)s AND annotator_id = %(user)s)
    + (SELECT COUNT(*) FROM {names["skips"]} skip JOIN {names["tasks"]} task ON task.id = skip.task_id
       WHERE skip.annotator_id = %(user)s AND task.campaign_id = %(campaign)s),
    EXISTS (SELECT 1 FROM {slots} WHERE campaign_id = %(campaign)s AND annotator_id = %(user)s AND status = 'leased'),
    EXISTS (SELECT 1 FROM {slots} slot WHERE {_claimable(pool)})
"""  # nosec B608 - model-metadata names, bound values


def slot_personal_state(
    *, pool: SlotPool[Any], campaign: Model, user: Any, now: datetime | None = None
) -> PersonalState:
    """What deciding whether to append a personal slot needs, in one read."""
    params = {"campaign": campaign.pk, "user": user.pk, "now": _moment(now or timezone.now())}
    with statement_cursor() as cursor:
        cursor.execute(_personal_state_sql(pool), params)
        held, leased, available = cursor.fetchone()
    return PersonalState(held=int(held), leased=bool(leased), regular_available=bool(available))


@functools.cache
def _personal_claim_sql(pool: SlotPool[Any], details: ClaimDetails) -> str:
    """The pool check, the resume and a personal slot appended on the first task of the pool's personal kind (the
    task column named like `SlotPool.personal`) in hand-out order that the user never held or skipped, as one
    Postgres statement shaped like the claim: the same round trip, the same locks, the same columns back. A slot
    number taken concurrently, or a second open lease of the user, raises IntegrityError and the caller retries."""
    names = _names(pool)
    columns = ", ".join(SLOT_COLUMNS)
    personal = pool.personal
    return f"""
WITH pool AS (SELECT 1 WHERE {slot_pool_sql(pool)}),
resumed AS (
    UPDATE {names["slots"]} SET lease_expires_at = %(expires)s
    WHERE campaign_id = %(campaign)s AND annotator_id = %(user)s AND status = 'leased' AND EXISTS (SELECT 1 FROM pool)
      AND NOT {_barred(pool, f"{names['slots']}.task_id")}
    RETURNING {columns}
),
picked AS (
    SELECT task.id, task.position FROM {names["tasks"]} task
    WHERE task.campaign_id = %(campaign)s AND task.{personal}
      AND NOT EXISTS (SELECT 1 FROM {names["slots"]} mine WHERE mine.task_id = task.id AND mine.annotator_id = %(user)s)
      AND NOT EXISTS (SELECT 1 FROM {names["skips"]} skip WHERE skip.task_id = task.id AND skip.annotator_id = %(user)s)
      AND NOT {_barred(pool, "task.id")}
      AND EXISTS (SELECT 1 FROM pool) AND {_no_open_lease(pool)}
    ORDER BY task.position
    LIMIT 1
),
claimed AS (
    INSERT INTO {names["slots"]}
        (campaign_id, task_id, task_position, slot, slot_limit, annotator_id, status, leased_at, lease_expires_at,
         {personal})
    SELECT %(campaign)s, picked.id, picked.position,
           COALESCE((SELECT MAX(other.slot) FROM {names["slots"]} other WHERE other.task_id = picked.id), 0) + 1,
           {PERSONAL_SLOT_LIMIT}, %(user)s, 'leased', %(now)s, %(expires)s, TRUE
    FROM picked
    RETURNING {columns}
),
held AS (SELECT *, FALSE AS taken FROM resumed UNION ALL SELECT *, TRUE AS taken FROM claimed)
SELECT {", ".join(f"held.{c}" for c in SLOT_COLUMNS)}, held.taken{details.columns}
FROM held{details.joins}
"""  # nosec B608 - model-metadata names, bound values


def slot_personal_claim(
    *, pool: SlotPool[SlotT], campaign: Any, user: Any, now: datetime | None = None, details: ClaimDetails = NO_DETAILS
) -> Claim[SlotT] | None:
    """The user's open lease (extended), else a personal slot appended on the next personal task they never had,
    leased to them; None when there is no such task. NotInPool outside the pool. On Postgres one statement, so a
    personal hand-out costs what a claim costs; elsewhere slot_personal_lease."""
    if not pool.personal:
        raise ValueError("this pool has no personal slots")
    if connection.vendor != "postgresql":
        return None
    lease = timedelta(minutes=campaign.lease_minutes)
    for _attempt in range(CLAIM_ATTEMPTS):
        moment = now or timezone.now()
        params = {"campaign": campaign.pk, "user": user.pk, "now": moment, "expires": moment + lease}
        try:
            rows = statement_rows(_personal_claim_sql(pool, details), params)
        except IntegrityError:
            continue  # a concurrent request took the slot number or leased the user another slot: decide again
        if not rows:
            if not slot_pool_has(pool=pool, campaign=campaign, user=user):
                raise NotInPool()
            if slot_release_barred(pool=pool, campaign=campaign, user=user):
                continue  # their open lease could not be submitted any more: given back, now the next task
            return None
        row, width = rows[0], len(SLOT_COLUMNS)
        slot = instance_from_row(pool.slot, SLOT_COLUMNS, row[:width])
        return Claim(slot=slot, resumed=not row[width], details=tuple(row[width + 1 :]))
    return None


def slot_personal_lease(
    *,
    pool: SlotPool[SlotT],
    campaign: Any,
    task: Any,
    user: Any,
    now: datetime | None = None,
    related: Iterable[str] = (),
) -> SlotT | None:
    """Appends a personal slot on the task, leased to the user. None when the user already holds an open lease or
    already had the task (a concurrent request of theirs won: its lease is what "next" resumes). NotInPool outside
    the pool."""
    if not pool.personal:
        raise ValueError("this pool has no personal slots")
    if not slot_pool_has(pool=pool, campaign=campaign, user=user):
        raise NotInPool()
    lease = timedelta(minutes=campaign.lease_minutes)
    for _attempt in range(CLAIM_ATTEMPTS):
        moment = now or timezone.now()
        try:
            with transaction.atomic():
                last = pool.slot.objects.filter(task=task).aggregate(last=Max("slot"))["last"]  # type: ignore[attr-defined]
                slot = pool.slot.objects.create(  # type: ignore[attr-defined]
                    campaign=campaign,
                    task=task,
                    task_position=task.position,
                    slot=(last or 0) + 1,
                    slot_limit=PERSONAL_SLOT_LIMIT,
                    annotator=user,
                    status=SlotStatus.LEASED,
                    leased_at=moment,
                    lease_expires_at=moment + lease,
                    **{pool.personal: True},
                )
        except IntegrityError:
            mine = pool.slot.objects.filter(campaign=campaign, annotator=user)  # type: ignore[attr-defined]
            if mine.filter(status=SlotStatus.LEASED).exists() or mine.filter(task=task).exists():
                return None
            continue  # someone else appended the same slot number at the same moment: number the next one
        return pool.slot.objects.select_related(*related).get(pk=slot.pk)  # type: ignore[attr-defined]
    return None


# --- progress ---------------------------------------------------------------------------------------------------


def slot_counts(*, pool: SlotPool[Any], campaign: Model, user: AnyUser, now: datetime | None = None) -> SlotCounts:
    """Done, open and available for one user in one read; available uses the claim rule itself."""
    params = {"campaign": campaign.pk, "user": user.pk or 0, "now": _moment(now or timezone.now())}
    with statement_cursor() as cursor:
        cursor.execute(_counts_sql(pool), params)
        done, leased, available = cursor.fetchone()
    return SlotCounts(done=done, leased=leased, available=available)


# --- replacement slots ------------------------------------------------------------------------------------------


def slots_replace(*, pool: SlotPool[Any], slot_ids: Iterable[int]) -> int:
    """Appends one free slot to the task of each given submitted slot that has none yet (`replaces` = that slot),
    so a task whose rater no longer counts can still collect N ratings that do. The new slot is numbered after the
    task's last one with `slot_limit` equal to that number, which is the one exception to "slots are only built
    with the task": `replaces` is one-to-one, so a slot is replaced at most once however often or concurrently
    this runs. The claim rule hands the new slots out like any other. Returns how many were added.

    Locks the tasks (in id order, so concurrent callers do not deadlock) to number the new slots one at a time."""
    Slot: Any = pool.slot
    wanted = sorted(set(slot_ids))
    if not wanted:
        return 0
    added = 0
    with transaction.atomic():
        task_ids = sorted(set(Slot.objects.filter(pk__in=wanted).values_list("task_id", flat=True)))
        list(pool.task.objects.select_for_update().filter(pk__in=task_ids).order_by("pk").values_list("pk"))  # type: ignore[attr-defined]
        open_ones = list(
            Slot.objects.filter(pk__in=wanted, status=SlotStatus.SUBMITTED, replacement__isnull=True).order_by("pk")
        )
        for replaced in open_ones:
            last = Slot.objects.filter(task_id=replaced.task_id).order_by("-slot").values_list("slot", flat=True)[0]
            try:
                with transaction.atomic():
                    Slot.objects.create(
                        campaign_id=replaced.campaign_id,
                        task_id=replaced.task_id,
                        task_position=replaced.task_position,
                        slot=last + 1,
                        slot_limit=last + 1,
                        is_gold=False,
                        replaces=replaced,
                    )
            except IntegrityError:
                continue  # a concurrent caller replaced this slot first
            added += 1
    return added


def slots_unreplace(*, pool: SlotPool[Any], slot_ids: Iterable[int]) -> int:
    """Removes the replacements of the given slots that nobody has taken yet; a replacement someone leased or
    submitted stays. Returns how many were removed.

    The DELETE re-checks "free" itself: the ORM's delete would first read the rows and then delete them by id,
    and a claim in between would lose its slot."""
    Slot: Any = pool.slot
    with transaction.atomic():
        free = list(
            Slot.objects.filter(replaces_id__in=list(slot_ids), status=SlotStatus.FREE).values_list("pk", flat=True)
        )
        if not free:
            return 0
        # Rows that hang off a free slot (a draft kept from a lease that expired) go first, as a cascade would.
        for relation in Slot._meta.related_objects:
            if relation.related_model is not Slot and relation.on_delete is models.CASCADE:
                relation.related_model.objects.filter(**{f"{relation.field.name}_id__in": free}).delete()
        table = Slot._meta.db_table
        marks = ", ".join(["%s"] * len(free))
        with connection.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {table} WHERE status = 'free' AND id IN ({marks})",  # nosec B608 - model-metadata name
                free,
            )
            return int(cursor.rowcount)

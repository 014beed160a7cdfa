"""Personal slots: a slot appended for one person (a gold task handed to one annotator), claimed and leased apart
from the shared hand-out order."""

# The statements below are assembled from table and column names read from model metadata, never from input, and
# bind every value as a parameter.
# ruff: noqa: S608

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Max
from django.utils import timezone

from annotations.models.slot_rows import SlotStatus
from annotations.slots.claiming import (
    claim_by_statement,
    slot_handing_out,
)
from annotations.slots.rules import (
    CLAIM_ATTEMPTS,
    NO_DETAILS,
    SLOT_COLUMNS,
    AnyUser,
    Claim,
    ClaimDetails,
    LeasingCampaign,
    NotInPool,
    SlotPool,
    SlotT,
    _barred,
    _claimable,
    _moment,
    _names,
    _no_open_lease,
    claim_statement,
    handing_out_sql,
    slot_pool_has,
)
from annotations.slots.statements import statement_cursor

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
    *, pool: SlotPool[Any], campaign: LeasingCampaign, user: AnyUser, now: datetime | None = None
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
    personal = pool.personal
    picked = f"""
    SELECT task.id, task.position FROM {names["tasks"]} task
    WHERE task.campaign_id = %(campaign)s AND task.{personal}
      AND NOT EXISTS (SELECT 1 FROM {names["slots"]} mine WHERE mine.task_id = task.id AND mine.annotator_id = %(user)s)
      AND NOT EXISTS (SELECT 1 FROM {names["skips"]} skip WHERE skip.task_id = task.id AND skip.annotator_id = %(user)s)
      AND NOT {_barred(pool, "task.id")} AND {handing_out_sql(pool)}
      AND EXISTS (SELECT 1 FROM pool) AND {_no_open_lease(pool)}
    ORDER BY task.position
    LIMIT 1
"""  # nosec B608 - model-metadata names, bound values
    claimed = f"""
    INSERT INTO {names["slots"]}
        (campaign_id, task_id, task_position, slot, slot_limit, annotator_id, status, leased_at, lease_expires_at,
         {personal})
    SELECT %(campaign)s, picked.id, picked.position,
           COALESCE((SELECT MAX(other.slot) FROM {names["slots"]} other WHERE other.task_id = picked.id), 0) + 1,
           {PERSONAL_SLOT_LIMIT}, %(user)s, 'leased', %(now)s, %(expires)s, TRUE
    FROM picked
    RETURNING {", ".join(SLOT_COLUMNS)}
"""  # nosec B608 - model-metadata names, bound values
    return claim_statement(pool, details, picked=picked, claimed=claimed)


def slot_personal_claim(
    *,
    pool: SlotPool[SlotT],
    campaign: LeasingCampaign,
    user: AnyUser,
    now: datetime | None = None,
    details: ClaimDetails = NO_DETAILS,
) -> Claim[SlotT] | None:
    """The user's open lease (extended), else a personal slot appended on the next personal task they never had,
    leased to them; None when there is no such task. NotInPool outside the pool. On Postgres one statement, so a
    personal hand-out costs what a claim costs; elsewhere slot_personal_lease."""
    if not pool.personal:
        raise ValueError("this pool has no personal slots")
    if connection.vendor != "postgresql":
        return None
    # A unique violation means a concurrent request took the slot number or leased the user another slot.
    return claim_by_statement(pool=pool, campaign=campaign, user=user, now=now, sql=_personal_claim_sql(pool, details))


def slot_personal_lease(
    *,
    pool: SlotPool[SlotT],
    campaign: LeasingCampaign,
    task: Any,
    user: AnyUser,
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
        if not slot_handing_out(pool=pool, campaign=campaign, now=moment):
            return None
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

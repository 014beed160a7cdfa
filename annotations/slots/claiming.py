"""Claiming a slot (the one-statement form on Postgres and the portable form, side by side so they agree), taking
back a slot whose lease went to someone else, giving back barred leases, releasing, skipping and completing, and
the counts of the progress query."""

# The statements below are assembled from table and column names read from model metadata, never from input, and
# bind every value as a parameter.
# ruff: noqa: S608

import functools
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from annotations.models.slot_rows import SlotRow, SlotStatus
from annotations.slots.rules import (
    CLAIM_ATTEMPTS,
    NO_DETAILS,
    SLOT_COLUMNS,
    AnyUser,
    Claim,
    ClaimDetails,
    LeasingCampaign,
    NotInPool,
    NotLeased,
    SlotCounts,
    SlotPool,
    SlotT,
    _barred,
    _claim_sql,
    _counts_sql,
    _execute,
    _moment,
    _names,
    _pick_sql,
    _take_sql,
    handing_out_sql,
    slot_complete_sql,
    slot_pool_has,
    window_open_sql,
)
from annotations.slots.statements import instance_from_row, statement_cursor, statement_rows


def slot_claim(
    *,
    pool: SlotPool[SlotT],
    campaign: LeasingCampaign,
    user: AnyUser,
    now: datetime | None = None,
    details: ClaimDetails = NO_DETAILS,
) -> Claim[SlotT] | None:
    """The user's open lease (extended), else the claimable slot lowest in hand-out order, leased to them; None when
    nothing is left for them. NotInPool outside the pool. Safe under concurrency."""
    if connection.vendor == "postgresql":
        return _claim_in_one_statement(pool=pool, campaign=campaign, user=user, now=now, details=details)
    return _claim_portable(pool=pool, campaign=campaign, user=user, now=now, details=details)


def _claim_in_one_statement(
    *, pool: SlotPool[SlotT], campaign: LeasingCampaign, user: AnyUser, now: datetime | None, details: ClaimDetails
) -> Claim[SlotT] | None:
    # A unique violation means a concurrent request of the same user won the race; retrying resumes its lease.
    return claim_by_statement(pool=pool, campaign=campaign, user=user, now=now, sql=_claim_sql(pool, details))


def claim_by_statement(
    *, pool: SlotPool[SlotT], campaign: LeasingCampaign, user: AnyUser, now: datetime | None, sql: str
) -> Claim[SlotT] | None:
    """Runs a one-statement claim (the shared hand-out, or a personal slot's) until it settles: a unique violation is
    a concurrent request of the same user, so the claim is decided again; no row means nothing is left, outside the
    pool NotInPool, and a lease that became barred is given back before the next try."""
    lease = timedelta(minutes=campaign.lease_minutes)
    for _attempt in range(CLAIM_ATTEMPTS):
        moment = now or timezone.now()
        params = {"campaign": campaign.pk, "user": user.pk, "now": moment, "expires": moment + lease}
        try:
            rows = statement_rows(sql, params)
        except IntegrityError:
            continue
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
    *, pool: SlotPool[SlotT], campaign: LeasingCampaign, user: AnyUser, now: datetime | None, details: ClaimDetails
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
                window_open = slot_window_open(pool=pool, campaign=campaign, now=moment)
                if current is not None and not _is_barred(pool=pool, slot=current, user=user):
                    if window_open:
                        current.lease_expires_at = moment + lease
                        current.save(update_fields=["lease_expires_at"])
                    elif current.lease_expires_at < moment:
                        return None  # outside the window a lease is only finished, never held on to
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
def _select_sql(condition: str) -> str:
    return f"SELECT {condition}"


def slot_window_open(*, pool: SlotPool[Any], campaign: LeasingCampaign, now: datetime | None = None) -> bool:
    """Whether `now` falls inside the campaign's hand-out window (the window alone: a stop is read elsewhere)."""
    return _campaign_condition(window_open_sql(pool), campaign=campaign, now=now)


def slot_handing_out(*, pool: SlotPool[Any], campaign: LeasingCampaign, now: datetime | None = None) -> bool:
    """Whether the campaign hands out new slots at `now`: the claim rule's own condition, window and stop."""
    return _campaign_condition(handing_out_sql(pool), campaign=campaign, now=now)


def _campaign_condition(condition: str, *, campaign: LeasingCampaign, now: datetime | None) -> bool:
    with statement_cursor() as cursor:
        cursor.execute(_select_sql(condition), {"campaign": campaign.pk, "now": _moment(now or timezone.now())})
        return bool(cursor.fetchone()[0])


@functools.cache
def _barred_sql(pool: SlotPool[Any]) -> str:
    return f"SELECT {_barred(pool, '%(task)s')}"


def _is_barred(*, pool: SlotPool[Any], slot: SlotRow, user: AnyUser) -> bool:
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


def slot_release_barred(*, pool: SlotPool[Any], campaign: LeasingCampaign, user: AnyUser) -> int:
    """Gives back the user's open lease in the campaign if its task became barred to them meanwhile (for instance
    they rated its answer in another campaign while holding it), so "next" moves on instead of resuming a task they
    cannot submit. Returns how many leases were given back (0 or 1)."""
    if not pool.barred:
        return 0
    return _execute(_release_barred_sql(pool), {"campaign": campaign.pk, "user": user.pk})


def slot_reclaim(
    *, pool: SlotPool[SlotT], campaign: LeasingCampaign, task_id: int, user: AnyUser, now: datetime | None = None
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
        cursor.execute(_pick_sql(pool, connection.features.has_select_for_update_skip_locked, in_task=True), params)
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


def slot_release(*, pool: SlotPool[Any], slot_id: int, user: AnyUser) -> bool:
    """Returns the user's open lease to the pool; False when it is not (or no longer) theirs."""
    released: int = pool.slot.objects.filter(  # type: ignore[attr-defined]
        pk=slot_id, annotator=user, status=SlotStatus.LEASED
    ).update(status=SlotStatus.FREE, annotator=None, leased_at=None, lease_expires_at=None)
    return released == 1


def slot_skip(*, pool: SlotPool[SlotT], slot: SlotT, user: AnyUser, **skip_fields: Any) -> Any:
    """Releases the user's lease and records the skip, so the task is never offered to them again. NotLeased when
    the slot is not (or no longer) leased to them."""
    with transaction.atomic():
        if not slot_release(pool=pool, slot_id=slot.pk, user=user):
            raise NotLeased()
        skip, _created = pool.skip.objects.get_or_create(  # type: ignore[attr-defined]
            task_id=slot.task_id, annotator=user, defaults=skip_fields
        )
    return skip


def slot_complete(
    *, pool: SlotPool[SlotT], slot: SlotT, user: AnyUser, now: datetime, seconds_spent: float | None
) -> bool:
    """Marks the user's open lease done, if it still is theirs and they are still in the pool; False otherwise."""
    params = {
        "slot": slot.pk,
        "user": user.pk,
        "campaign": slot.campaign_id,
        "now": _moment(now),
        "spent": seconds_spent,
    }
    return _execute(slot_complete_sql(pool), params) == 1


def slot_counts(
    *, pool: SlotPool[Any], campaign: LeasingCampaign, user: AnyUser, now: datetime | None = None
) -> SlotCounts:
    """Done, open and available for one user in one read; available uses the claim rule itself."""
    params = {"campaign": campaign.pk, "user": user.pk or 0, "now": _moment(now or timezone.now())}
    with statement_cursor() as cursor:
        cursor.execute(_counts_sql(pool), params)
        done, leased, available = cursor.fetchone()
    return SlotCounts(done=done, leased=leased, available=available)

"""Replacement slots: one appended per slot whose rater no longer counts (an excluded rater), so the task can still
reach N people who count, and taken away again when the exclusion is revoked."""

# The statements below are assembled from table and column names read from model metadata, never from input, and
# bind every value as a parameter.
# ruff: noqa: S608

from collections.abc import Iterable
from typing import Any

from django.db import IntegrityError, connection, models, transaction

from annotations.models.slot_rows import SlotStatus
from annotations.slots.rules import (
    SlotPool,
)


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

"""The columns every slot row shares, whichever campaign kind it serves: annotation campaigns' assignments and fact
review's. The slot engine (annotations.slots) reads and writes these by name; each concrete model adds its own
foreign keys (campaign, task, annotator) and declares the slot constraints under the names its migrations already
carry."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from annotations.models.parts import within


class SlotStatus(models.TextChoices):
    FREE = "free"
    LEASED = "leased"
    SUBMITTED = "submitted"
    # Closed because a certified judge rated the task in a hybrid campaign: never handed to a person.
    JUDGED = "judged"


class SlotRow(models.Model):
    """A rater slot: exactly N rows per task, created with the task and only updated afterwards."""

    # Copied from the task so the claim query can walk one partial index in hand-out order.
    task_position = models.PositiveIntegerField()
    slot = models.PositiveSmallIntegerField()
    slot_limit = models.PositiveSmallIntegerField()
    status = models.CharField(max_length=10, choices=SlotStatus.choices, default=SlotStatus.FREE)
    leased_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    seconds_spent = models.FloatField(null=True, blank=True)

    # Declared by each concrete slot model, with its own targets.
    campaign_id: int
    task_id: int
    annotator_id: int | None

    class Meta:
        abstract = True
        # Hand-out order, which the claim query's partial index follows.
        ordering = ["task_position", "slot"]


def slot_row_constraints(
    prefix: str, *, one_open_lease: str, judged_slots: bool = False
) -> list[models.BaseConstraint]:
    """The slot engine's invariants, each under the name the slot model's migrations gave it (`prefix` and what the
    invariant is, but for the open lease, named each its own way): N numbered slots and distinct raters per task, one
    open task per annotator and campaign (resuming is unambiguous and racing requests cannot hoard), and a status that
    agrees with the columns it needs. With `judged_slots` a slot may also be closed for a certified judge's rating,
    with no annotator and never leased or submitted."""
    consistent = (
        (Q(status="free") & Q(annotator__isnull=True))
        | (Q(status="leased") & Q(annotator__isnull=False) & Q(lease_expires_at__isnull=False))
        | (Q(status="submitted") & Q(annotator__isnull=False) & Q(submitted_at__isnull=False))
    )
    if judged_slots:
        consistent |= (
            Q(status="judged") & Q(annotator__isnull=True) & Q(leased_at__isnull=True) & Q(submitted_at__isnull=True)
        )
    return [
        models.UniqueConstraint(fields=["task", "slot"], name=f"{prefix}_slot_unique_per_task"),
        models.UniqueConstraint(fields=["task", "annotator"], name=f"{prefix}_annotator_once_per_task"),
        models.CheckConstraint(condition=within("slot", 1, models.F("slot_limit")), name=f"{prefix}_slot_within_limit"),
        models.UniqueConstraint(fields=["campaign", "annotator"], condition=Q(status="leased"), name=one_open_lease),
        models.CheckConstraint(condition=consistent, name=f"{prefix}_status_consistent"),
    ]

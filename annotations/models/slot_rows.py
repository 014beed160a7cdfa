"""The columns every slot row shares, whichever campaign kind it serves: annotation campaigns' assignments and fact
review's. The slot engine (annotations.slots) reads and writes these by name; each concrete model adds its own
foreign keys (campaign, task, annotator) and constraints, whose names its migrations already carry."""

from __future__ import annotations

from django.db import models


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

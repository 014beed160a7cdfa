"""Adjudication storage: which campaigns send disagreements to an adjudicator, the disputed tasks, and the final
values an adjudicator recorded. Raw ratings are never changed: adjudicated values live beside them.

Imported at the end of annotations/models.py, so these are models of the `annotations` app.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _

from annotations.models.campaigns import StandInValue
from annotations.models.parts import at_least, user_or_null, within
from annotations.models.spans import MarkedError, marked_error_checks


class AdjudicationRule(models.Model):
    """When a campaign's task counts as disputed: the ratings of one answer's aspect spread wider than
    `max_spread` (max minus min of the ratings that count), or, with `preference_splits`, its raters did not all
    prefer the same answer. Its adjudicators settle the disputes."""

    campaign = models.OneToOneField("annotations.Campaign", on_delete=models.CASCADE, related_name="adjudication_rule")
    max_spread = models.FloatField(
        null=True,
        blank=True,
        help_text="A task is disputed when an answer's ratings of one aspect differ by more than this; empty to "
        "leave scores alone.",
    )
    preference_splits = models.BooleanField(
        default=False, help_text="A task is disputed when its raters did not all prefer the same answer."
    )
    min_span_f1 = models.FloatField(
        null=True,
        blank=True,
        help_text="A task is disputed when two raters' error spans on one answer agree with a span-level F1 below "
        "this (overlap of at least one character, same category); empty to leave spans alone.",
    )
    adjudicators = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="adjudicated_campaigns")

    class Meta:
        verbose_name = _("adjudication rule")
        verbose_name_plural = _("adjudication rules")
        constraints = [
            at_least("max_spread", 0, "adjudication_spread_non_negative", nullable=True),
            models.CheckConstraint(
                condition=Q(max_spread__isnull=False) | Q(preference_splits=True) | Q(min_span_f1__isnull=False),
                name="adjudication_rule_has_a_trigger",
            ),
            models.CheckConstraint(
                condition=within("min_span_f1", 0, 1, nullable=True), name="adjudication_span_f1_between_0_and_1"
            ),
        ]

    def __str__(self) -> str:
        return f"adjudication rule of {self.campaign}"


class Dispute(models.Model):
    """A task whose counting ratings disagree beyond its campaign's rule. `spreads` lists what disagreed
    ([{response_id, aspect_id, spread}]); the dispute is resolved once an adjudicator recorded the final values."""

    task = models.OneToOneField("annotations.Task", on_delete=models.CASCADE, related_name="dispute")
    # Copied from the task, so the adjudicator's queue reads one table.
    campaign = models.ForeignKey("annotations.Campaign", on_delete=models.CASCADE, related_name="disputes")
    spreads = models.JSONField(default=list, blank=True)
    preference_split = models.BooleanField(default=False)
    found_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = user_or_null()
    reason = models.TextField(blank=True)
    # The adjudicated preference, when the preference was split; empty with none_appropriate means "none of them".
    preferred_response = models.ForeignKey(
        "annotations.Response", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    none_appropriate = models.BooleanField(default=False)

    class Meta:
        verbose_name = _("dispute")
        verbose_name_plural = _("disputes")
        ordering = ["campaign", "found_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(resolved_at__isnull=True) & Q(reason=""))
                | (Q(resolved_at__isnull=False) & ~Q(reason="") & Q(resolved_at__gte=F("found_at"))),
                name="dispute_resolved_with_reason",
            ),
            models.CheckConstraint(
                condition=Q(preferred_response__isnull=True) | Q(none_appropriate=False),
                name="dispute_preference_or_none",
            ),
        ]
        indexes = [models.Index(fields=["campaign", "resolved_at"], name="dispute_queue")]

    def __str__(self) -> str:
        return f"dispute on {self.task}"


class Adjudication(StandInValue):
    """The final value of one answer's aspect in a disputed task. The aspect's range is copied onto the row so the
    database itself refuses a value outside the scale."""

    dispute = models.ForeignKey(Dispute, on_delete=models.CASCADE, related_name="adjudications")
    task = models.ForeignKey("annotations.Task", on_delete=models.CASCADE, related_name="adjudications")
    response = models.ForeignKey("annotations.Response", on_delete=models.CASCADE, related_name="adjudications")
    aspect = models.ForeignKey("annotations.Aspect", on_delete=models.CASCADE, related_name="adjudications")
    raw = models.JSONField(help_text="The scale's token for the value, as a rating would store it.")
    scale_min = models.FloatField()
    scale_max = models.FloatField()
    adjudicator = user_or_null()

    class Meta(StandInValue.Meta):
        verbose_name = _("adjudication")
        verbose_name_plural = _("adjudications")
        constraints = [
            models.UniqueConstraint(
                fields=["task", "response", "aspect"], name="adjudication_once_per_task_answer_aspect"
            ),
            models.CheckConstraint(
                condition=within("value", F("scale_min"), F("scale_max")), name="adjudication_value_within_scale"
            ),
        ]

    def __str__(self) -> str:
        return f"adjudicated {self.aspect_id} of {self.response_id} in {self.task}: {self.value}"


class AdjudicatedSpan(MarkedError):
    """One error of the final span set an adjudicator settled for a span aspect's answer (the Adjudication's raw
    token lists the same errors; its value is their MQM score). Offsets are code points into the answer, as ErrorSpan
    stores them; an adjudicator's span always marks some text."""

    adjudication = models.ForeignKey(Adjudication, on_delete=models.CASCADE, related_name="spans")
    position = models.PositiveIntegerField()
    start = models.PositiveIntegerField()
    end = models.PositiveIntegerField()

    class Meta:
        verbose_name = _("adjudicated error span")
        verbose_name_plural = _("adjudicated error spans")
        ordering = ["adjudication", "position"]
        constraints = [
            models.UniqueConstraint(fields=["adjudication", "position"], name="adjudicated_span_position_unique"),
            models.CheckConstraint(condition=Q(end__gt=F("start")), name="adjudicated_span_marks_text"),
            *marked_error_checks(
                severity_known="adjudicated_span_severity_known", category_present="adjudicated_span_category_present"
            ),
        ]


class DisputeClosure(models.Model):
    """An open dispute that an exclusion closed: the task lost one of its counting ratings, so its dispute row was
    dropped until the task has all its ratings again. Kept under the dispute's former id, so an adjudicator who
    opens that dispute learns why it is gone instead of finding nothing."""

    dispute_number = models.PositiveBigIntegerField(unique=True, help_text="The id the closed dispute had.")
    campaign = models.ForeignKey("annotations.Campaign", on_delete=models.CASCADE, related_name="+")
    task = models.ForeignKey("annotations.Task", on_delete=models.CASCADE, related_name="+")
    exclusion = models.ForeignKey(
        "annotations.RaterExclusion", on_delete=models.CASCADE, related_name="closed_disputes"
    )
    closed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("dispute closed by an exclusion")
        verbose_name_plural = _("disputes closed by an exclusion")
        ordering = ["-closed_at"]

    def __str__(self) -> str:
        return f"dispute {self.dispute_number}, closed by {self.exclusion}"

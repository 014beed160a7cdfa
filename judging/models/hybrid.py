"""Hybrid campaigns: a certified version's calibrated confidence threshold and its application to a campaign."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

from annotations.models.parts import known_choice, user_or_null
from judging.models.certification import Certificate, JudgeVersion
from judging.models.runs import run_or_null


class HybridApplyStatus(models.TextChoices):
    NONE = "", _("not applied")
    RUNNING = "running", _("judge rating the tasks")
    APPLYING = "applying", _("handing tasks to the judge")
    DONE = "done", _("applied")


class HybridCalibration(models.Model):
    """A Trust-or-Escalate calibration of a certified judge version for a hybrid campaign, and, once applied, the
    judge run that rated the campaign's tasks and how many of them the judge kept.

    The figures are those of the pure calibration: all defined with no reason, or all undefined with one."""

    campaign = models.ForeignKey("annotations.Campaign", on_delete=models.CASCADE, related_name="hybrid_calibrations")
    version = models.ForeignKey(JudgeVersion, on_delete=models.PROTECT, related_name="hybrid_calibrations")
    certificate = models.ForeignKey(Certificate, on_delete=models.PROTECT, related_name="hybrid_calibrations")
    target = models.FloatField()
    delta = models.FloatField()
    min_kept = models.PositiveIntegerField()
    n = models.PositiveIntegerField()
    kept = models.PositiveIntegerField()
    threshold = models.FloatField(null=True, blank=True)
    coverage = models.FloatField(null=True, blank=True)
    empirical_agreement = models.FloatField(null=True, blank=True)
    agreement_lower_bound = models.FloatField(null=True, blank=True)
    p_value = models.FloatField(null=True, blank=True)
    undefined_reason = models.TextField(blank=True)
    # Reference answers left out of the calibration: without a human label (raters tied) or a judge confidence.
    left_out = models.PositiveIntegerField(default=0)
    confidence_sources = models.JSONField(default=dict, blank=True)
    created_by = user_or_null()
    created_at = models.DateTimeField(auto_now_add=True)
    run = run_or_null("hybrid_calibration")
    apply_status = models.CharField(max_length=10, choices=HybridApplyStatus.choices, default="", blank=True)
    judged_tasks = models.PositiveIntegerField(null=True, blank=True)
    human_tasks = models.PositiveIntegerField(null=True, blank=True)
    apply_note = models.TextField(blank=True)
    applied_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("hybrid calibration")
        verbose_name_plural = _("hybrid calibrations")
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(target__gt=0, target__lt=1, delta__gt=0, delta__lt=1, min_kept__gte=1),
                name="hybrid_levels_in_range",
            ),
            models.CheckConstraint(
                condition=(
                    models.Q(
                        threshold__isnull=False,
                        coverage__isnull=False,
                        empirical_agreement__isnull=False,
                        agreement_lower_bound__isnull=False,
                        undefined_reason="",
                        kept__gte=1,
                    )
                    | (
                        models.Q(threshold__isnull=True, coverage__isnull=True, agreement_lower_bound__isnull=True)
                        & ~models.Q(undefined_reason="")
                    )
                ),
                name="hybrid_defined_or_reason",
            ),
            models.CheckConstraint(
                condition=models.Q(apply_status="") | models.Q(threshold__isnull=False),
                name="hybrid_applied_only_when_defined",
            ),
            known_choice("apply_status", HybridApplyStatus.values, "hybrid_apply_status_valid"),
            # A campaign hands its tasks to a judge once: applying again is refused, not repeated.
            models.UniqueConstraint(
                fields=["campaign"], condition=~models.Q(apply_status=""), name="hybrid_one_application_per_campaign"
            ),
        ]

    def __str__(self) -> str:
        return f"hybrid calibration {self.pk} of {self.campaign_id}"

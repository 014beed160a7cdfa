"""Recruitment storage. Platform ids are personal data: they live only in these tables, apart from ratings, and
leave the database only through the researcher's payment export.

Imported at the end of annotations/models.py, so these are models of the `annotations` app.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _


class Platform(models.TextChoices):
    PROLIFIC = "prolific", _("Prolific")
    MTURK = "mturk", _("Amazon Mechanical Turk")
    INVITE = "invite", _("Signed invite link")


class RecruitmentLink(models.Model):
    """External recruitment for one campaign on one platform: an unguessable entry token, quotas and the way a
    worker is sent back when done."""

    campaign = models.ForeignKey("annotations.Campaign", on_delete=models.CASCADE, related_name="recruitment_links")
    platform = models.CharField(max_length=10, choices=Platform.choices)
    token = models.CharField(max_length=64, unique=True, editable=False)
    is_open = models.BooleanField(default=True, help_text="Closed links admit no new worker; joined ones resume.")
    tasks_per_session = models.PositiveIntegerField(
        null=True, blank=True, help_text="Tasks a worker does per platform session; empty for no limit."
    )
    tasks_per_worker = models.PositiveIntegerField(
        null=True, blank=True, help_text="Tasks a worker does in total; empty for no limit."
    )
    completion_code = models.CharField(max_length=100, blank=True, help_text="Shown to the worker at the end.")
    completion_url = models.URLField(
        max_length=500, blank=True, help_text="Where a Prolific worker is sent at the end (the study's completion URL)."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("recruitment link")
        verbose_name_plural = _("recruitment links")
        ordering = ["campaign", "platform"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "platform"], name="recruitment_link_once_per_platform"),
            models.CheckConstraint(
                condition=Q(tasks_per_session__isnull=True) | Q(tasks_per_session__gte=1),
                name="recruitment_session_quota_positive",
            ),
            models.CheckConstraint(
                condition=Q(tasks_per_worker__isnull=True) | Q(tasks_per_worker__gte=1),
                name="recruitment_worker_quota_positive",
            ),
            models.CheckConstraint(condition=~Q(token=""), name="recruitment_token_present"),
        ]

    def __str__(self) -> str:
        return f"{self.get_platform_display()} link of {self.campaign}"


class CrowdWorker(models.Model):
    """A worker who came through a link: their platform id and the passwordless account that rates for them. The
    account's rater pseudonym is what ratings and dataset exports carry."""

    link = models.ForeignKey(RecruitmentLink, on_delete=models.PROTECT, related_name="workers")
    platform_worker_id = models.CharField(max_length=200)
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="crowd_worker")
    joined_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("crowd worker")
        verbose_name_plural = _("crowd workers")
        ordering = ["link", "joined_at"]
        constraints = [
            models.UniqueConstraint(fields=["link", "platform_worker_id"], name="crowd_worker_once_per_link"),
            models.CheckConstraint(condition=~Q(platform_worker_id=""), name="crowd_worker_id_present"),
        ]

    def __str__(self) -> str:
        return f"{self.user} via {self.link}"


class CrowdSession(models.Model):
    """One visit from the platform: Prolific's SESSION_ID and STUDY_ID, or MTurk's assignmentId, hitId and
    turkSubmitTo; a signed invite gets a session id of its own."""

    worker = models.ForeignKey(CrowdWorker, on_delete=models.CASCADE, related_name="sessions")
    session_key = models.CharField(max_length=200)
    study_key = models.CharField(max_length=200, blank=True)
    submit_to = models.URLField(max_length=500, blank=True)
    started_at = models.DateTimeField()
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("crowd session")
        verbose_name_plural = _("crowd sessions")
        ordering = ["worker", "started_at"]
        constraints = [
            models.UniqueConstraint(fields=["worker", "session_key"], name="crowd_session_once_per_worker"),
            models.CheckConstraint(condition=~Q(session_key=""), name="crowd_session_key_present"),
        ]

    def __str__(self) -> str:
        return f"session of {self.worker}"

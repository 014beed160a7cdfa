"""Recruitment storage. Platform ids are personal data: they live only in these tables, apart from ratings, and
leave the database only through the researcher's payment export.

Imported at the end of annotations/models.py, so these are models of the `annotations` app.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from annotations.models.parts import at_least, not_blank, user_or_null


class Platform(models.TextChoices):
    PROLIFIC = "prolific", _("Prolific")
    MTURK = "mturk", _("Amazon Mechanical Turk")
    INVITE = "invite", _("Signed invite link")


# The largest quota a link sets (tasks per session or per worker, tasks for the code, skips): the forms offer it
# and the services refuse more.
MAX_QUOTA = 100_000


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
    min_tasks_to_complete = models.PositiveIntegerField(
        default=1,
        help_text="Tasks a worker must submit in a session to get the completion code when the campaign runs out of "
        "tasks for them before their quota; with fewer they get the no-more-tasks code.",
    )
    skips_per_session = models.PositiveIntegerField(default=5, help_text="Tasks a worker may skip per session.")
    no_tasks_code = models.CharField(
        max_length=100,
        default="NOTASKS",
        help_text="Shown instead of the completion code to a worker who ran out of tasks before the minimum, so the "
        "researcher can tell such a session from a completed one.",
    )
    created_by = user_or_null()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("recruitment link")
        verbose_name_plural = _("recruitment links")
        ordering = ["campaign", "platform"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "platform"], name="recruitment_link_once_per_platform"),
            at_least("tasks_per_session", 1, "recruitment_session_quota_positive", nullable=True),
            at_least("tasks_per_worker", 1, "recruitment_worker_quota_positive", nullable=True),
            not_blank("token", "recruitment_token_present"),
            at_least("min_tasks_to_complete", 1, "recruitment_minimum_positive"),
            not_blank("no_tasks_code", "recruitment_no_tasks_code_present"),
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
            not_blank("platform_worker_id", "crowd_worker_id_present"),
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
    # When the campaign had no task left for the worker before they had submitted the link's minimum: they were
    # shown the no-more-tasks code instead of the completion code. A session that later completes keeps both.
    ran_out_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("crowd session")
        verbose_name_plural = _("crowd sessions")
        ordering = ["worker", "started_at"]
        constraints = [
            models.UniqueConstraint(fields=["worker", "session_key"], name="crowd_session_once_per_worker"),
            not_blank("session_key", "crowd_session_key_present"),
        ]

    def __str__(self) -> str:
        return f"session of {self.worker}"


class ScreeningRule(models.TextChoices):
    ALL = "all", _("every answer is an accepted one")
    ANY = "any", _("at least one answer is an accepted one")


class LinkScreening(models.Model):
    """What a participant arriving by the link sees before any task: a consent text to agree to, then screening
    questions with choices. `questions` is [{"text": str, "choices": [str], "accepted": [str]}]; the rule says how
    many answers must be accepted ones. Whoever declines or fails gets `screened_out_code` (Prolific) and no task."""

    link = models.OneToOneField(RecruitmentLink, on_delete=models.CASCADE, related_name="screening")
    consent_text = models.TextField(blank=True, help_text="Markdown; raw HTML is not rendered. Empty: no consent step.")
    questions = models.JSONField(default=list, blank=True)
    rule = models.CharField(max_length=3, choices=ScreeningRule.choices, default=ScreeningRule.ALL)
    screened_out_code = models.CharField(
        max_length=100,
        default="SCREENED",
        help_text="Shown to a Prolific participant who declines consent or is screened out (the study's "
        "screened-out completion code).",
    )

    class Meta:
        verbose_name = _("link screening")
        verbose_name_plural = _("link screenings")
        constraints = [
            not_blank("screened_out_code", "screening_code_present"),
        ]

    def __str__(self) -> str:
        return f"screening of {self.link}"


class ScreeningOutcomeKind(models.TextChoices):
    DECLINED = "declined", _("declined consent")
    SCREENED_OUT = "screened_out", _("screened out")
    PASSED = "passed", _("passed")


class ScreeningOutcome(models.Model):
    """One participant's way through consent and screening. Recorded without joining them: someone who declined or
    was screened out has no account and holds no task slot. Platform ids stay in the recruitment tables."""

    link = models.ForeignKey(RecruitmentLink, on_delete=models.CASCADE, related_name="screening_outcomes")
    platform_worker_id = models.CharField(max_length=200)
    session_key = models.CharField(max_length=200)
    outcome = models.CharField(max_length=12, choices=ScreeningOutcomeKind.choices)
    answers = models.JSONField(default=dict, blank=True, help_text="Question text -> the choice picked.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("screening outcome")
        verbose_name_plural = _("screening outcomes")
        ordering = ["link", "created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["link", "platform_worker_id", "session_key"], name="screening_outcome_once_per_session"
            ),
            not_blank("platform_worker_id", "screening_outcome_worker_present"),
        ]

    def __str__(self) -> str:
        return f"{self.outcome} on {self.link}"

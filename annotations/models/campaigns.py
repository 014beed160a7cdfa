"""The campaign side of the annotations app: campaigns, their tasks and slots (assignments), skips, submissions
with their earlier versions, drafts, and ratings a certified judge filled in."""

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _

from annotations.models.datasets import Aspect, Dataset, Response, Turn
from annotations.models.parts import at_least, known_choice, user_or_null, within
from annotations.models.slot_rows import SlotRow, SlotStatus, slot_row_constraints


class HumanSampling(models.TextChoices):
    UNIFORM = "uniform", _("uniform")
    UNCERTAINTY = "uncertainty", _("by the judge's uncertainty")
    STRATIFIED = "stratified", _("stratified (variance-minimising allocation)")


class SamplingStratum(models.TextChoices):
    SYSTEM = "system", _("system")
    ASPECT = "aspect", _("aspect on which the judge is least certain")
    CONFIDENCE = "confidence", _("judge-uncertainty quartile")


class StopRule(models.TextChoices):
    BEATS = "beats", _("one system beats the other")
    WIDTH = "width", _("a system's interval is narrow enough")
    CERTIFIED = "certified", _("the campaign's judge is certified on the aspect")


class Campaign(models.Model):
    """An annotation campaign: blinded tasks built from one dataset, each rated by exactly N distinct annotators."""

    name = models.CharField(max_length=200)
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="campaigns")
    aspects = models.ManyToManyField(Aspect, related_name="campaigns", help_text="The rubric aspects shown.")
    annotators = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="annotation_campaigns")
    raters_per_item = models.PositiveSmallIntegerField(default=3)
    candidates_per_task = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Answers per task; empty means all answers of a turn."
    )
    guidelines = models.TextField(blank=True, help_text="Markdown; raw HTML is not rendered.")
    show_reference = models.BooleanField(default=False)
    show_context = models.BooleanField(default=True)
    ask_preference = models.BooleanField(default=True)
    rationale_required = models.BooleanField(default=True)
    scale_dropdowns = models.BooleanField(
        default=False,
        help_text="Show every scale as a drop-down. Otherwise a scale of at most 7 values is a row of buttons.",
    )
    lease_minutes = models.PositiveIntegerField(default=30)
    is_active = models.BooleanField(default=True)
    # The hand-out window: no new task is handed out before opens_at or from closes_at on (the claim rule of
    # annotations.slots); a task leased earlier may still be submitted until its lease ends. Empty means no limit.
    opens_at = models.DateTimeField(null=True, blank=True)
    closes_at = models.DateTimeField(null=True, blank=True)
    allow_revisit = models.BooleanField(
        default=True, help_text="Annotators may reopen and correct the tasks they submitted while the campaign is open."
    )
    gold_rate = models.FloatField(
        default=0,
        help_text="Share of each annotator's tasks drawn from gold items and attention checks (0 to 0.5).",
    )
    # Secret per campaign so annotators cannot predict the candidate shuffle from ids.
    shuffle_seed = models.CharField(max_length=64, editable=False)
    created_by = user_or_null("created_campaigns")
    created_at = models.DateTimeField(auto_now_add=True)
    # Which tasks of a hybrid campaign go to the humans (see judging.hybrid.sampling): empty keeps the calibrated
    # confidence threshold; a policy sends every task with a known probability instead, so that the estimates can
    # weight each rating by its inverse.
    human_sampling = models.CharField(max_length=20, blank=True, default="", choices=HumanSampling.choices)
    human_share = models.FloatField(
        default=0.5, help_text="The expected share of tasks sent to the human raters under a sampling policy."
    )
    # What the stratified policy cuts the tasks into (see judging.hybrid.sampling).
    sampling_stratum = models.CharField(max_length=20, default=SamplingStratum.SYSTEM, choices=SamplingStratum.choices)
    sampling_seed = models.CharField(max_length=64, blank=True, default="")
    stop_rule = models.CharField(max_length=20, blank=True, default="", choices=StopRule.choices)
    stop_aspect = models.ForeignKey(
        Aspect, null=True, blank=True, on_delete=models.SET_NULL, related_name="stopping_campaigns"
    )
    stop_first = models.CharField(max_length=200, blank=True, default="")
    stop_second = models.CharField(max_length=200, blank=True, default="")
    stop_width = models.FloatField(null=True, blank=True)
    # Set once, when the stopping rule is met: the claim rule hands out no new task from then on.
    stopped_at = models.DateTimeField(null=True, blank=True)
    stop_evidence = models.JSONField(default=dict, blank=True)

    class Meta:
        verbose_name = _("campaign")
        verbose_name_plural = _("campaigns")
        ordering = ["-created_at", "name"]
        constraints = [
            models.CheckConstraint(condition=within("raters_per_item", 1, 100), name="campaign_raters_1_to_100"),
            at_least("candidates_per_task", 1, "campaign_candidates_positive", nullable=True),
            at_least("lease_minutes", 1, "campaign_lease_positive"),
            models.CheckConstraint(condition=within("gold_rate", 0, 0.5), name="campaign_gold_rate_range"),
            models.CheckConstraint(
                condition=Q(opens_at__isnull=True) | Q(closes_at__isnull=True) | Q(opens_at__lt=F("closes_at")),
                name="campaign_opens_before_it_closes",
            ),
            models.CheckConstraint(
                condition=within("human_share", 0, 1, low_exclusive=True), name="campaign_human_share_range"
            ),
            models.CheckConstraint(
                condition=within("stop_width", 0, low_exclusive=True, nullable=True),
                name="campaign_stop_width_positive",
            ),
            models.CheckConstraint(
                condition=Q(stop_rule="")
                | (Q(stop_rule="beats") & Q(stop_aspect__isnull=False) & ~Q(stop_first="") & ~Q(stop_second=""))
                | (
                    Q(stop_rule="width")
                    & Q(stop_aspect__isnull=False)
                    & ~Q(stop_first="")
                    & Q(stop_width__isnull=False)
                )
                | (Q(stop_rule="certified") & Q(stop_aspect__isnull=False)),
                name="campaign_stop_rule_complete",
            ),
            known_choice("sampling_stratum", SamplingStratum.values, "campaign_sampling_stratum_known"),
            # Per dataset: only those who see the dataset learn which campaign names it holds.
            models.UniqueConstraint(fields=["dataset", "name"], name="campaign_name_unique_per_dataset"),
        ]

    def __str__(self) -> str:
        return self.name


class Task(models.Model):
    """One turn and a chunk of at most K of its answers; needs `raters_per_item` distinct annotators."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="tasks")
    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="campaign_tasks")
    chunk = models.PositiveIntegerField(default=0)
    # Hand-out order (see annotations.campaigns.claims).
    position = models.PositiveIntegerField()
    responses = models.ManyToManyField(Response, related_name="campaign_tasks")
    # A task of a gold item or attention check: it measures the annotators, and its ratings are not the dataset's.
    is_gold = models.BooleanField(default=False)
    # The probability with which the task was sent to the human raters under the campaign's sampling policy; empty
    # when no policy chose (every task went to them). Estimates weight its ratings by the inverse.
    human_probability = models.FloatField(null=True, blank=True)
    # The stratum the stratified policy drew the task in, so the estimate combines the very same strata.
    human_stratum = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        verbose_name = _("task")
        verbose_name_plural = _("tasks")
        ordering = ["campaign", "position"]
        constraints = [
            models.CheckConstraint(
                condition=within("human_probability", 0, 1, low_exclusive=True, nullable=True),
                name="task_human_probability_range",
            ),
            models.UniqueConstraint(fields=["campaign", "turn", "chunk"], name="task_chunk_unique_per_turn"),
            models.UniqueConstraint(fields=["campaign", "position"], name="task_position_unique_per_campaign"),
        ]

    def __str__(self) -> str:
        return f"task {self.position + 1} of {self.campaign}"


AssignmentStatus = SlotStatus


class Assignment(SlotRow):
    """A rater slot of a task. Exactly N rows exist per task and they are only ever updated, never inserted later,
    so a task cannot collect more than N raters; unique(task, annotator) keeps the raters distinct."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="assignments")
    # task and annotator get no index of their own: the unique (task, slot) and (task, annotator) constraints and the
    # (annotator, status) index lead with them, and a claim or submit rewrites every index of the row it updates.
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="assignments", db_index=False)
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="assignments",
        db_index=False,
    )
    # Copied from the task, so the claim rule can tell gold slots apart without a join.
    is_gold = models.BooleanField(default=False)
    # A slot added when the rater of `replaces` was excluded, so the task still gets N ratings that count.
    replaces = models.OneToOneField(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="replacement"
    )

    class Meta(SlotRow.Meta):
        verbose_name = _("assignment")
        verbose_name_plural = _("assignments")
        constraints = slot_row_constraints(
            "assignment", one_open_lease="assignment_one_open_lease_per_annotator", judged_slots=True
        )
        indexes = [
            models.Index(
                fields=["campaign", "task_position", "slot"],
                condition=~Q(status="submitted"),
                name="assignment_open_slots",
            ),
            models.Index(fields=["annotator", "status"], name="assignment_by_annotator"),
        ]

    def __str__(self) -> str:
        return f"slot {self.slot} of {self.task}"


class SkipReason(models.TextChoices):
    NOT_QUALIFIED = "not_qualified", _("I cannot judge this topic")
    UNREADABLE = "unreadable", _("The task does not display correctly")
    OFFENSIVE = "offensive", _("The content is offensive or disturbing")
    OTHER = "other", _("Other")


class Skip(models.Model):
    """An annotator declined a task; they are never offered it again and their slot goes back to the pool."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="skips")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="task_skips")
    reason = models.CharField(max_length=20, choices=SkipReason.choices)
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("skip")
        verbose_name_plural = _("skips")
        constraints = [models.UniqueConstraint(fields=["task", "annotator"], name="skip_once_per_task")]

    def __str__(self) -> str:
        return f"{self.annotator} skipped {self.task}: {self.reason}"


class Submission(models.Model):
    """The task-level part of a completed assignment; per-answer scores are Rating rows of the annotator's Rater."""

    assignment = models.OneToOneField(Assignment, on_delete=models.CASCADE, related_name="submission")
    idempotency_key = models.CharField(max_length=64, unique=True)
    preferred_response = models.ForeignKey(
        Response, null=True, blank=True, on_delete=models.SET_NULL, related_name="preferred_in"
    )
    # "No candidate is appropriate, but if I must choose one…" (seed 004).
    none_appropriate = models.BooleanField(default=False)
    rationale = models.TextField(blank=True)
    comment = models.TextField(blank=True)
    seconds_spent = models.FloatField()
    created_at = models.DateTimeField(auto_now_add=True)
    # The current answer's version: 1 as first submitted, one more for every correction (each earlier version is a
    # SubmissionRevision row); revised_at is when the current version replaced the one before it.
    version = models.PositiveIntegerField(default=1)
    revised_at = models.DateTimeField(null=True, blank=True)
    # A hash of the current answer as stored, so a repeated request is told from a correction without reading the
    # ratings back (empty on rows stored before it existed: those are compared field by field).
    answer_digest = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        verbose_name = _("submission")
        verbose_name_plural = _("submissions")
        constraints = [
            at_least("seconds_spent", 0, "submission_seconds_non_negative"),
            models.CheckConstraint(
                condition=(Q(version=1) & Q(revised_at__isnull=True))
                | (Q(version__gt=1) & Q(revised_at__isnull=False)),
                name="submission_revised_at_with_version",
            ),
        ]

    def __str__(self) -> str:
        return f"submission {self.idempotency_key}"


class SubmissionRevision(models.Model):
    """An earlier version of a submission, kept when the annotator corrected it: the task-level answer and, in
    `ratings`, the per-answer scores as the Rating rows then held them ([{response_id, aspect_id, raw, value,
    is_missing}]). Statistics and exports read the current answer; this is its history."""

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="revisions")
    version = models.PositiveIntegerField()
    # The key of the request that stored this version, so a late repeat of that request is recognised as a replay.
    # Not unique: a stale page sends its old key again with a corrected answer.
    idempotency_key = models.CharField(max_length=64, db_index=True)
    preferred_response = models.ForeignKey(Response, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    none_appropriate = models.BooleanField(default=False)
    rationale = models.TextField(blank=True)
    comment = models.TextField(blank=True)
    ratings = models.JSONField(default=list)
    submitted_at = models.DateTimeField(help_text="When this version was submitted.")
    replaced_at = models.DateTimeField(help_text="When the next version replaced it.")

    class Meta:
        verbose_name = _("submission revision")
        verbose_name_plural = _("submission revisions")
        ordering = ["submission", "version"]
        constraints = [
            models.UniqueConstraint(fields=["submission", "version"], name="submission_revision_version_unique"),
            at_least("version", 1, "submission_revision_version_positive"),
            models.CheckConstraint(
                condition=Q(replaced_at__gte=models.F("submitted_at")), name="submission_revision_replaced_after"
            ),
        ]

    def __str__(self) -> str:
        return f"version {self.version} of {self.submission}"


class AssignmentDraft(models.Model):
    """What an annotator has entered so far on a leased task (or on a correction of a submitted one), as the form's
    own field values, so a reload, a later "Continue" or another device finds it again. Never a rating: it is
    dropped when the task is submitted or given up. It keeps its annotator because a slot whose lease expired can
    pass to someone else, who must not see it; the one who lost it keeps their answer as a draft of that slot."""

    assignment = models.ForeignKey(Assignment, on_delete=models.CASCADE, related_name="drafts", db_index=False)
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="assignment_drafts", db_index=False
    )
    values = models.JSONField(default=dict)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("assignment draft")
        verbose_name_plural = _("assignment drafts")
        constraints = [
            models.UniqueConstraint(fields=["assignment", "annotator"], name="assignment_draft_once_per_annotator")
        ]

    def __str__(self) -> str:
        return f"draft of {self.assignment}"


class StandInValue(models.Model):
    """The value of one answer's aspect in a task that stands in for its raters' ratings: a certified judge's in a
    hybrid campaign, an adjudicator's final one in a dispute. Each concrete model names its task, answer and aspect."""

    value = models.FloatField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True
        ordering = ["task", "response", "aspect"]


class JudgeFilledRating(StandInValue):
    """A rating a certified judge gave in a hybrid campaign, in place of the task's human raters. Kept apart from
    `Rating` so that no human agreement statistic can ever read it; exports list it with filled_by = judge."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="judge_filled_ratings")
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="judge_filled_ratings")
    response = models.ForeignKey(Response, on_delete=models.CASCADE, related_name="judge_filled_ratings")
    aspect = models.ForeignKey(Aspect, on_delete=models.CASCADE, related_name="judge_filled_ratings")
    confidence = models.FloatField()
    judge_name = models.CharField(max_length=200)
    # The judge version's fingerprint; a string, because the annotations domain does not depend on the judge.
    judge_version = models.CharField(max_length=64)

    class Meta(StandInValue.Meta):
        verbose_name = _("judge-filled rating")
        verbose_name_plural = _("judge-filled ratings")
        constraints = [
            models.UniqueConstraint(fields=["task", "response", "aspect"], name="judge_filled_once_per_task_answer"),
            models.CheckConstraint(condition=within("confidence", 0, 1), name="judge_filled_confidence_0_to_1"),
        ]

    def __str__(self) -> str:
        return f"{self.judge_name} on {self.response_id}/{self.aspect_id}: {self.value}"

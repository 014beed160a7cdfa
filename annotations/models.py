"""The annotations app's models.

Why one module of this size: Django looks for an app's models in its `models` module; the crowd-study and research
packages keep their own models, imported at its end, while the dataset, campaign and slot models stay here because
their constraints and foreign keys refer to one another.
"""

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import get_language
from django.utils.translation import gettext_lazy as _

from annotations.slot_rows import SlotRow, SlotStatus


class MeasurementLevel(models.TextChoices):
    NOMINAL = "nominal"
    ORDINAL = "ordinal"
    INTERVAL = "interval"
    RATIO = "ratio"


class AnswerFormat(models.TextChoices):
    """How the site shows a dataset's answers to raters and researchers. Plain text by default: a model's line
    breaks are part of what raters judge (structure, fluency), and Markdown would join lines into one paragraph."""

    PLAIN = "plain", _("Plain text, line breaks kept")
    MARKDOWN = "markdown", _("Markdown, line breaks kept")


class Dataset(models.Model):
    name = models.CharField(max_length=200)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="owned_datasets"
    )
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="shared_datasets")
    notice = models.TextField(blank=True, help_text="What the import inferred or assumed, shown to researchers.")
    answer_format = models.CharField(
        max_length=10,
        choices=AnswerFormat.choices,
        default=AnswerFormat.PLAIN,
        help_text="How answers are shown: as plain text, or rendered as Markdown; line breaks are kept in both.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("dataset")
        verbose_name_plural = _("datasets")
        ordering = ["name"]
        constraints = [
            # Per owner, not global: a global rule would tell one researcher which names another one uses.
            # Ownerless datasets share one namespace; a partial index says so on every backend (SQLite has no
            # NULLS NOT DISTINCT).
            models.UniqueConstraint(fields=["owner", "name"], name="dataset_name_unique_per_owner"),
            models.UniqueConstraint(
                fields=["name"], condition=Q(owner__isnull=True), name="dataset_name_unique_without_owner"
            ),
            models.CheckConstraint(
                condition=Q(answer_format__in=AnswerFormat.values), name="dataset_answer_format_known"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Rubric(models.Model):
    dataset = models.OneToOneField(Dataset, on_delete=models.CASCADE, related_name="rubric")
    source = models.CharField(max_length=100, help_text='"preset:<name>", "file" or "inferred"')
    systems = models.JSONField(default=dict, blank=True)

    class Meta:
        verbose_name = _("rubric")
        verbose_name_plural = _("rubrics")

    def __str__(self) -> str:
        return f"rubric of {self.dataset}"


class Aspect(models.Model):
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="aspects")
    name = models.CharField(max_length=200)
    label = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    min_value = models.FloatField()
    max_value = models.FloatField()
    ideal = models.FloatField()
    level = models.CharField(max_length=10, choices=MeasurementLevel.choices, default=MeasurementLevel.ORDINAL)
    labels = models.JSONField(default=dict, blank=True)
    missing = models.JSONField(default=list, blank=True)
    position = models.PositiveIntegerField(default=0)
    translations = models.JSONField(
        default=dict, blank=True, help_text='Label, description and value labels in other languages: {"ja": {...}}.'
    )

    class Meta:
        verbose_name = _("aspect")
        verbose_name_plural = _("aspects")
        ordering = ["dataset", "position"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "name"], name="aspect_name_unique_per_dataset"),
            models.CheckConstraint(condition=Q(min_value__lt=models.F("max_value")), name="aspect_min_below_max"),
            models.CheckConstraint(
                condition=Q(ideal__gte=models.F("min_value")) & Q(ideal__lte=models.F("max_value")),
                name="aspect_ideal_within_range",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def _translated(self, key: str) -> Any:
        language = (get_language() or "").split("-")[0]
        return (self.translations or {}).get(language, {}).get(key)

    @property
    def display_label(self) -> str:
        """The label in the active language, else the default text, else the name."""
        return self._translated("label") or self.label or self.name

    @property
    def display_description(self) -> str:
        return self._translated("description") or self.description

    def display_value_labels(self) -> dict[str, str]:
        return {**(self.labels or {}), **(self._translated("labels") or {})}

    @property
    def span(self) -> float:
        return self.max_value - self.min_value


class System(models.Model):
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="systems")
    key = models.CharField(max_length=200)
    model_name = models.CharField(max_length=300, blank=True)
    position = models.PositiveIntegerField(default=0)

    class Meta:
        verbose_name = _("system")
        verbose_name_plural = _("systems")
        ordering = ["dataset", "position"]
        constraints = [models.UniqueConstraint(fields=["dataset", "key"], name="system_key_unique_per_dataset")]

    def __str__(self) -> str:
        return self.key


class Item(models.Model):
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="items")
    external_id = models.CharField(max_length=500)
    position = models.PositiveIntegerField()
    # The item's own JSON minus "turns", kept verbatim so export reproduces every field, known or not.
    source = models.JSONField(default=dict)

    class Meta:
        verbose_name = _("item")
        verbose_name_plural = _("items")
        ordering = ["dataset", "position"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "external_id"], name="item_id_unique_per_dataset"),
            models.UniqueConstraint(fields=["dataset", "position"], name="item_position_unique_per_dataset"),
        ]

    def __str__(self) -> str:
        return self.external_id

    @property
    def meta(self) -> object:
        return self.source.get("meta")


class Turn(models.Model):
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="turns")
    index = models.PositiveIntegerField()
    prompt = models.TextField()
    reference = models.TextField(null=True, blank=True)
    context = models.JSONField(null=True, blank=True)
    # The turn's JSON minus "responses", kept verbatim for a lossless export.
    source = models.JSONField(default=dict)

    class Meta:
        verbose_name = _("turn")
        verbose_name_plural = _("turns")
        ordering = ["item", "index"]
        constraints = [models.UniqueConstraint(fields=["item", "index"], name="turn_index_unique_per_item")]

    def __str__(self) -> str:
        return f"{self.item.external_id} turn {self.index + 1}"

    @property
    def context_passages(self) -> list[str]:
        if self.context is None:
            return []
        if isinstance(self.context, str):
            return [self.context]
        return [str(passage) for passage in self.context]


class Response(models.Model):
    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="responses")
    system = models.ForeignKey(System, on_delete=models.CASCADE, related_name="responses")
    position = models.PositiveIntegerField()
    text = models.TextField()
    # The answer's JSON minus "human_evals" (rebuilt from Rating rows on export).
    source = models.JSONField(default=dict)
    # Aspect names in the order the import listed them under human_evals, including empty lists.
    eval_aspects = models.JSONField(default=list)
    has_human_evals = models.BooleanField(default=False)

    class Meta:
        verbose_name = _("response")
        verbose_name_plural = _("responses")
        ordering = ["turn", "position"]
        constraints = [
            models.UniqueConstraint(fields=["turn", "system"], name="response_unique_per_turn_and_system"),
        ]

    def __str__(self) -> str:
        return f"{self.turn} / {self.system.key}"


class Rater(models.Model):
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="raters")
    external_id = models.CharField(max_length=200, null=True, blank=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="rater_profiles"
    )
    pseudonym = models.CharField(max_length=200)
    # True when the import had no "raters" list: the id is a list position, not a person.
    is_positional = models.BooleanField(default=False)

    class Meta:
        verbose_name = _("rater")
        verbose_name_plural = _("raters")
        constraints = [
            models.UniqueConstraint(fields=["dataset", "external_id"], name="rater_external_id_unique_per_dataset"),
            models.UniqueConstraint(fields=["dataset", "user"], name="rater_user_unique_per_dataset"),
            models.UniqueConstraint(fields=["dataset", "pseudonym"], name="rater_pseudonym_unique_per_dataset"),
            models.CheckConstraint(
                condition=(Q(external_id__isnull=False) & Q(user__isnull=True))
                | (Q(external_id__isnull=True) & Q(user__isnull=False)),
                name="rater_is_imported_xor_app_user",
            ),
        ]

    def __str__(self) -> str:
        return self.pseudonym


class RatingOrigin(models.TextChoices):
    IMPORT = "import"
    APP = "app"


class Rating(models.Model):
    # No single-column indexes on response and aspect: the unique (response, aspect, rater) constraint and the
    # (aspect, response) index lead with them, and each index is written again for every rating a submit inserts.
    response = models.ForeignKey(Response, on_delete=models.CASCADE, related_name="ratings", db_index=False)
    aspect = models.ForeignKey(Aspect, on_delete=models.CASCADE, related_name="ratings", db_index=False)
    rater = models.ForeignKey(Rater, on_delete=models.CASCADE, related_name="ratings")
    position = models.PositiveIntegerField(default=0)
    raw = models.JSONField(null=True, blank=True, help_text="The token exactly as imported or entered.")
    value = models.FloatField(null=True, blank=True)
    is_missing = models.BooleanField(default=False)
    rationale = models.TextField(blank=True)
    comment = models.TextField(blank=True)
    seconds_spent = models.FloatField(null=True, blank=True)
    origin = models.CharField(max_length=10, choices=RatingOrigin.choices, default=RatingOrigin.IMPORT)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("rating")
        verbose_name_plural = _("ratings")
        ordering = ["response", "aspect", "position"]
        constraints = [
            models.UniqueConstraint(fields=["response", "aspect", "rater"], name="one_rating_per_rater_answer_aspect"),
            models.CheckConstraint(
                condition=Q(is_missing=True) | Q(value__isnull=False), name="rating_value_present_unless_missing"
            ),
            models.CheckConstraint(
                condition=Q(seconds_spent__isnull=True) | Q(seconds_spent__gte=0), name="rating_seconds_non_negative"
            ),
        ]
        indexes = [models.Index(fields=["aspect", "response"])]

    def __str__(self) -> str:
        return f"{self.rater} on {self.response_id}/{self.aspect_id}: {self.raw!r}"


# --- Annotation campaigns -------------------------------------------------------------------------------------------


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
    allow_revisit = models.BooleanField(
        default=True, help_text="Annotators may reopen and correct the tasks they submitted while the campaign is open."
    )
    gold_rate = models.FloatField(
        default=0,
        help_text="Share of each annotator's tasks drawn from gold items and attention checks (0 to 0.5).",
    )
    # Secret per campaign so annotators cannot predict the candidate shuffle from ids.
    shuffle_seed = models.CharField(max_length=64, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="created_campaigns"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("campaign")
        verbose_name_plural = _("campaigns")
        ordering = ["-created_at", "name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(raters_per_item__gte=1) & Q(raters_per_item__lte=100), name="campaign_raters_1_to_100"
            ),
            models.CheckConstraint(
                condition=Q(candidates_per_task__isnull=True) | Q(candidates_per_task__gte=1),
                name="campaign_candidates_positive",
            ),
            models.CheckConstraint(condition=Q(lease_minutes__gte=1), name="campaign_lease_positive"),
            models.CheckConstraint(
                condition=Q(gold_rate__gte=0) & Q(gold_rate__lte=0.5), name="campaign_gold_rate_range"
            ),
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

    class Meta:
        verbose_name = _("task")
        verbose_name_plural = _("tasks")
        ordering = ["campaign", "position"]
        constraints = [
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

    class Meta:
        verbose_name = _("assignment")
        verbose_name_plural = _("assignments")
        ordering = ["task_position", "slot"]
        constraints = [
            models.UniqueConstraint(fields=["task", "slot"], name="assignment_slot_unique_per_task"),
            models.UniqueConstraint(fields=["task", "annotator"], name="assignment_annotator_once_per_task"),
            models.CheckConstraint(
                condition=Q(slot__gte=1) & Q(slot__lte=models.F("slot_limit")), name="assignment_slot_within_limit"
            ),
            # One open task per annotator and campaign: resuming is unambiguous and racing requests cannot hoard.
            models.UniqueConstraint(
                fields=["campaign", "annotator"],
                condition=Q(status="leased"),
                name="assignment_one_open_lease_per_annotator",
            ),
            models.CheckConstraint(
                condition=(Q(status="free") & Q(annotator__isnull=True))
                | (Q(status="leased") & Q(annotator__isnull=False) & Q(lease_expires_at__isnull=False))
                | (Q(status="submitted") & Q(annotator__isnull=False) & Q(submitted_at__isnull=False))
                | (
                    Q(status="judged")
                    & Q(annotator__isnull=True)
                    & Q(leased_at__isnull=True)
                    & Q(submitted_at__isnull=True)
                ),
                name="assignment_status_consistent",
            ),
        ]
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
            models.CheckConstraint(condition=Q(seconds_spent__gte=0), name="submission_seconds_non_negative"),
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
            models.CheckConstraint(condition=Q(version__gte=1), name="submission_revision_version_positive"),
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


class JudgeFilledRating(models.Model):
    """A rating a certified judge gave in a hybrid campaign, in place of the task's human raters. Kept apart from
    `Rating` so that no human agreement statistic can ever read it; exports list it with filled_by = judge."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="judge_filled_ratings")
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="judge_filled_ratings")
    response = models.ForeignKey(Response, on_delete=models.CASCADE, related_name="judge_filled_ratings")
    aspect = models.ForeignKey(Aspect, on_delete=models.CASCADE, related_name="judge_filled_ratings")
    value = models.FloatField()
    confidence = models.FloatField()
    judge_name = models.CharField(max_length=200)
    # The judge version's fingerprint; a string, because the annotations domain does not depend on the judge.
    judge_version = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("judge-filled rating")
        verbose_name_plural = _("judge-filled ratings")
        ordering = ["task", "response", "aspect"]
        constraints = [
            models.UniqueConstraint(fields=["task", "response", "aspect"], name="judge_filled_once_per_task_answer"),
            models.CheckConstraint(
                condition=Q(confidence__gte=0) & Q(confidence__lte=1), name="judge_filled_confidence_0_to_1"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.judge_name} on {self.response_id}/{self.aspect_id}: {self.value}"


from annotations.adjudication.models import *  # noqa: E402, F403 - adjudication belongs to this app
from annotations.gold.models import *  # noqa: E402, F403 - gold items belong to this app
from annotations.quality.models import *  # noqa: E402, F403 - rater exclusions belong to this app
from annotations.recruitment.models import *  # noqa: E402, F403 - recruitment belongs to this app
from annotations.research.models import *  # noqa: E402, F403 - annotator invitations belong to this app

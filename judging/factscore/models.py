"""FActScore storage: knowledge corpora, per-answer outcomes, atomic facts, verdicts, human fact review.

Imported at the end of judging/models.py, so these are models of the `judging` app.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _

from annotations.models import AssignmentStatus
from annotations.models.parts import at_least, known_choice, user_or_null, within
from annotations.models.slot_rows import SlotRow, slot_row_constraints
from annotations.slots import SlotPool
from judging.models.runs import ProviderCallRecord


class KnowledgeCorpus(models.Model):
    """An uploaded JSONL knowledge source for one dataset, split into passages at upload."""

    dataset = models.ForeignKey("annotations.Dataset", on_delete=models.CASCADE, related_name="knowledge_corpora")
    name = models.CharField(max_length=200)
    passage_tokens = models.PositiveIntegerField(default=256)
    n_documents = models.PositiveIntegerField(default=0)
    n_passages = models.PositiveIntegerField(default=0)
    # sha256 over the passages as stored: keys the per-process and on-disk BM25 index caches.
    fingerprint = models.CharField(max_length=64, blank=True)
    uploaded_by = user_or_null()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("knowledge corpus")
        ordering = ["dataset", "name"]
        constraints = [models.UniqueConstraint(fields=["dataset", "name"], name="knowledge_corpus_name_per_dataset")]

    def __str__(self) -> str:
        return self.name


class Passage(models.Model):
    corpus = models.ForeignKey(KnowledgeCorpus, on_delete=models.CASCADE, related_name="passages")
    position = models.PositiveIntegerField(help_text="Order in the corpus (documents in file order, then chunks).")
    document_id = models.CharField(max_length=500)
    title = models.CharField(max_length=500, blank=True)
    chunk = models.PositiveIntegerField(default=0)
    text = models.TextField()

    class Meta:
        verbose_name = _("passage")
        verbose_name_plural = _("passages")
        ordering = ["corpus", "position"]
        constraints = [
            models.UniqueConstraint(fields=["corpus", "position"], name="passage_position_unique_per_corpus"),
            models.UniqueConstraint(
                fields=["corpus", "document_id", "chunk"], name="passage_chunk_unique_per_document"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.title or self.document_id} #{self.chunk}"


class FactAnswerStage(models.TextChoices):
    PENDING = "pending"
    REFUSAL_CHECKED = "refusal_checked"
    DECOMPOSED = "decomposed"
    DONE = "done"
    FAILED = "failed"


class FactAnswerOutcome(models.TextChoices):
    PENDING = "pending"
    SCORED = "scored"
    REFUSED = "refused"
    NO_FACTS = "no_facts"
    FAILED = "failed"


class FactAnswer(models.Model):
    """A factscore run's work on one answer: the refusal outcome, the decomposition and the score."""

    run = models.ForeignKey("judging.JudgeRun", on_delete=models.CASCADE, related_name="fact_answers")
    response = models.ForeignKey("annotations.Response", on_delete=models.CASCADE, related_name="fact_answers")
    stage = models.CharField(max_length=20, choices=FactAnswerStage.choices, default=FactAnswerStage.PENDING)
    outcome = models.CharField(
        max_length=10,
        choices=FactAnswerOutcome.choices,
        default=FactAnswerOutcome.PENDING,
        help_text="scored, refused, no checkable facts, or failed (error_kind and error say why)",
    )
    is_refusal = models.BooleanField(null=True, blank=True)
    refusal_rule = models.CharField(max_length=50, blank=True)
    refusal_matched = models.TextField(blank=True)
    refusal_confirmed_by = models.CharField(max_length=10, blank=True, help_text='"rules" or "llm"')
    refusal_raw_output = models.TextField(blank=True)
    decomposition_raw_output = models.TextField(blank=True)
    decomposition_prompt_hash = models.CharField(max_length=64, blank=True)
    topic = models.CharField(max_length=500, blank=True)
    n_facts = models.PositiveIntegerField(default=0)
    facts_found = models.PositiveIntegerField(default=0, help_text="Facts the decomposition listed, before any cap.")
    facts_dropped = models.PositiveIntegerField(default=0, help_text="Facts cut by the parser's cap or max_facts.")
    caps = models.JSONField(default=list, blank=True, help_text="[{cap, limit, dropped or shortened}] as applied.")
    repeated_facts = models.PositiveIntegerField(
        default=0, help_text="Facts repeating an earlier one word for word (kept and counted, checked once)."
    )
    n_supported = models.PositiveIntegerField(default=0)
    n_unknown = models.PositiveIntegerField(default=0)
    score = models.FloatField(null=True, blank=True, help_text="supported / all facts; null for refusals or 0 facts")
    error_kind = models.CharField(max_length=40, blank=True)
    error = models.TextField(blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.FloatField(null=True, blank=True)
    calls = models.PositiveIntegerField(default=0)
    cache_hits = models.PositiveIntegerField(default=0)
    judgment = models.OneToOneField(
        "judging.Judgment", null=True, blank=True, on_delete=models.SET_NULL, related_name="fact_answer"
    )
    # sha256 of the judgment's raw output last projected here: re-projection is skipped when unchanged.
    trace_sha = models.CharField(max_length=64, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("fact answer")
        verbose_name_plural = _("fact answers")
        ordering = ["run", "response"]
        constraints = [
            models.UniqueConstraint(fields=["run", "response"], name="one_fact_answer_per_run_response"),
            known_choice("stage", FactAnswerStage.values, "fact_answer_stage_valid"),
            known_choice("outcome", FactAnswerOutcome.values, "fact_answer_outcome_valid"),
            models.CheckConstraint(
                condition=Q(facts_found=F("n_facts") + F("facts_dropped")), name="fact_answer_caps_add_up"
            ),
            models.CheckConstraint(condition=within("score", 0, 1, nullable=True), name="fact_answer_score_0_1"),
        ]

    def __str__(self) -> str:
        return f"factscore of response {self.response_id} in run {self.run_id}"


class FactOrigin(models.TextChoices):
    MODEL = "model"
    SPLIT = "split"
    REWORD = "reword"
    ADDED = "added"


class AtomicFact(models.Model):
    """One checkable statement of an answer.

    Model facts come from the run's decomposition. A reviewer's split, rewording or addition is a
    new row pointing at the original (`parent`), visible only in that reviewer's assignment; the
    original row is never changed.
    """

    answer = models.ForeignKey(FactAnswer, on_delete=models.CASCADE, related_name="facts")
    position = models.PositiveIntegerField()
    text = models.TextField()
    origin = models.CharField(max_length=10, choices=FactOrigin.choices, default=FactOrigin.MODEL)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="edits")
    review_assignment = models.ForeignKey(
        "judging.FactReviewAssignment", null=True, blank=True, on_delete=models.CASCADE, related_name="own_facts"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("atomic fact")
        verbose_name_plural = _("atomic facts")
        ordering = ["answer", "position", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["answer", "position"], condition=Q(origin="model"), name="model_fact_position_unique"
            ),
            known_choice("origin", FactOrigin.values, "atomic_fact_origin_valid"),
            models.CheckConstraint(
                condition=(Q(origin="model") & Q(review_assignment__isnull=True))
                | (~Q(origin="model") & Q(review_assignment__isnull=False)),
                name="human_facts_belong_to_a_review",
            ),
            models.CheckConstraint(
                condition=Q(origin__in=["model", "added"]) | Q(parent__isnull=False),
                name="split_or_reworded_fact_has_parent",
            ),
        ]

    def __str__(self) -> str:
        return self.text[:80]


class VerdictLabel(models.TextChoices):
    TRUE = "true"
    FALSE = "false"
    UNKNOWN = "unknown"


class FactVerdict(ProviderCallRecord):
    """The estimator's verdict on one model fact: label, evidence used and everything the call returned."""

    fact = models.OneToOneField(AtomicFact, on_delete=models.CASCADE, related_name="verdict")
    label = models.CharField(max_length=10, choices=VerdictLabel.choices)
    source = models.CharField(max_length=10, blank=True, help_text='"logprobs" or "text"')
    p_true = models.FloatField(null=True, blank=True)
    p_false = models.FloatField(null=True, blank=True)
    evidence_passage_ids = models.JSONField(default=list, help_text="Passage row ids or item knowledge keys, ranked.")
    evidence = models.JSONField(default=list, help_text="[{key, title, text, score}] as shown to the verifier.")
    title_matched = models.BooleanField(default=True)
    request_key = models.CharField(max_length=64, blank=True)
    latency_s = models.FloatField(
        null=True, blank=True, help_text="Seconds the provider took, from sending the request to its answer."
    )
    queue_wait_s = models.FloatField(
        null=True, blank=True, help_text="Seconds the call waited before being sent (concurrency slot, rpm/tpm)."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("fact verdict")
        verbose_name_plural = _("fact verdicts")
        constraints = [
            known_choice("label", VerdictLabel.values, "fact_verdict_label_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.label}: {self.fact}"


# --- human fact review ---------------------------------------------------------------------------


class FactReviewCampaign(models.Model):
    """Annotators label the facts of a factscore run's answers; each answer gets N distinct raters."""

    name = models.CharField(max_length=200)
    run = models.ForeignKey("judging.JudgeRun", on_delete=models.CASCADE, related_name="fact_review_campaigns")
    annotators = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="fact_review_campaigns")
    raters_per_answer = models.PositiveSmallIntegerField(default=3)
    lease_minutes = models.PositiveIntegerField(default=30)
    show_evidence = models.BooleanField(default=True)
    guidelines = models.TextField(blank=True)
    is_active = models.BooleanField(default=True)
    shuffle_seed = models.CharField(max_length=64, editable=False)
    created_by = user_or_null()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("fact review campaign")
        verbose_name_plural = _("fact review campaigns")
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=within("raters_per_answer", 1, 100), name="fact_review_raters_1_to_100"),
            at_least("lease_minutes", 1, "fact_review_lease_positive"),
            # Per run: a site-wide rule would tell one researcher which names another one's reviews use.
            models.UniqueConstraint(fields=["run", "name"], name="fact_review_name_unique_per_run"),
        ]

    def __str__(self) -> str:
        return self.name


class FactReviewTask(models.Model):
    campaign = models.ForeignKey(FactReviewCampaign, on_delete=models.CASCADE, related_name="tasks")
    answer = models.ForeignKey(FactAnswer, on_delete=models.CASCADE, related_name="review_tasks")
    position = models.PositiveIntegerField()

    class Meta:
        verbose_name = _("fact review task")
        verbose_name_plural = _("fact review tasks")
        ordering = ["campaign", "position"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "answer"], name="fact_review_task_unique_answer"),
            models.UniqueConstraint(fields=["campaign", "position"], name="fact_review_task_unique_position"),
        ]

    def __str__(self) -> str:
        return f"fact review task {self.position + 1} of {self.campaign}"


# The slot engine's states, shared with annotation campaigns.
FactReviewStatus = AssignmentStatus


class FactReviewAssignment(SlotRow):
    campaign = models.ForeignKey(FactReviewCampaign, on_delete=models.CASCADE, related_name="assignments")
    task = models.ForeignKey(FactReviewTask, on_delete=models.CASCADE, related_name="assignments")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    comment = models.TextField(blank=True)

    class Meta(SlotRow.Meta):
        verbose_name = _("fact review assignment")
        verbose_name_plural = _("fact review assignments")
        constraints = slot_row_constraints("fact_review", one_open_lease="fact_review_one_open_lease")
        indexes = [models.Index(fields=["campaign", "task_position", "slot"], name="fact_review_open_slots")]

    def __str__(self) -> str:
        return f"slot {self.slot} of {self.task}"


class HumanFactLabel(models.TextChoices):
    SUPPORTED = "supported"
    NOT_SUPPORTED = "not_supported"
    IRRELEVANT = "irrelevant"


class FactLabel(models.Model):
    """One reviewer's label on one fact (a model fact, or a fact of their own)."""

    assignment = models.ForeignKey(FactReviewAssignment, on_delete=models.CASCADE, related_name="labels")
    fact = models.ForeignKey(AtomicFact, on_delete=models.CASCADE, related_name="human_labels")
    label = models.CharField(max_length=15, choices=HumanFactLabel.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("fact label")
        verbose_name_plural = _("fact labels")
        constraints = [
            models.UniqueConstraint(fields=["assignment", "fact"], name="one_label_per_reviewer_fact"),
            known_choice("label", HumanFactLabel.values, "fact_label_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.label}: {self.fact_id}"


class FactReviewSkip(models.Model):
    """An annotator declined an answer; they are not offered it again and the slot returns to the pool."""

    task = models.ForeignKey(FactReviewTask, on_delete=models.CASCADE, related_name="skips")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    reason = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("fact review skip")
        verbose_name_plural = _("fact review skips")
        constraints = [models.UniqueConstraint(fields=["task", "annotator"], name="fact_review_skip_once")]

    def __str__(self) -> str:
        return f"{self.annotator_id} skipped {self.task_id}"


# Where fact review keeps its slots for the slot engine (annotations.slots), which annotation campaigns share.
FACT_REVIEW_SLOTS = SlotPool(
    campaign=FactReviewCampaign, task=FactReviewTask, slot=FactReviewAssignment, skip=FactReviewSkip
)

"""The judging app's models.

Why one module of this size: Django looks for an app's models in its `models` module, and the judges, runs,
judgments, the call cache and the certification rows refer to one another by foreign key; FActScore's models live in
their own package because that sub-app is one.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from django.db import models
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

if TYPE_CHECKING:
    from django.utils.functional import _StrOrPromise

    from judging.methods.judge_settings import JudgeSettings


class JudgeKind(models.TextChoices):
    IMPORTED = "imported"
    RUN = "run"
    DERIVED = "derived"


class Judge(models.Model):
    """Any source of automatic scores: imported auto_evals, a judge run made here, or a calibrated combination."""

    dataset = models.ForeignKey("annotations.Dataset", on_delete=models.CASCADE, related_name="judges")
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=10, choices=JudgeKind.choices)
    params = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("judge")
        verbose_name_plural = _("judges")
        ordering = ["dataset", "name"]
        constraints = [models.UniqueConstraint(fields=["dataset", "name"], name="judge_name_unique_per_dataset")]

    def __str__(self) -> str:
        return self.name


class JudgeScore(models.Model):
    """A judge's one score for an answer and aspect: what every statistic reads.

    Not a copy of `Judgment.score`: a judgment is one unit of a run (one sample, one presentation order of a pair),
    so a run's score for an answer is computed from several judgments (the mean over samples; for pairwise, the win
    rate over both orders) when the run stops or finishes (`judging.services.judge_run_write_scores`). Imported and
    derived judges have scores and no judgments, so their scores live only here. Statistics, certification and the
    export read this row; what needs the units (pairwise ranking, position consistency, confidence from samples,
    rationales) reads `Judgment.score`. A database trigger keeps a run's score an aggregate of its finished
    judgments: within the range of their scores for the answer and aspect, or a win rate in [0, 1] for pairwise."""

    judge = models.ForeignKey(Judge, on_delete=models.CASCADE, related_name="scores")
    response = models.ForeignKey("annotations.Response", on_delete=models.CASCADE, related_name="judge_scores")
    aspect_name = models.CharField(max_length=200)
    value = models.FloatField()

    class Meta:
        verbose_name = _("judge score")
        verbose_name_plural = _("judge scores")
        constraints = [
            models.UniqueConstraint(
                fields=["judge", "response", "aspect_name"], name="one_judge_score_per_answer_aspect"
            )
        ]
        indexes = [models.Index(fields=["judge", "aspect_name"])]

    def __str__(self) -> str:
        return f"{self.judge}: {self.aspect_name}={self.value}"


class JudgeConfig(models.Model):
    """A saved judge configuration. Editing saves a new version; runs keep a snapshot."""

    name = models.CharField(max_length=150)
    version = models.PositiveIntegerField(default=1)
    config = models.JSONField(help_text="A validated judge configuration; never contains a key, only api_key_env.")
    owner = models.ForeignKey(
        "auth.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="judge_configs"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("judge config")
        verbose_name_plural = _("judge configs")
        ordering = ["name", "-version"]
        constraints = [
            # Versions count per owner, so a researcher learns nothing of another one's config names; ownerless
            # configs share one namespace (a partial index, as SQLite has no NULLS NOT DISTINCT).
            models.UniqueConstraint(fields=["owner", "name", "version"], name="judge_config_version_unique_per_owner"),
            models.UniqueConstraint(
                fields=["name", "version"],
                condition=models.Q(owner__isnull=True),
                name="judge_config_version_unique_without_owner",
            ),
            models.CheckConstraint(condition=models.Q(version__gte=1), name="judge_config_version_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"

    @cached_property
    def judge_settings(self) -> JudgeSettings:
        from judging.methods.judge_settings import JudgeSettings  # noqa: PLC0415 - pydantic, loaded on first use

        return JudgeSettings.from_stored(self.config)


class RunStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    STOPPED_BUDGET = "stopped_budget"


ACTIVE_RUN_STATUSES = (RunStatus.QUEUED, RunStatus.RUNNING)
ENDED_RUN_STATUSES = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.STOPPED_BUDGET)


def settled_runs_q() -> models.Q:
    """Ended runs whose scores are written and whose version is fixed (a version, or the reason they have none):
    both are written in the transaction that ends a run, so only a run stopped at its budget while calls were in
    flight (until its slices stop), or one that ended before the end was one transaction, waits for the periodic
    upkeep to settle it."""
    return models.Q(status__in=ENDED_RUN_STATUSES) & (models.Q(version__isnull=False) | ~models.Q(version_problem=""))


# The words pages show for a status. Kept beside the choices rather than in them: the stored values and the
# migrations stay as they are, and the pages still read the reader's language.
RUN_STATUS_LABELS: dict[str, _StrOrPromise] = {
    RunStatus.QUEUED: pgettext_lazy("judge run status", "queued"),
    RunStatus.RUNNING: pgettext_lazy("judge run status", "running"),
    RunStatus.SUCCEEDED: pgettext_lazy("judge run status", "succeeded"),
    RunStatus.FAILED: pgettext_lazy("judge run status", "failed"),
    RunStatus.CANCELLED: pgettext_lazy("judge run status", "cancelled"),
    RunStatus.STOPPED_BUDGET: pgettext_lazy("judge run status", "stopped at the budget"),
}


class JudgeRun(models.Model):
    """One execution of a judge config over a dataset (or a campaign's answers)."""

    judge = models.OneToOneField(Judge, on_delete=models.CASCADE, related_name="run")
    dataset = models.ForeignKey("annotations.Dataset", on_delete=models.CASCADE, related_name="judge_runs")
    campaign = models.ForeignKey(
        "annotations.Campaign", null=True, blank=True, on_delete=models.SET_NULL, related_name="judge_runs"
    )
    config = models.ForeignKey(JudgeConfig, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs")
    config_snapshot = models.JSONField(help_text="The validated config as launched; never changed afterwards.")
    method = models.CharField(max_length=30)
    limit = models.PositiveIntegerField(null=True, blank=True)
    status = models.CharField(max_length=20, choices=RunStatus.choices, default=RunStatus.QUEUED)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    parse_errors = models.PositiveIntegerField(default=0)
    cache_hits = models.PositiveIntegerField(default=0)
    calls = models.PositiveIntegerField(default=0, help_text="Provider requests sent, retries included.")
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    cost_usd = models.FloatField(default=0.0, help_text="Sum of the known costs.")
    unpriced_calls = models.PositiveIntegerField(default=0, help_text="Calls whose cost litellm does not know.")
    logprob_fallbacks = models.PositiveIntegerField(default=0)
    sampled_fallbacks = models.PositiveIntegerField(
        default=0,
        help_text="Judgments scored from replies sampled above temperature 0 because the provider returned no "
        "log-probabilities (counted among the logprob fallbacks too).",
    )
    position_consistency = models.FloatField(null=True, blank=True)
    error_summary = models.JSONField(default=dict, blank=True)
    notes = models.TextField(blank=True)
    launched_by = models.ForeignKey(
        "auth.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="judge_runs"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    watch_until = models.DateTimeField(null=True, blank=True)
    results_projected_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="FActScore: when the last projection of the judgments into facts and scores began; judgments "
        "finished later are not in the results yet.",
    )
    results_error = models.TextField(
        blank=True, help_text="FActScore: why the last projection failed; the periodic projection retries it."
    )
    prompt_language = models.CharField(
        max_length=10,
        blank=True,
        help_text="The language of the built-in prompts, chosen once at launch (auto: from the dataset's questions); "
        "blank when the config asks for per-item detection.",
    )
    estimate = models.JSONField(
        default=dict,
        blank=True,
        help_text="The launch estimate (calls and cost, expected and worst case), kept to compare with the bill.",
    )
    start_unsent_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the start of this queued run could not be handed to the broker; the periodic nudge and a "
        "worker that reconnects start it.",
    )
    version = models.ForeignKey(
        "judging.JudgeVersion",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="runs",
        help_text="The judge version these scores come from, set when the run ends; empty while it runs, and when "
        "the provider named more than one model during the run (see version_problem).",
    )
    version_problem = models.TextField(
        blank=True,
        help_text="Why the run has no version: its replies named more than one provider model, so its scores "
        "belong to no single version and no per-version statistic counts them.",
    )

    class Meta:
        verbose_name = _("judge run")
        verbose_name_plural = _("judge runs")
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(condition=models.Q(status__in=RunStatus.values), name="judge_run_status_valid"),
            models.CheckConstraint(condition=models.Q(done__lte=models.F("total")), name="judge_run_done_within_total"),
        ]

    def __str__(self) -> str:
        return self.judge.name

    @property
    def status_label(self) -> str:
        return str(RUN_STATUS_LABELS.get(self.status, self.status))

    @cached_property
    def judge_settings(self) -> JudgeSettings:
        from judging.methods.judge_settings import JudgeSettings  # noqa: PLC0415 - pydantic, loaded on first use

        return JudgeSettings.from_stored(self.config_snapshot)

    @property
    def name(self) -> str:
        return self.judge.name

    @property
    def cost_known(self) -> bool:
        return self.unpriced_calls == 0

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE_RUN_STATUSES

    @property
    def is_settled(self) -> bool:
        """Ended, with its scores written and its version fixed (the rule of `settled_runs_q`)."""
        return self.status in ENDED_RUN_STATUSES and (self.version_id is not None or bool(self.version_problem))


class JudgmentStatus(models.TextChoices):
    PENDING = "pending"
    CLAIMED = "claimed"
    DONE = "done"
    FAILED = "failed"


class Judgment(models.Model):
    """One unit of a run: an answer (or ordered pair of answers), an aspect and a sample index."""

    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="judgments")
    response = models.ForeignKey("annotations.Response", on_delete=models.CASCADE, related_name="judgments")
    other_response = models.ForeignKey(
        "annotations.Response", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    aspect_name = models.CharField(max_length=200)
    sample = models.PositiveSmallIntegerField(default=0)
    pair_order = models.PositiveSmallIntegerField(default=0, help_text="0: response shown first; 1: swapped.")
    status = models.CharField(max_length=10, choices=JudgmentStatus.choices, default=JudgmentStatus.PENDING)
    claim_token = models.CharField(max_length=32, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    request_key = models.CharField(max_length=64, blank=True, help_text="Cache key of the first request.")
    prompt_hash = models.CharField(max_length=64, blank=True)
    raw_output = models.TextField(blank=True)
    score = models.FloatField(null=True, blank=True)
    verdict = models.CharField(max_length=4, blank=True, help_text="Pairwise: A, B or tie as shown to the judge.")
    reasoning = models.TextField(blank=True)
    summary = models.TextField(blank=True)
    distribution = models.JSONField(
        null=True, blank=True, help_text="G-Eval: probability of each scale value at the score token, as used."
    )
    logprob_fallback = models.BooleanField(default=False)
    logprob_fallback_reason = models.TextField(
        blank=True,
        help_text="Why the log-probabilities were not used, and whether the parsed score or sampled replies stand "
        "in for them.",
    )
    score_mode = models.CharField(
        max_length=12,
        blank=True,
        help_text="What produced the score: weighted or top-token (log-probabilities at the score token), sampled "
        "(the mean score of replies sampled when the provider returned no log-probabilities), parsed (the score "
        "the output states) or metric.",
    )
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.FloatField(null=True, blank=True)
    latency_s = models.FloatField(
        null=True, blank=True, help_text="Seconds the provider took, from sending each request to its answer."
    )
    queue_wait_s = models.FloatField(
        null=True,
        blank=True,
        help_text="Seconds the calls waited before being sent: for a concurrency slot and for room under rpm/tpm.",
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    lost_calls = models.PositiveSmallIntegerField(
        default=0,
        help_text="Requests earlier holders of this unit sent without storing it (a worker died, or its lease ran "
        "out while the database was away), as recorded when each went onto the connection: counted in the run's "
        "calls, and their estimated cost in lost_cost_usd.",
    )
    lost_cost_usd = models.FloatField(
        default=0.0,
        help_text="Each lost call estimated from the unit's first request (prompt tokens and max_tokens); part of "
        "the run's cost.",
    )
    cache_hit = models.BooleanField(default=False)
    provider_model = models.CharField(
        max_length=200,
        blank=True,
        help_text="The model identifier the provider's reply named (its `model` field); with several calls, the "
        "distinct names joined by commas.",
    )
    error_kind = models.CharField(max_length=40, blank=True)
    error = models.TextField(blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("judgment")
        verbose_name_plural = _("judgments")
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "response", "aspect_name", "sample", "pair_order"],
                condition=models.Q(other_response__isnull=True),
                name="one_judgment_per_unit",
            ),
            models.UniqueConstraint(
                fields=["run", "response", "other_response", "aspect_name", "sample", "pair_order"],
                condition=models.Q(other_response__isnull=False),
                name="one_pairwise_judgment_per_unit",
            ),
            models.CheckConstraint(condition=models.Q(status__in=JudgmentStatus.values), name="judgment_status_valid"),
            models.CheckConstraint(
                condition=~models.Q(status="claimed") | models.Q(lease_until__isnull=False),
                name="claimed_judgment_has_lease",
            ),
            models.CheckConstraint(condition=models.Q(pair_order__lte=1), name="judgment_pair_order_0_or_1"),
            models.CheckConstraint(condition=models.Q(lost_cost_usd__gte=0), name="judgment_lost_cost_not_negative"),
        ]
        indexes = [
            models.Index(fields=["run", "status", "request_key"]),
            models.Index(fields=["claim_token"]),
        ]

    def __str__(self) -> str:
        return f"judgment {self.pk} of run {self.run_id}"


class ProviderSend(models.Model):
    """A provider request a slice handed to the connection for a unit, not yet counted in its run's calls.

    The slice that stores the unit counts its own requests in the unit's attempts and every other holder's recorded
    here as the unit's lost calls, then deletes them, in the same transaction as the result: a row exists exactly
    for a request that was sent and is not counted yet. Each row carries the attempt's own id, so a write repeated
    after a dropped connection cannot record one request twice."""

    # No database constraint: a slice may still record a send of a unit whose run was just deleted, and that write
    # must not fail the slice's whole batch. Deleting the unit still deletes its rows (the ORM cascades).
    judgment = models.ForeignKey(Judgment, on_delete=models.CASCADE, db_constraint=False, related_name="+")
    attempt_id = models.CharField(max_length=32, unique=True)
    holder = models.CharField(max_length=32, help_text="Claim token of the slice that sent the request.")
    sent_at = models.DateTimeField()

    class Meta:
        verbose_name = _("provider request not yet counted")
        verbose_name_plural = _("provider requests not yet counted")
        constraints = [
            models.CheckConstraint(condition=~models.Q(holder=""), name="provider_send_has_holder"),
            models.CheckConstraint(condition=~models.Q(attempt_id=""), name="provider_send_has_attempt_id"),
        ]

    def __str__(self) -> str:
        return f"request {self.attempt_id} of judgment {self.judgment_id}"


class CachedCompletion(models.Model):
    """Provider replies keyed by (model, api_base, messages, params, sample): shared by every process,
    so an identical request is never sent twice and re-running a config costs nothing.

    Each researcher has a cache of their own (the runs they launch; runs launched from the command line share the
    ownerless one): a shared cache would tell one researcher, through an estimate's cached calls or a free run,
    which prompts another one has already sent."""

    owner = models.ForeignKey(
        "auth.User", null=True, blank=True, on_delete=models.CASCADE, related_name="cached_completions"
    )
    key = models.CharField(max_length=64)
    model = models.CharField(max_length=200)
    payload = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("cached completion")
        verbose_name_plural = _("cached completions")
        constraints = [
            models.UniqueConstraint(fields=["owner", "key"], name="cached_completion_unique_per_owner"),
            models.UniqueConstraint(
                fields=["key"], condition=models.Q(owner__isnull=True), name="cached_completion_unique_without_owner"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.model} {self.key[:12]}"


class WorkerPing(models.Model):
    """Written by a worker to prove a task made the round trip (health checks and the Celery round-trip tests)."""

    token = models.CharField(max_length=64, unique=True)
    answered_at = models.DateTimeField(auto_now_add=True)
    worker_hostname = models.CharField(max_length=200, blank=True)

    class Meta:
        verbose_name = _("worker ping")
        verbose_name_plural = _("worker pings")

    def __str__(self) -> str:
        return self.token


class JudgeVersion(models.Model):
    """What produced a set of judge scores: the model as the provider names it in its replies, the prompt template,
    the rubric text, the method and the scoring options, hashed into a fingerprint. Any change is another version."""

    fingerprint = models.CharField(max_length=64, unique=True)
    config_name = models.CharField(max_length=150)
    provider_model = models.CharField(max_length=200)
    material = models.JSONField(help_text="Everything the fingerprint hashes, to show what differs between versions.")
    config_snapshot = models.JSONField(help_text="The config of the first run of this version, to run it again.")
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="children",
        help_text="The version this one was taught rated examples from, when it was made by teaching.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("judge version")
        verbose_name_plural = _("judge versions")
        ordering = ["config_name", "created_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(fingerprint__regex=r"^[0-9a-f]{64}$"), name="judge_version_fingerprint_sha256"
            )
        ]

    def __str__(self) -> str:
        return f"{self.config_name} @ {self.provider_model} [{self.fingerprint[:12]}]"

    @property
    def short(self) -> str:
        return self.fingerprint[:12]


class ReferenceSet(models.Model):
    """Human ratings named as the yardstick for judges: a snapshot taken when named, so later edits of the ratings,
    new ratings or deleted ones never change what a certificate was measured against."""

    name = models.CharField(max_length=200)
    dataset = models.ForeignKey("annotations.Dataset", on_delete=models.CASCADE, related_name="reference_sets")
    campaign = models.ForeignKey(
        "annotations.Campaign", null=True, blank=True, on_delete=models.SET_NULL, related_name="reference_sets"
    )
    owner = models.ForeignKey("auth.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    frozen_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("reference set")
        verbose_name_plural = _("reference sets")
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "name"], name="reference_set_name_unique_per_dataset")
        ]

    def __str__(self) -> str:
        return self.name


class FrozenRowError(RuntimeError):
    """A reference rating is a snapshot: it is written once, with its set, and never changed."""


class ReferenceRating(models.Model):
    """One human rating as it was when its reference set was named."""

    reference_set = models.ForeignKey(ReferenceSet, on_delete=models.CASCADE, related_name="ratings")
    response = models.ForeignKey("annotations.Response", on_delete=models.CASCADE, related_name="+")
    aspect_name = models.CharField(max_length=200)
    aspect_level = models.CharField(max_length=20)
    rater_key = models.CharField(max_length=220)
    value = models.FloatField()

    class Meta:
        verbose_name = _("reference rating")
        verbose_name_plural = _("reference ratings")
        constraints = [
            models.UniqueConstraint(
                fields=["reference_set", "response", "aspect_name", "rater_key"], name="one_reference_rating_per_unit"
            )
        ]

    def __str__(self) -> str:
        return f"{self.reference_set_id}: {self.rater_key} {self.aspect_name}={self.value}"

    def save(self, *args: object, **kwargs: object) -> None:
        if self.pk is not None:
            raise FrozenRowError("a reference rating is frozen with its set and cannot be changed")
        super().save(*args, **kwargs)  # type: ignore[arg-type]


class CertificateStatus(models.TextChoices):
    PENDING = "pending"
    EVALUATING = "evaluating"
    PASSED = "passed"
    FAILED = "failed"
    UNDEFINED = "undefined"
    SUSPENDED = "suspended"


class ClaimedEvaluation(models.Model):
    """An evaluation a worker claims once its runs have ended: a certificate, a drift check or a teaching. The claim
    stamp lets the stale-evaluation reclaim hand one back whose worker died, and an evaluation writes its result only
    while its own claim still holds."""

    created_at = models.DateTimeField(auto_now_add=True)
    evaluation_claimed_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When a worker claimed the evaluation; one that has stayed claimed too long is handed to another.",
    )

    class Meta:
        abstract = True


class Certificate(ClaimedEvaluation):
    """The alternative-annotator test of one judge version on a reference set, per aspect; the version counts as
    certified only while a certificate of it has passed and is not suspended."""

    version = models.ForeignKey(JudgeVersion, on_delete=models.CASCADE, related_name="certificates")
    reference_set = models.ForeignKey(ReferenceSet, on_delete=models.PROTECT, related_name="certificates")
    run = models.OneToOneField(JudgeRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="certificate")
    status = models.CharField(max_length=12, choices=CertificateStatus.choices, default=CertificateStatus.PENDING)
    epsilon = models.FloatField()
    q = models.FloatField()
    fingerprint = models.CharField(max_length=64, help_text="The version's fingerprint, kept with the verdict.")
    results = models.JSONField(default=dict, blank=True, help_text="Per aspect: n, ε, ω, ρ and the verdict.")
    reason = models.TextField(blank=True)
    requested_by = models.ForeignKey(
        "auth.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="judge_certificates"
    )
    certified_at = models.DateTimeField(null=True, blank=True)
    suspended_at = models.DateTimeField(null=True, blank=True)
    suspension_reason = models.TextField(blank=True)

    class Meta:
        verbose_name = _("certificate")
        verbose_name_plural = _("certificates")
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=CertificateStatus.values), name="certificate_status_valid"
            ),
            models.CheckConstraint(
                condition=~models.Q(status="suspended")
                | (models.Q(suspended_at__isnull=False) & ~models.Q(suspension_reason="")),
                name="suspended_certificate_has_reason",
            ),
            models.CheckConstraint(
                condition=models.Q(epsilon__gte=0) & models.Q(epsilon__lt=1) & models.Q(q__gt=0) & models.Q(q__lt=1),
                name="certificate_epsilon_q_in_range",
            ),
        ]

    def __str__(self) -> str:
        return f"certificate {self.pk} of {self.version}: {self.status}"


class DriftCheckStatus(models.TextChoices):
    RUNNING = "running"
    EVALUATING = "evaluating"
    DONE = "done"


class DriftCheck(ClaimedEvaluation):
    """A re-judging of a seeded random sample of a certificate's reference set, compared with the certified scores."""

    certificate = models.ForeignKey(Certificate, on_delete=models.CASCADE, related_name="drift_checks")
    run = models.OneToOneField(JudgeRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="drift_check")
    seed = models.BigIntegerField()
    sample_size = models.PositiveIntegerField()
    status = models.CharField(max_length=12, choices=DriftCheckStatus.choices, default=DriftCheckStatus.RUNNING)
    drifted = models.BooleanField(null=True, blank=True)
    outcome = models.JSONField(default=dict, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("drift check")
        verbose_name_plural = _("drift checks")
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(condition=models.Q(status__in=DriftCheckStatus.values), name="drift_status_valid"),
            models.UniqueConstraint(
                fields=["certificate"],
                condition=~models.Q(status="done"),
                name="one_open_drift_check_per_certificate",
            ),
        ]

    def __str__(self) -> str:
        return f"drift check {self.pk} of certificate {self.certificate_id}"


class JudgeExemplar(models.Model):
    """An answer shown to a judge version as a rated example. The database refuses any score of that version for
    the answer (a trigger on judge scores and on a run's version), so the example never counts in the version's
    certification or statistics."""

    version = models.ForeignKey(JudgeVersion, on_delete=models.CASCADE, related_name="exemplars")
    response = models.ForeignKey("annotations.Response", on_delete=models.CASCADE, related_name="+")
    aspect_name = models.CharField(max_length=200)
    label = models.FloatField(help_text="The raters' consensus score shown with the example.")

    class Meta:
        verbose_name = _("judge exemplar")
        verbose_name_plural = _("judge exemplars")
        constraints = [
            models.UniqueConstraint(
                fields=["version", "response", "aspect_name"], name="one_exemplar_per_answer_aspect"
            )
        ]

    def __str__(self) -> str:
        return f"exemplar {self.response_id} of {self.version_id}: {self.aspect_name}={self.label}"


class TeachingStatus(models.TextChoices):
    RUNNING = "running"
    EVALUATING = "evaluating"
    DONE = "done"


class TeachingDecision(models.TextChoices):
    KEPT = "kept"
    REJECTED = "rejected"
    UNDEFINED = "undefined"


class JudgeTeaching(ClaimedEvaluation):
    """A judge version taught rated examples from a reference set: the old version and the taught one judged on the
    same held-out answers, and the judge-comparison test's decision whether the taught version is kept."""

    parent = models.ForeignKey(JudgeVersion, on_delete=models.CASCADE, related_name="teachings")
    reference_set = models.ForeignKey(ReferenceSet, on_delete=models.PROTECT, related_name="teachings")
    per_level = models.PositiveSmallIntegerField(help_text="Exemplars asked for per score level and aspect.")
    seed = models.BigIntegerField(help_text="Breaks ties between equally agreed answers.")
    alpha = models.FloatField(help_text="The significance level of the comparison.")
    selection = models.JSONField(
        default=dict, help_text="Per aspect: the exemplars chosen, their agreement, and the levels that had none."
    )
    held_out = models.PositiveIntegerField(help_text="Reference answers left after removing the exemplars.")
    parent_run = models.OneToOneField(
        JudgeRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="teaching_as_parent"
    )
    taught_run = models.OneToOneField(
        JudgeRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="teaching_as_taught"
    )
    taught_version = models.ForeignKey(
        JudgeVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="taught_by"
    )
    status = models.CharField(max_length=12, choices=TeachingStatus.choices, default=TeachingStatus.RUNNING)
    decision = models.CharField(max_length=10, choices=TeachingDecision.choices, blank=True)
    evidence = models.JSONField(default=dict, blank=True, help_text="Per aspect: n, both r, Williams's t and p.")
    reason = models.TextField(blank=True)
    requested_by = models.ForeignKey(
        "auth.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="judge_teachings"
    )
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("judge teaching")
        verbose_name_plural = _("judge teachings")
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(condition=models.Q(status__in=TeachingStatus.values), name="teaching_status_valid"),
            models.CheckConstraint(
                condition=(
                    models.Q(status="done") & models.Q(decision__in=TeachingDecision.values) & ~models.Q(reason="")
                )
                | (~models.Q(status="done") & models.Q(decision="")),
                name="teaching_decided_when_done_with_reason",
            ),
            models.CheckConstraint(
                condition=models.Q(alpha__gt=0) & models.Q(alpha__lt=1) & models.Q(per_level__gte=1),
                name="teaching_alpha_and_per_level_in_range",
            ),
        ]

    def __str__(self) -> str:
        return f"teaching {self.pk} of {self.parent}: {self.decision or self.status}"


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
    created_by = models.ForeignKey("auth.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    run = models.OneToOneField(
        JudgeRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="hybrid_calibration"
    )
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
            models.CheckConstraint(
                condition=models.Q(apply_status__in=HybridApplyStatus.values), name="hybrid_apply_status_valid"
            ),
            # A campaign hands its tasks to a judge once: applying again is refused, not repeated.
            models.UniqueConstraint(
                fields=["campaign"], condition=~models.Q(apply_status=""), name="hybrid_one_application_per_campaign"
            ),
        ]

    def __str__(self) -> str:
        return f"hybrid calibration {self.pk} of {self.campaign_id}"


from judging.factscore.models import *  # noqa: E402, F403 - FActScore models belong to this app

from functools import cached_property

from django.db import models

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
        ordering = ["dataset", "name"]
        constraints = [models.UniqueConstraint(fields=["dataset", "name"], name="judge_name_unique_per_dataset")]

    def __str__(self) -> str:
        return self.name


class JudgeScore(models.Model):
    judge = models.ForeignKey(Judge, on_delete=models.CASCADE, related_name="scores")
    response = models.ForeignKey("annotations.Response", on_delete=models.CASCADE, related_name="judge_scores")
    aspect_name = models.CharField(max_length=200)
    value = models.FloatField()

    class Meta:
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
        ordering = ["name", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["name", "version"], name="judge_config_version_unique"),
            models.CheckConstraint(condition=models.Q(version__gte=1), name="judge_config_version_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"

    @cached_property
    def judge_settings(self) -> JudgeSettings:
        return JudgeSettings.from_stored(self.config)


class RunStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    STOPPED_BUDGET = "stopped_budget"


ACTIVE_RUN_STATUSES = (RunStatus.QUEUED, RunStatus.RUNNING)


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

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(condition=models.Q(status__in=RunStatus.values), name="judge_run_status_valid"),
            models.CheckConstraint(condition=models.Q(done__lte=models.F("total")), name="judge_run_done_within_total"),
        ]

    def __str__(self) -> str:
        return self.judge.name

    @cached_property
    def judge_settings(self) -> JudgeSettings:
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
        help_text="Calls an earlier holder of this unit may have had in flight when it stopped (its worker died, or "
        "its lease ran out while the database was away): their answers never arrived, so they are counted in the "
        "run's calls, and their estimated cost in lost_cost_usd.",
    )
    lost_cost_usd = models.FloatField(
        default=0.0, help_text="Estimated from the request's prompt tokens and max_tokens; part of the run's cost."
    )
    cache_hit = models.BooleanField(default=False)
    error_kind = models.CharField(max_length=40, blank=True)
    error = models.TextField(blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
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


class CachedCompletion(models.Model):
    """Provider replies keyed by (model, api_base, messages, params, sample): shared by every process,
    so an identical request is never sent twice and re-running a config costs nothing."""

    key = models.CharField(max_length=64, unique=True)
    model = models.CharField(max_length=200)
    payload = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.model} {self.key[:12]}"


class WorkerPing(models.Model):
    """Written by a worker to prove a task made the round trip (health checks and the Celery round-trip tests)."""

    token = models.CharField(max_length=64, unique=True)
    answered_at = models.DateTimeField(auto_now_add=True)
    worker_hostname = models.CharField(max_length=200, blank=True)

    def __str__(self) -> str:
        return self.token


from judging.factscore.models import *  # noqa: E402, F403 - FActScore models belong to this app

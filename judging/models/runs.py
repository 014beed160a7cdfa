"""Judges, their scores and configs, runs, the judgments of a run, and the provider-call plumbing around them (the
requests handed to the connection, the reply cache, the worker pings)."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

from django.db import models
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from annotations.models.parts import NewestFirst, at_least, known_choice, not_blank, unique_per_owner, user_or_null

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
    owner = user_or_null("judge_configs")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("judge config")
        verbose_name_plural = _("judge configs")
        ordering = ["name", "-version"]
        constraints = [
            *unique_per_owner(
                ["name", "version"],
                per_owner="judge_config_version_unique_per_owner",
                without_owner="judge_config_version_unique_without_owner",
            ),
            at_least("version", 1, "judge_config_version_positive"),
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


class JudgeRun(NewestFirst):
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
    launched_by = user_or_null("judge_runs")
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

    class Meta(NewestFirst.Meta):
        verbose_name = _("judge run")
        verbose_name_plural = _("judge runs")
        constraints = [
            known_choice("status", RunStatus.values, "judge_run_status_valid"),
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


def run_or_null(related_name: str) -> models.OneToOneField[Any, Any]:
    """The run an evaluation or calibration launched; the row stays, without it, when the run is deleted."""
    return models.OneToOneField(JudgeRun, null=True, blank=True, on_delete=models.SET_NULL, related_name=related_name)


class JudgmentStatus(models.TextChoices):
    PENDING = "pending"
    CLAIMED = "claimed"
    DONE = "done"
    FAILED = "failed"


class ProviderCallRecord(models.Model):
    """What a unit of work sent to a provider brought back and cost: the reply as it came, the prompt's hash, the
    tokens and known cost, the attempts, whether the reply cache answered, and the error that ended it. A run's
    judgments and FActScore's fact verdicts keep the same record."""

    raw_output = models.TextField(blank=True)
    prompt_hash = models.CharField(max_length=64, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.FloatField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    cache_hit = models.BooleanField(default=False)
    error_kind = models.CharField(max_length=40, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        abstract = True


class Judgment(ProviderCallRecord):
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
    score = models.FloatField(null=True, blank=True)
    verdict = models.CharField(max_length=4, blank=True, help_text="Pairwise: A, B or tie as shown to the judge.")
    reasoning = models.TextField(blank=True)
    summary = models.TextField(blank=True)
    distribution = models.JSONField(
        null=True, blank=True, help_text="G-Eval: probability of each scale value at the score token, as used."
    )
    spans = models.JSONField(
        null=True,
        blank=True,
        help_text="Error spans: each error the judge reported (quote, category, severity) with its offsets in the "
        "answer when the quote occurs there exactly once, else its status (not found, ambiguous) and no offsets.",
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
    latency_s = models.FloatField(
        null=True, blank=True, help_text="Seconds the provider took, from sending each request to its answer."
    )
    queue_wait_s = models.FloatField(
        null=True,
        blank=True,
        help_text="Seconds the calls waited before being sent: for a concurrency slot and for room under rpm/tpm.",
    )
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
    provider_model = models.CharField(
        max_length=200,
        blank=True,
        help_text="The model identifier the provider's reply named (its `model` field); with several calls, the "
        "distinct names joined by commas.",
    )
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
            known_choice("status", JudgmentStatus.values, "judgment_status_valid"),
            models.CheckConstraint(
                condition=~models.Q(status="claimed") | models.Q(lease_until__isnull=False),
                name="claimed_judgment_has_lease",
            ),
            models.CheckConstraint(condition=models.Q(pair_order__lte=1), name="judgment_pair_order_0_or_1"),
            at_least("lost_cost_usd", 0, "judgment_lost_cost_not_negative"),
            # An MQM score is computed from the errors the judgment keeps; a score without them could not be checked.
            models.CheckConstraint(
                condition=~models.Q(score_mode="mqm") | models.Q(spans__isnull=False),
                name="mqm_judgment_keeps_its_spans",
            ),
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
            not_blank("holder", "provider_send_has_holder"),
            not_blank("attempt_id", "provider_send_has_attempt_id"),
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
            *unique_per_owner(
                ["key"],
                per_owner="cached_completion_unique_per_owner",
                without_owner="cached_completion_unique_without_owner",
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

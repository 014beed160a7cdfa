"""Reads of the judge engine, always scoped by the requesting user's datasets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Avg, Count, Q, QuerySet
from django.shortcuts import get_object_or_404
from django.utils import timezone
from django.utils.translation import gettext as _

from annotations.models import AssignmentStatus, Campaign, Dataset, Item, Rater, Rating, Response
from annotations.selectors import datasets_for_user
from judging.llm.ratelimit import calls_in_flight, run_scope
from judging.models import JudgeConfig, JudgeRun, Judgment, JudgmentStatus

User = AbstractBaseUser | AnonymousUser


def judge_configs_for_user(user: User) -> QuerySet[JudgeConfig]:
    """Researchers see their own configs and those without an owner (made from the command line)."""
    if not user.is_authenticated or not getattr(user, "is_staff", False):
        return JudgeConfig.objects.none()
    if getattr(user, "is_superuser", False):
        return JudgeConfig.objects.all()
    return JudgeConfig.objects.filter(Q(owner=user) | Q(owner__isnull=True))


def judge_config_for_user_or_404(user: User, pk: int) -> JudgeConfig:
    return get_object_or_404(judge_configs_for_user(user), pk=pk)


def judge_runs_for_user(user: User) -> QuerySet[JudgeRun]:
    return JudgeRun.objects.filter(dataset__in=datasets_for_user(user)).select_related("judge", "dataset", "version")


def judge_run_for_user_or_404(user: User, pk: int) -> JudgeRun:
    return get_object_or_404(judge_runs_for_user(user), pk=pk)


def campaigns_of_dataset(dataset_id: int) -> QuerySet[Campaign]:
    return Campaign.objects.filter(dataset_id=dataset_id).order_by("name")


@dataclass(frozen=True)
class CampaignFill:
    campaign: Campaign
    slots_total: int
    slots_submitted: int
    slots_leased: int
    # Slots of tasks a certified judge rated in a hybrid campaign: no person fills them, so they are not in the total.
    slots_judged: int = 0

    @property
    def percent(self) -> float:
        return round(100.0 * self.slots_submitted / self.slots_total, 1) if self.slots_total else 100.0


def campaign_fills_of_dataset(dataset: Dataset) -> list[CampaignFill]:
    """Each campaign of the dataset with how many of its rater slots are submitted and held, in one query."""
    campaigns = (
        Campaign.objects.filter(dataset=dataset)
        .order_by("name")
        .annotate(
            slots_total=Count("assignments", filter=~Q(assignments__status=AssignmentStatus.JUDGED)),
            slots_judged=Count("assignments", filter=Q(assignments__status=AssignmentStatus.JUDGED)),
            slots_submitted=Count("assignments", filter=Q(assignments__status=AssignmentStatus.SUBMITTED)),
            slots_leased=Count("assignments", filter=Q(assignments__status=AssignmentStatus.LEASED)),
        )
    )
    return [
        CampaignFill(
            campaign=campaign,
            slots_total=campaign.slots_total,  # type: ignore[attr-defined]
            slots_submitted=campaign.slots_submitted,  # type: ignore[attr-defined]
            slots_leased=campaign.slots_leased,  # type: ignore[attr-defined]
            slots_judged=campaign.slots_judged,  # type: ignore[attr-defined]
        )
        for campaign in campaigns
    ]


def judge_runs_of_dataset(dataset: Dataset) -> QuerySet[JudgeRun]:
    return JudgeRun.objects.filter(dataset=dataset).select_related("judge", "campaign").order_by("-created_at")


@dataclass(frozen=True)
class DatasetCounts:
    items: int
    answers: int
    raters_imported: int
    raters_app: int
    ratings: int


def dataset_counts(dataset: Dataset) -> DatasetCounts:
    raters = Rater.objects.filter(dataset=dataset).aggregate(
        imported=Count("pk", filter=Q(user__isnull=True)), app=Count("pk", filter=Q(user__isnull=False))
    )
    return DatasetCounts(
        items=Item.objects.filter(dataset=dataset).count(),
        answers=Response.objects.filter(turn__item__dataset=dataset).count(),
        raters_imported=raters["imported"],
        raters_app=raters["app"],
        # Ratings of the dataset's answers: those of gold items and attention checks measure the raters instead.
        ratings=Rating.objects.filter(rater__dataset=dataset, response__turn__item__gold__isnull=True).count(),
    )


def judge_run_logprob_fallback_note(run: JudgeRun) -> str:
    """The note on the judgments scored without log-probabilities, in the active language. A finished run stores its
    notes as a worker writes them (no reader, so English); the run page rebuilds this one for its reader."""
    cfg = run.judge_settings
    parsed = run.logprob_fallbacks - run.sampled_fallbacks
    scored = []
    if run.sampled_fallbacks:
        scored.append(
            _(
                "%(n)d of them, whose provider returned none, are scored by the mean of up to %(samples)d sample(s) "
                "at temperature %(temperature)s"
            )
            % {
                "n": run.sampled_fallbacks,
                "samples": cfg.fallback_samples,
                "temperature": f"{cfg.fallback_temperature:g}",
            }
        )
    if parsed:
        scored.append(_("%(n)d by the score their reply states") % {"n": parsed})
    return _(
        "Log-probabilities were unavailable or unusable for %(n)d judgment(s) (each records why): %(scored)s. "
        "An answer's score averages its %(samples)d sample(s)."
    ) % {"n": run.logprob_fallbacks, "scored": "; ".join(scored), "samples": cfg.samples}


FALLBACK_NOTE_START = "Log-probabilities were unavailable"


def _notes_for_reader(run: JudgeRun) -> str:
    if not run.notes or not run.logprob_fallbacks:
        return run.notes
    return "\n".join(
        judge_run_logprob_fallback_note(run) if line.startswith(FALLBACK_NOTE_START) else line
        for line in run.notes.splitlines()
    )


@dataclass(frozen=True)
class RunProgress:
    status: str
    status_label: str  # the status in the reader's language
    total: int
    finished: int
    done: int
    failed: int
    parse_errors: int
    cache_hits: int
    claimed: int  # units a worker holds now; each may be waiting, computing or calling
    calls_in_flight: int | None  # provider calls under way now; None when it cannot be counted from here
    calls: int
    percent: float
    calls_per_s: float | None
    eta_s: float | None
    cost_usd: float | None
    cost_partial: bool
    tokens: int
    errors_by_kind: dict[str, int]
    is_active: bool
    # Ended with its scores written and its version fixed: what the run reports can be read.
    is_settled: bool
    notes: str
    position_consistency: float | None
    logprob_fallbacks: int
    sampled_fallbacks: int
    # Per finished judgment that called the provider: the provider's own time, and the wait before sending apart.
    mean_latency_s: float | None = None
    mean_queue_wait_s: float | None = None
    # Error-span runs: the reported errors by where their quote was placed (found, not found, ambiguous, empty).
    quote_placement: dict[str, int] | None = None

    @property
    def unplaced_quotes(self) -> int:
        return sum(n for status, n in (self.quote_placement or {}).items() if status != "found")

    @property
    def quotes_not_found(self) -> int:
        return (self.quote_placement or {}).get("not found", 0) + (self.quote_placement or {}).get("empty quote", 0)

    @property
    def can_cancel(self) -> bool:
        return self.is_active

    @property
    def can_retry_failed(self) -> bool:
        return not self.is_active and self.failed > 0


def judge_run_progress(run: JudgeRun) -> RunProgress:
    run.refresh_from_db()
    finished = run.done + run.failed
    claimed = Judgment.objects.filter(run=run, status=JudgmentStatus.CLAIMED).count()
    errors: dict[str, Any] = dict(
        Judgment.objects.filter(run=run)
        .exclude(error_kind="")
        .values_list("error_kind")
        .annotate(n=Count("id"))
        .values_list("error_kind", "n")
    )
    end = run.finished_at or timezone.now()
    elapsed = (end - run.started_at).total_seconds() if run.started_at else 0.0
    rate = finished / elapsed if elapsed > 0 and finished else None
    remaining = max(0, run.total - finished)
    eta = remaining / rate if rate and run.is_active else None
    calls_rate = run.calls / elapsed if elapsed > 0 and run.calls else None
    known = run.cost_usd if run.unpriced_calls == 0 else (run.cost_usd or None)
    if known == 0 and (run.estimate or {}).get("cost_usd", 0) is None:
        # litellm had no prices for the model at launch: nothing counted yet is unknown, not $0.
        known = None
    timing = Judgment.objects.filter(run=run, attempts__gt=0).aggregate(
        latency=Avg("latency_s"), queue_wait=Avg("queue_wait_s")
    )
    return RunProgress(
        status=run.status,
        status_label=run.status_label,
        total=run.total,
        finished=finished,
        done=run.done,
        failed=run.failed,
        parse_errors=run.parse_errors,
        cache_hits=run.cache_hits,
        claimed=claimed,
        calls_in_flight=calls_in_flight(run_scope(run.pk)),
        calls=run.calls,
        percent=round(100.0 * finished / run.total, 1) if run.total else 100.0,
        calls_per_s=round(calls_rate, 2) if calls_rate else None,
        eta_s=round(eta) if eta is not None else None,
        cost_usd=known,
        cost_partial=run.unpriced_calls > 0,
        tokens=run.prompt_tokens + run.completion_tokens,
        errors_by_kind={str(k): int(v) for k, v in sorted(errors.items())},
        is_active=run.is_active,
        is_settled=run.is_settled,
        notes=_notes_for_reader(run),
        position_consistency=run.position_consistency,
        logprob_fallbacks=run.logprob_fallbacks,
        sampled_fallbacks=run.sampled_fallbacks,
        mean_latency_s=_rounded(timing["latency"]),
        mean_queue_wait_s=_rounded(timing["queue_wait"]),
        quote_placement=quote_placement_of_run(run) if run.method == "error_spans" else None,
    )


def quote_placement_of_run(run: JudgeRun) -> dict[str, int]:
    from judging.methods.error_spans import quote_placement  # noqa: PLC0415 - error-span runs only

    stored = Judgment.objects.filter(run=run, spans__isnull=False).values_list("spans", flat=True)
    return quote_placement(stored.iterator(chunk_size=2000))


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 3)


def judgments_of_run(run: JudgeRun) -> QuerySet[Judgment]:
    return Judgment.objects.filter(run=run).select_related("response__system", "response__turn__item")


def latest_errors_of_run(run: JudgeRun, limit: int = 10) -> list[Judgment]:
    return list(judgments_of_run(run).exclude(error_kind="").order_by("-id")[:limit])

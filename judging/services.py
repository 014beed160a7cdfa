"""Writes of the judge engine: configs, launching, cancelling, retrying, executing and finishing runs."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from celery import current_app
from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Count, Max, Q, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotations.models import Campaign, Dataset, Item, Response
from judging.config import ConfigError, JudgeSettings, validate_config
from judging.engine.executor import SliceExecutor, SliceReport, claimable_q
from judging.engine.units import UnitKey, aspect_infos, build_contexts
from judging.factscore.results import factscore_results_project
from judging.llm import gateway, ratelimit
from judging.methods.flows import NO_REFERENCE, mean_scores, pairwise_scores
from judging.methods.geval import SAMPLED
from judging.methods.registry import FLOWS, calls_per_unit, first_spec
from judging.models import (
    CachedCompletion,
    Judge,
    JudgeConfig,
    JudgeKind,
    JudgeRun,
    JudgeScore,
    Judgment,
    JudgmentStatus,
    RunStatus,
)

PARSE_ERROR_PREFIX = "parse:"

# judging.tasks calls these services, so they enqueue its tasks by name instead of importing it.
JUDGE_RUN_START = "judging.judge_run_start"
JUDGE_RUN_WORK = "judging.judge_run_work"


# Tasks enqueue their successors patiently: a broker restart of a minute or two must not end a run's chain of work.
BROKER_RETRY_POLICY = {"max_retries": 60, "interval_start": 0.2, "interval_step": 0.5, "interval_max": 3.0}


def _enqueue(task_name: str, run_id: int, *, on_commit: bool = False, countdown: float | None = None) -> None:
    signature = current_app.signature(task_name, args=(run_id,), countdown=countdown)
    if on_commit:
        transaction.on_commit(signature.delay)
    else:
        signature.apply_async(retry=True, retry_policy=BROKER_RETRY_POLICY)


class LaunchError(ValueError):
    pass


# -- configs ----------------------------------------------------------------------------------------


def judge_config_create(*, raw: dict[str, Any], owner: User | None) -> JudgeConfig:
    """Save a validated config; a config with an existing name becomes its next version."""
    cfg = validate_config(raw)
    for _ in range(5):
        latest = JudgeConfig.objects.filter(name=cfg.name).aggregate(v=Max("version"))["v"] or 0
        try:
            with transaction.atomic():
                return JudgeConfig.objects.create(name=cfg.name, version=latest + 1, config=cfg.stored(), owner=owner)
        except IntegrityError:
            continue
    raise ConfigError(["could not allocate a version for this config name; try again"])


# -- planning ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlannedUnit:
    response_id: int
    other_response_id: int | None
    aspect_name: str
    sample: int
    pair_order: int


@dataclass
class Estimate:
    units: int
    calls: int
    cached_calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    aspects: list[str]

    @property
    def cost_known(self) -> bool:
        return self.cost_usd is not None


def _scope_responses(
    dataset: Dataset, campaign: Campaign | None, limit: int | None, item: Item | None = None
) -> list[tuple[int, int, int]]:
    """(response id, turn id, system position) of the answers in scope, in dataset order."""
    responses = Response.objects.filter(turn__item__dataset=dataset)
    if item is not None:
        responses = responses.filter(turn__item=item)
    if campaign is not None:
        responses = responses.filter(campaign_tasks__campaign=campaign).distinct()
    rows = list(
        responses.order_by("turn__item__position", "turn__index", "system__position", "id").values_list(
            "id", "turn_id", "system__position"
        )
    )
    return rows[:limit] if limit else rows


def _aspect_names(dataset: Dataset, cfg: JudgeSettings) -> list[str]:
    available = list(aspect_infos(dataset.pk))
    if cfg.method == "factscore":
        # One unit per answer scored as "factscore"; a rubric aspect named in the config gets the same
        # score too (its requests are identical, so the cache answers them), for `correlate`.
        extra = [a for a in (cfg.aspects or ()) if a != "factscore"]
        missing = [a for a in extra if a not in available]
        if missing:
            raise LaunchError(f"aspect(s) not in the dataset's rubric: {', '.join(missing)}")
        return ["factscore", *extra]
    if cfg.aspects:
        missing = [a for a in cfg.aspects if a not in available]
        if missing:
            raise LaunchError(f"aspect(s) not in the dataset's rubric: {', '.join(missing)}")
        return list(cfg.aspects)
    if not available:
        raise LaunchError("the dataset has no aspects to judge")
    return available


def plan_units(
    *,
    dataset: Dataset,
    cfg: JudgeSettings,
    campaign: Campaign | None = None,
    limit: int | None = None,
    item: Item | None = None,
) -> list[PlannedUnit]:
    if cfg.method not in FLOWS:
        raise LaunchError(f"the {cfg.method} method is not available in this installation")
    aspects = _aspect_names(dataset, cfg)
    rows = _scope_responses(dataset, campaign, limit, item)
    samples = cfg.samples
    units: list[PlannedUnit] = []
    if cfg.method != "pairwise":
        for response_id, _turn, _pos in rows:
            for aspect in aspects:
                for sample in range(samples):
                    units.append(PlannedUnit(response_id, None, aspect, sample, 0))
        return units
    by_turn: dict[int, list[int]] = {}
    for response_id, turn_id, _pos in rows:
        by_turn.setdefault(turn_id, []).append(response_id)
    baseline_ids: set[int] = set()
    if cfg.pairs == "baseline":
        baseline_ids = set(
            Response.objects.filter(turn__item__dataset=dataset, system__key=cfg.baseline).values_list("id", flat=True)
        )
        if not baseline_ids:
            raise LaunchError(f"baseline system {cfg.baseline!r} has no answers in this dataset")
    for answers in by_turn.values():
        for i, first in enumerate(answers):
            for second in answers[i + 1 :]:
                if baseline_ids and not ({first, second} & baseline_ids):
                    continue
                for aspect in aspects:
                    for sample in range(samples):
                        for order in (0, 1):
                            units.append(PlannedUnit(first, second, aspect, sample, order))
    return units


def _first_specs(dataset: Dataset, cfg: JudgeSettings, units: list[PlannedUnit]) -> list[gateway.CallSpec | None]:
    if not cfg.uses_llm or not units:
        return [None] * len(units)
    keys = [
        UnitKey(i, u.response_id, u.other_response_id, u.aspect_name, u.sample, u.pair_order)
        for i, u in enumerate(units)
    ]
    contexts = build_contexts(keys, cfg=cfg, aspects=aspect_infos(dataset.pk))
    return [first_spec(contexts[i]) for i in range(len(units))]


def estimate_run(
    *, dataset: Dataset, cfg: JudgeSettings, campaign: Campaign | None = None, limit: int | None = None
) -> Estimate:
    units = plan_units(dataset=dataset, cfg=cfg, campaign=campaign, limit=limit)
    aspects = _aspect_names(dataset, cfg)
    per_unit = calls_per_unit(cfg)
    if per_unit == 0:
        return Estimate(len(units), 0, 0, 0, 0, 0.0, aspects)
    specs = _first_specs(dataset, cfg, units)
    keys = [s.cache_key() for s in specs if s is not None]
    cached = 0
    if cfg.cache and keys:
        found: set[str] = set()
        for start in range(0, len(keys), 5000):
            found.update(
                CachedCompletion.objects.filter(key__in=keys[start : start + 5000]).values_list("key", flat=True)
            )
        cached = sum(1 for k in keys if k in found)
    # A unit with no first request is skipped by its method (e.g. no reference to grade against) and costs nothing.
    sent_units = sum(1 for spec in specs if spec is not None)
    uncached_units = sent_units - cached
    calls = uncached_units * per_unit
    sample = [s for s in specs if s is not None][:100]
    tokens_per_char = (
        sum(gateway.count_tokens(s.model, s.messages) for s in sample)
        / max(1, sum(len(m["content"]) for s in sample for m in s.messages))
        if sample
        else 0.3
    )
    prompt_chars = sum(
        len(m["content"]) for s, u in zip(specs, units, strict=True) if s is not None for m in s.messages
    )
    prompt_tokens_first = math.ceil(prompt_chars * tokens_per_char * (uncached_units / max(1, sent_units)))
    expected_completion = cfg.max_tokens or 200
    completion_tokens = calls * expected_completion
    # A second call (judging a summary) sends a prompt about as long as the summary plus the template.
    prompt_tokens = prompt_tokens_first + (uncached_units * (per_unit - 1) * (expected_completion + 400))
    cost = gateway.price_estimate(cfg.model or "", prompt_tokens, completion_tokens)
    return Estimate(len(units), calls, cached * per_unit, prompt_tokens, completion_tokens, cost, aspects)


@dataclass(frozen=True)
class PromptPreview:
    aspect: str
    system_keys: tuple[str, ...]
    # None: the unit sends no request (the metric method, or an item the method skips such as one without a
    # reference for the reference method).
    messages: list[dict[str, str]] | None


def prompt_preview(*, dataset: Dataset, cfg: JudgeSettings, item_number: int = 1) -> tuple[Item, list[PromptPreview]]:
    """The first request of each aspect on the first answer (or pair) of one item, built as a run builds it.

    Reads only: nothing is saved or sent."""
    item = Item.objects.filter(dataset=dataset).order_by("position", "id")[max(0, item_number - 1) :].first()
    if item is None:
        raise LaunchError(f"the dataset has no item number {item_number}")
    first_of_aspect: dict[str, PlannedUnit] = {}
    for unit in plan_units(dataset=dataset, cfg=cfg, item=item):
        if unit.sample == 0 and unit.pair_order == 0:
            first_of_aspect.setdefault(unit.aspect_name, unit)
    units = list(first_of_aspect.values())
    specs = _first_specs(dataset, cfg, units)
    response_ids = {u.response_id for u in units} | {u.other_response_id for u in units if u.other_response_id}
    system_of = dict(Response.objects.filter(id__in=response_ids).values_list("id", "system__key"))
    return item, [
        PromptPreview(
            aspect=unit.aspect_name,
            system_keys=tuple(system_of[r] for r in (unit.response_id, unit.other_response_id) if r is not None),
            messages=list(spec.messages) if spec is not None else None,
        )
        for unit, spec in zip(units, specs, strict=True)
    ]


# -- launching --------------------------------------------------------------------------------------


def _free_run_name(dataset: Dataset, base: str) -> str:
    taken = set(Judge.objects.filter(dataset=dataset, name__startswith=base).values_list("name", flat=True))
    if base not in taken:
        return base
    n = 2
    while f"{base} ({n})" in taken:
        n += 1
    return f"{base} ({n})"


def judge_run_launch(
    *,
    dataset: Dataset,
    config: JudgeConfig | dict[str, Any],
    launched_by: User | None,
    campaign: Campaign | None = None,
    limit: int | None = None,
    name: str | None = None,
) -> JudgeRun:
    """Create the run, its judge and every judgment (pending), then start it once committed."""
    config_row = config if isinstance(config, JudgeConfig) else None
    cfg = validate_config(config_row.config if config_row else config)
    if campaign is not None and campaign.dataset_id != dataset.pk:
        raise LaunchError("the campaign belongs to another dataset")
    if limit is not None and limit < 1:
        raise LaunchError("limit must be at least 1")
    if cfg.budget_usd is not None and cfg.uses_llm and not gateway.model_known(cfg.model or ""):
        raise LaunchError(f"litellm has no prices for {cfg.model}, so a budget cannot be enforced; remove budget_usd")
    if name is not None:
        name = name.strip()
        if not name or len(name) > 200:
            raise LaunchError("the run name must have 1 to 200 characters")
        if Judge.objects.filter(dataset=dataset, name=name).exists():
            raise LaunchError(f"a judge named {name!r} already exists in this dataset")
    units = plan_units(dataset=dataset, cfg=cfg, campaign=campaign, limit=limit)
    if not units:
        raise LaunchError("nothing to judge in this scope")
    specs = _first_specs(dataset, cfg, units)
    for _ in range(5):
        run_name = name or _free_run_name(dataset, cfg.name)
        try:
            with transaction.atomic():
                judge = Judge.objects.create(
                    dataset=dataset,
                    name=run_name,
                    kind=JudgeKind.RUN,
                    params={"method": cfg.method, "model": cfg.model, "config": cfg.name},
                )
                run = JudgeRun.objects.create(
                    judge=judge,
                    dataset=dataset,
                    campaign=campaign,
                    config=config_row,
                    config_snapshot=cfg.stored(),
                    method=cfg.method,
                    limit=limit,
                    total=len(units),
                    launched_by=launched_by,
                )
                Judgment.objects.bulk_create(
                    [
                        Judgment(
                            run=run,
                            response_id=u.response_id,
                            other_response_id=u.other_response_id,
                            aspect_name=u.aspect_name,
                            sample=u.sample,
                            pair_order=u.pair_order,
                            request_key=spec.cache_key() if spec is not None else "",
                        )
                        for u, spec in zip(units, specs, strict=True)
                    ],
                    batch_size=2000,
                )
                _enqueue(JUDGE_RUN_START, run.pk, on_commit=True)
                return run
        except IntegrityError:
            if name is not None:
                raise LaunchError(f"a judge named {name!r} already exists in this dataset") from None
            continue
    raise LaunchError("could not find a free run name; try again")


def judge_run_start(*, run_id: int) -> int:
    """queued -> running, then fan out work tasks. Returns how many were enqueued."""
    updated = JudgeRun.objects.filter(pk=run_id, status=RunStatus.QUEUED).update(
        status=RunStatus.RUNNING, started_at=timezone.now(), heartbeat_at=timezone.now()
    )
    if not updated:
        return 0
    ratelimit.clear_stop(ratelimit.run_scope(run_id))
    run = JudgeRun.objects.get(pk=run_id)
    per_run = settings.JUDGE_TASKS_PER_RUN
    batch = max(16, run.judge_settings.max_concurrency)
    fan_out = max(1, min(per_run, math.ceil(run.total / batch)))
    for _ in range(fan_out):
        _enqueue(JUDGE_RUN_WORK, run_id)
    return fan_out


def judge_run_cancel(*, run: JudgeRun) -> bool:
    """Stop a run: workers see it within about half a second and send no new calls."""
    updated = JudgeRun.objects.filter(pk=run.pk, status__in=[RunStatus.QUEUED, RunStatus.RUNNING]).update(
        status=RunStatus.CANCELLED, finished_at=timezone.now()
    )
    if updated:
        judge_run_write_scores(run_id=run.pk)
    return bool(updated)


def judge_run_retry_failed(*, run: JudgeRun) -> int:
    """Send failed units again (and resume units left pending by a cancel or a budget stop)."""
    with transaction.atomic():
        locked = JudgeRun.objects.select_for_update().get(pk=run.pk)
        if locked.status in (RunStatus.QUEUED, RunStatus.RUNNING):
            raise LaunchError("the run is still active")
        reset = Judgment.objects.filter(run=locked, status=JudgmentStatus.FAILED).update(
            status=JudgmentStatus.PENDING,
            claim_token="",
            lease_until=None,
            error_kind="",
            error="",
            attempts=0,
            finished_at=None,
        )
        pending = Judgment.objects.filter(run=locked, status__in=[JudgmentStatus.PENDING]).count()
        if not pending:
            return 0
        _recount(locked)
        locked.status = RunStatus.QUEUED
        locked.finished_at = None
        locked.notes = ""
        locked.save(update_fields=[*_COUNTERS, "status", "finished_at", "notes", "error_summary"])
        _enqueue(JUDGE_RUN_START, locked.pk, on_commit=True)
    return reset


# -- execution --------------------------------------------------------------------------------------


def judge_run_work(*, run_id: int) -> str:
    """One slice of work for a run; decides what comes next. Returns the slice's end state."""
    run = JudgeRun.objects.filter(pk=run_id).first()
    if run is None:
        return "gone"
    if run.status != RunStatus.RUNNING:
        if run.status not in (RunStatus.QUEUED,):
            judge_run_write_scores(run_id=run_id)
        return "stopped"
    report: SliceReport = SliceExecutor(run).execute()
    if report.state == "stopped":
        judge_run_write_scores(run_id=run_id)
        return "stopped"
    if report.state == "more":
        _enqueue(JUDGE_RUN_WORK, run_id)
        return "more"
    # Nothing claimable now: either the run is complete, or other slices still hold live claims.
    if judge_run_finalize(run_id=run_id):
        return "finished"
    lease_end = (
        Judgment.objects.filter(run_id=run_id, status=JudgmentStatus.CLAIMED)
        .order_by("-lease_until")
        .values_list("lease_until", flat=True)
        .first()
    )
    if Judgment.objects.filter(run_id=run_id).filter(claimable_q()).exists():
        _enqueue(JUDGE_RUN_WORK, run_id)
        return "more"
    # One watcher per run waits for the other claims to finish or expire (a killed worker's do).
    now = timezone.now()
    until = (lease_end or now) + timedelta(seconds=1)
    won = (
        JudgeRun.objects.filter(pk=run_id, status=RunStatus.RUNNING)
        .filter(Q(watch_until__isnull=True) | Q(watch_until__lt=now))
        .update(watch_until=until)
    )
    if won:
        wait = max(1.0, min((until - now).total_seconds(), settings.JUDGE_WATCH_MAX_S))
        _enqueue(JUDGE_RUN_WORK, run_id, countdown=wait)
        return "watching"
    return "idle"


def judge_runs_resume() -> int:
    """After a worker (re)starts: give every running run a work task (claims make extras harmless)."""
    return _judge_runs_wake(silent_since=None)


def judge_runs_nudge_stalled() -> int:
    """Periodically: a run silent for three leases gets a new task (its task was lost with a worker,
    or its start was never delivered). Returns how many runs were nudged."""
    stale_after = timedelta(seconds=3 * settings.JUDGE_LEASE_S)
    return _judge_runs_wake(silent_since=timezone.now() - stale_after)


def _judge_runs_wake(*, silent_since: datetime | None) -> int:
    """Queued and running runs with no sign of life since `silent_since` (None: all of them) get a
    start or a work task. Each run is taken with a conditional update of its heartbeat, so two
    callers at once wake it once."""
    runs = JudgeRun.objects.filter(status__in=[RunStatus.QUEUED, RunStatus.RUNNING]).annotate(
        last_sign_of_life=Coalesce("heartbeat_at", "started_at", "created_at")
    )
    if silent_since is not None:
        runs = runs.filter(last_sign_of_life__lt=silent_since)
    woken = 0
    for run_id, status, heartbeat_at in runs.order_by("pk").values_list("pk", "status", "heartbeat_at"):
        taken = JudgeRun.objects.filter(pk=run_id, status=status, heartbeat_at=heartbeat_at).update(
            heartbeat_at=timezone.now(), watch_until=None
        )
        if not taken:
            continue
        _enqueue(JUDGE_RUN_WORK if status == RunStatus.RUNNING else JUDGE_RUN_START, run_id)
        woken += 1
    return woken


_COUNTERS = (
    "done",
    "failed",
    "parse_errors",
    "cache_hits",
    "calls",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "unpriced_calls",
    "logprob_fallbacks",
    "sampled_fallbacks",
)


def _recount(run: JudgeRun) -> None:
    """Exact counters from the judgments themselves (the live ones are increments)."""
    judgments = Judgment.objects.filter(run=run)
    agg = judgments.aggregate(
        done=Count("id", filter=Q(status=JudgmentStatus.DONE)),
        failed=Count("id", filter=Q(status=JudgmentStatus.FAILED)),
        parse_errors=Count(
            "id",
            filter=Q(status=JudgmentStatus.DONE, score__isnull=True, error_kind__startswith=PARSE_ERROR_PREFIX),
        ),
        cache_hits=Count("id", filter=Q(cache_hit=True, status__in=[JudgmentStatus.DONE, JudgmentStatus.FAILED])),
        prompt_tokens=Sum("prompt_tokens"),
        completion_tokens=Sum("completion_tokens"),
        cost_usd=Sum("cost_usd"),
        lost_cost_usd=Sum("lost_cost_usd"),
        logprob_fallbacks=Count("id", filter=Q(logprob_fallback=True)),
        sampled_fallbacks=Count("id", filter=Q(score_mode=SAMPLED)),
    )
    run.done = agg["done"]
    run.failed = agg["failed"]
    run.parse_errors = agg["parse_errors"]
    run.cache_hits = agg["cache_hits"]
    run.prompt_tokens = agg["prompt_tokens"] or 0
    run.completion_tokens = agg["completion_tokens"] or 0
    # Calls lost in flight are paid for as well; their estimated cost is part of the run's.
    run.cost_usd = float(agg["cost_usd"] or 0.0) + float(agg["lost_cost_usd"] or 0.0)
    run.logprob_fallbacks = agg["logprob_fallbacks"]
    run.sampled_fallbacks = agg["sampled_fallbacks"]
    run.error_summary = dict(
        Counter(
            {
                row["error_kind"]: row["n"]
                for row in judgments.exclude(error_kind="").values("error_kind").annotate(n=Count("id"))
            }
        )
    )


def _logprob_fallback_note(run: JudgeRun) -> str:
    cfg = run.judge_settings
    parsed = run.logprob_fallbacks - run.sampled_fallbacks
    scored = []
    if run.sampled_fallbacks:
        scored.append(
            f"{run.sampled_fallbacks} of them, whose provider returned none, are scored by the mean of up to "
            f"{cfg.fallback_samples} sample(s) at temperature {cfg.fallback_temperature:g}"
        )
    if parsed:
        scored.append(f"{parsed} by the score their reply states")
    return (
        f"Log-probabilities were unavailable or unusable for {run.logprob_fallbacks} judgment(s) (each records "
        f"why): {'; '.join(scored)}. An answer's score averages its {cfg.samples} sample(s)."
    )


def judge_run_finalize(*, run_id: int) -> bool:
    """running -> succeeded/failed once no unit is pending or claimed. True when this call finished it."""
    with transaction.atomic():
        run = JudgeRun.objects.select_for_update().filter(pk=run_id).first()
        if run is None or run.status != RunStatus.RUNNING:
            return False
        if Judgment.objects.filter(run=run, status__in=[JudgmentStatus.PENDING, JudgmentStatus.CLAIMED]).exists():
            return False
        _recount(run)
        unparsed = Judgment.objects.filter(
            run=run, status=JudgmentStatus.DONE, score__isnull=True, error_kind__startswith=PARSE_ERROR_PREFIX
        ).count()
        # A run that read no score at all has produced nothing, however cleanly each call returned.
        nothing_parsed = run.total > 0 and unparsed == run.total
        run.status = RunStatus.FAILED if run.failed or nothing_parsed else RunStatus.SUCCEEDED
        run.finished_at = timezone.now()
        notes = []
        if nothing_parsed:
            kinds = ", ".join(f"{k}: {v}" for k, v in sorted(run.error_summary.items()) if k.startswith("parse:"))
            notes.append(
                f"No score could be read from any of the {run.total} judgment(s) ({kinds}); the raw output of each "
                "judgment shows what the judge replied."
            )
        if run.logprob_fallbacks:
            notes.append(_logprob_fallback_note(run))
        lost = Judgment.objects.filter(run=run).aggregate(n=Sum("lost_calls"))["n"] or 0
        if lost:
            notes.append(
                f"{lost} call(s) were in flight with a worker that stopped (or lost the database) and their answers "
                "never arrived; they are counted in the calls and, estimated from their prompt and max_tokens, in "
                "the cost."
            )
        if run.failed:
            kinds = ", ".join(f"{k}: {v}" for k, v in sorted(run.error_summary.items()) if not k.startswith("parse:"))
            notes.append(f"{run.failed} unit(s) failed ({kinds}). Use “retry failed” to send them again.")
        if run.error_summary.get(NO_REFERENCE):
            notes.append(
                f"{run.error_summary[NO_REFERENCE]} unit(s) were not sent: their item has no reference answer for "
                "the reference method to grade against."
            )
        run.notes = "\n".join(notes)
        run.save(update_fields=[*_COUNTERS, "status", "finished_at", "notes", "error_summary"])
    judge_run_write_scores(run_id=run_id)
    return True


def judge_run_write_scores(*, run_id: int) -> int:
    """Per answer and aspect, the mean over samples (pairwise: the win rate) into JudgeScore."""
    with transaction.atomic():
        # Slices ending together may both write: the row lock makes them take turns, and each
        # reads the judgments only once it holds it.
        run = JudgeRun.objects.select_for_update().select_related("judge").get(pk=run_id)
        done = Judgment.objects.filter(run=run, status=JudgmentStatus.DONE, score__isnull=False)
        consistency = None
        if run.method == "pairwise":
            summary = pairwise_scores(
                done.values_list("response_id", "other_response_id", "aspect_name", "sample", "pair_order", "score")
            )
            scores = summary.scores
            consistency = summary.consistency_rate
        else:
            scores = mean_scores(done.values_list("response_id", "aspect_name", "score"))
        JudgeScore.objects.filter(judge=run.judge).delete()
        JudgeScore.objects.bulk_create(
            [
                JudgeScore(judge=run.judge, response_id=response_id, aspect_name=aspect, value=value)
                for (response_id, aspect), value in scores.items()
            ],
            batch_size=2000,
        )
        JudgeRun.objects.filter(pk=run_id).update(position_consistency=consistency)
    if run.method == "factscore":
        # After the scores are committed, so a failed projection loses neither judgments nor scores.
        factscore_results_project(run_id=run_id)
    return len(scores)

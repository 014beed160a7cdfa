"""Writes of the judge engine: configs, launching, cancelling, retrying, executing and finishing runs."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Count, Max, Q, Sum
from django.utils import timezone

from annotations.models import Campaign, Dataset, Response
from judging import gateway, ratelimit
from judging.config import LLM_METHODS, ConfigError, validate_config
from judging.engine import SliceExecutor, SliceReport, claimable_q
from judging.methods import FLOWS, calls_per_unit, first_spec, mean_scores, pairwise_scores
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
from judging.units import UnitKey, aspect_infos, build_contexts


class LaunchError(ValueError):
    pass


# -- configs ----------------------------------------------------------------------------------------


def judge_config_create(*, raw: dict[str, Any], owner: User | None) -> JudgeConfig:
    """Save a validated config; a config with an existing name becomes its next version."""
    cfg = validate_config(raw)
    for _ in range(5):
        latest = JudgeConfig.objects.filter(name=cfg["name"]).aggregate(v=Max("version"))["v"] or 0
        try:
            with transaction.atomic():
                return JudgeConfig.objects.create(name=cfg["name"], version=latest + 1, config=cfg, owner=owner)
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


def _scope_responses(dataset: Dataset, campaign: Campaign | None, limit: int | None) -> list[tuple[int, int, int]]:
    """(response id, turn id, system position) of the answers in scope, in dataset order."""
    responses = Response.objects.filter(turn__item__dataset=dataset)
    if campaign is not None:
        responses = responses.filter(campaign_tasks__campaign=campaign).distinct()
    rows = list(
        responses.order_by("turn__item__position", "turn__index", "system__position", "id").values_list(
            "id", "turn_id", "system__position"
        )
    )
    return rows[:limit] if limit else rows


def _aspect_names(dataset: Dataset, cfg: dict[str, Any]) -> list[str]:
    available = list(aspect_infos(dataset.pk))
    if cfg["method"] == "factscore":
        # One unit per answer scored as "factscore"; a rubric aspect named in the config gets the same
        # score too (its requests are identical, so the cache answers them), for `correlate`.
        extra = [a for a in (cfg.get("aspects") or []) if a != "factscore"]
        missing = [a for a in extra if a not in available]
        if missing:
            raise LaunchError(f"aspect(s) not in the dataset's rubric: {', '.join(missing)}")
        return ["factscore", *extra]
    if cfg.get("aspects"):
        missing = [a for a in cfg["aspects"] if a not in available]
        if missing:
            raise LaunchError(f"aspect(s) not in the dataset's rubric: {', '.join(missing)}")
        return list(cfg["aspects"])
    if not available:
        raise LaunchError("the dataset has no aspects to judge")
    return available


def plan_units(
    *, dataset: Dataset, cfg: dict[str, Any], campaign: Campaign | None = None, limit: int | None = None
) -> list[PlannedUnit]:
    if cfg["method"] not in FLOWS:
        raise LaunchError(f"the {cfg['method']} method is not available in this installation")
    aspects = _aspect_names(dataset, cfg)
    rows = _scope_responses(dataset, campaign, limit)
    samples = 1 if cfg["method"] == "metric" else int(cfg.get("samples", 1))
    units: list[PlannedUnit] = []
    if cfg["method"] != "pairwise":
        for response_id, _turn, _pos in rows:
            for aspect in aspects:
                for sample in range(samples):
                    units.append(PlannedUnit(response_id, None, aspect, sample, 0))
        return units
    by_turn: dict[int, list[int]] = {}
    for response_id, turn_id, _pos in rows:
        by_turn.setdefault(turn_id, []).append(response_id)
    baseline_ids: set[int] = set()
    if cfg.get("pairs") == "baseline":
        baseline_ids = set(
            Response.objects.filter(turn__item__dataset=dataset, system__key=cfg["baseline"]).values_list(
                "id", flat=True
            )
        )
        if not baseline_ids:
            raise LaunchError(f"baseline system {cfg['baseline']!r} has no answers in this dataset")
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


def _first_specs(dataset: Dataset, cfg: dict[str, Any], units: list[PlannedUnit]) -> list[gateway.CallSpec | None]:
    if cfg["method"] not in LLM_METHODS or not units:
        return [None] * len(units)
    keys = [
        UnitKey(i, u.response_id, u.other_response_id, u.aspect_name, u.sample, u.pair_order)
        for i, u in enumerate(units)
    ]
    contexts = build_contexts(keys, cfg=cfg, aspects=aspect_infos(dataset.pk))
    return [first_spec(contexts[i]) for i in range(len(units))]


def estimate_run(
    *, dataset: Dataset, cfg: dict[str, Any], campaign: Campaign | None = None, limit: int | None = None
) -> Estimate:
    units = plan_units(dataset=dataset, cfg=cfg, campaign=campaign, limit=limit)
    aspects = _aspect_names(dataset, cfg)
    per_unit = calls_per_unit(cfg)
    if per_unit == 0:
        return Estimate(len(units), 0, 0, 0, 0, 0.0, aspects)
    specs = _first_specs(dataset, cfg, units)
    keys = [s.cache_key() for s in specs if s is not None]
    cached = 0
    if cfg.get("cache", True) and keys:
        found: set[str] = set()
        for start in range(0, len(keys), 5000):
            found.update(
                CachedCompletion.objects.filter(key__in=keys[start : start + 5000]).values_list("key", flat=True)
            )
        cached = sum(1 for k in keys if k in found)
    uncached_units = len(units) - cached
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
    prompt_tokens_first = math.ceil(prompt_chars * tokens_per_char * (uncached_units / max(1, len(units))))
    expected_completion = int(cfg.get("max_tokens") or 200)
    completion_tokens = calls * expected_completion
    # A second call (judging a summary) sends a prompt about as long as the summary plus the template.
    prompt_tokens = prompt_tokens_first + (uncached_units * (per_unit - 1) * (expected_completion + 400))
    cost = gateway.price_estimate(cfg["model"], prompt_tokens, completion_tokens)
    return Estimate(len(units), calls, cached * per_unit, prompt_tokens, completion_tokens, cost, aspects)


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
    from judging import tasks

    config_row = config if isinstance(config, JudgeConfig) else None
    cfg = validate_config(config_row.config if config_row else config)
    if campaign is not None and campaign.dataset_id != dataset.pk:
        raise LaunchError("the campaign belongs to another dataset")
    if limit is not None and limit < 1:
        raise LaunchError("limit must be at least 1")
    if cfg.get("budget_usd") is not None and cfg["method"] in LLM_METHODS and not gateway.model_known(cfg["model"]):
        raise LaunchError(
            f"litellm has no prices for {cfg['model']}, so a budget cannot be enforced; remove budget_usd"
        )
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
        run_name = name or _free_run_name(dataset, cfg["name"])
        try:
            with transaction.atomic():
                judge = Judge.objects.create(
                    dataset=dataset,
                    name=run_name,
                    kind=JudgeKind.RUN,
                    params={"method": cfg["method"], "model": cfg.get("model"), "config": cfg["name"]},
                )
                run = JudgeRun.objects.create(
                    judge=judge,
                    dataset=dataset,
                    campaign=campaign,
                    config=config_row,
                    config_snapshot=cfg,
                    method=cfg["method"],
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
                tasks.judge_run_start.delay_on_commit(run.pk)
                return run
        except IntegrityError:
            if name is not None:
                raise LaunchError(f"a judge named {name!r} already exists in this dataset") from None
            continue
    raise LaunchError("could not find a free run name; try again")


def judge_run_start(*, run_id: int) -> int:
    """queued -> running, then fan out work tasks. Returns how many were enqueued."""
    from judging import tasks

    updated = JudgeRun.objects.filter(pk=run_id, status=RunStatus.QUEUED).update(
        status=RunStatus.RUNNING, started_at=timezone.now(), heartbeat_at=timezone.now()
    )
    if not updated:
        return 0
    ratelimit.clear_stop(f"run{run_id}")
    run = JudgeRun.objects.get(pk=run_id)
    per_run = int(getattr(settings, "JUDGE_TASKS_PER_RUN", 2))
    batch = max(16, int(run.config_snapshot.get("max_concurrency", 32)))
    fan_out = max(1, min(per_run, math.ceil(run.total / batch)))
    for _ in range(fan_out):
        tasks.judge_run_work.delay(run_id)
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
    from judging import tasks

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
        tasks.judge_run_start.delay_on_commit(locked.pk)
    return reset


# -- execution --------------------------------------------------------------------------------------


def judge_run_work(*, run_id: int) -> str:
    """One slice of work for a run; decides what comes next. Returns the slice's end state."""
    from judging import tasks

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
        tasks.judge_run_work.delay(run_id)
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
        tasks.judge_run_work.delay(run_id)
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
        wait = max(1.0, min((until - now).total_seconds(), float(getattr(settings, "JUDGE_WATCH_MAX_S", 10.0))))
        tasks.judge_run_work.apply_async((run_id,), countdown=wait)
        return "watching"
    return "idle"


def judge_runs_resume() -> int:
    """After a worker (re)starts: give every running run a work task (claims make extras harmless)."""
    from judging import tasks

    ids = list(JudgeRun.objects.filter(status=RunStatus.RUNNING).values_list("id", flat=True))
    for run_id in ids:
        JudgeRun.objects.filter(pk=run_id).update(watch_until=None)
        tasks.judge_run_work.delay(run_id)
    queued = list(JudgeRun.objects.filter(status=RunStatus.QUEUED).values_list("id", flat=True))
    for run_id in queued:
        tasks.judge_run_start.delay(run_id)
    return len(ids) + len(queued)


def judge_run_nudge_if_stalled(*, run: JudgeRun) -> bool:
    """Called by progress polling: a running run with no heartbeat for a while gets a new work task."""
    from judging import tasks

    if run.status != RunStatus.RUNNING:
        return False
    stale_after = 3 * float(getattr(settings, "JUDGE_LEASE_S", 60.0))
    last = run.heartbeat_at or run.started_at or run.created_at
    if (timezone.now() - last).total_seconds() < stale_after:
        return False
    updated = JudgeRun.objects.filter(pk=run.pk, heartbeat_at=run.heartbeat_at).update(heartbeat_at=timezone.now())
    if updated:
        tasks.judge_run_work.delay(run.pk)
    return bool(updated)


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
)


def _recount(run: JudgeRun) -> None:
    """Exact counters from the judgments themselves (the live ones are increments)."""
    judgments = Judgment.objects.filter(run=run)
    agg = judgments.aggregate(
        done=Count("id", filter=Q(status=JudgmentStatus.DONE)),
        failed=Count("id", filter=Q(status=JudgmentStatus.FAILED)),
        parse_errors=Count("id", filter=Q(status=JudgmentStatus.DONE, score__isnull=True)),
        cache_hits=Count("id", filter=Q(cache_hit=True, status__in=[JudgmentStatus.DONE, JudgmentStatus.FAILED])),
        prompt_tokens=Sum("prompt_tokens"),
        completion_tokens=Sum("completion_tokens"),
        cost_usd=Sum("cost_usd"),
        logprob_fallbacks=Count("id", filter=Q(logprob_fallback=True)),
    )
    run.done = agg["done"]
    run.failed = agg["failed"]
    run.parse_errors = agg["parse_errors"]
    run.cache_hits = agg["cache_hits"]
    run.prompt_tokens = agg["prompt_tokens"] or 0
    run.completion_tokens = agg["completion_tokens"] or 0
    run.cost_usd = float(agg["cost_usd"] or 0.0)
    run.logprob_fallbacks = agg["logprob_fallbacks"]
    run.error_summary = dict(
        Counter(
            {
                row["error_kind"]: row["n"]
                for row in judgments.exclude(error_kind="").values("error_kind").annotate(n=Count("id"))
            }
        )
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
        run.status = RunStatus.FAILED if run.failed else RunStatus.SUCCEEDED
        run.finished_at = timezone.now()
        notes = []
        if run.logprob_fallbacks:
            samples = int(run.config_snapshot.get("samples", 1))
            notes.append(
                f"Log-probabilities were unavailable for {run.logprob_fallbacks} judgment(s); their score is the "
                f"parsed score, averaged over {samples} sample(s) per answer."
            )
        if run.failed:
            kinds = ", ".join(f"{k}: {v}" for k, v in sorted(run.error_summary.items()) if not k.startswith("parse:"))
            notes.append(f"{run.failed} unit(s) failed ({kinds}). Use “retry failed” to send them again.")
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
    return len(scores)

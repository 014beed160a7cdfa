"""Writes of the judge engine: configs, launching, cancelling, retrying, executing and finishing runs (what a launch
plans and estimates is `judging.run_plans`).

Why one module of this size: a run's life (launch, start, work, cancel, retry, finish) is one state machine over the
run's status, each write moving it with a conditional update; side by side, a reader can check that no two
transitions overlap.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, Exists, Max, OuterRef, Q, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone, translation
from kombu.exceptions import OperationalError as BrokerUnavailable
from redis.exceptions import ConnectionError as RedisUnavailable

from annotations.models import Campaign, Dataset
from judging.config import ConfigError, validate_config
from judging.engine.executor import SliceExecutor, SliceReport, claimable_q
from judging.engine.results import RUN_COUNTERS
from judging.enqueue import JUDGE_RUN_START, JUDGE_RUN_WORK, run_task_enqueue
from judging.factscore.results import factscore_results_project
from judging.llm import gateway, ratelimit
from judging.methods.flows import NO_REFERENCE, mean_scores, pairwise_scores
from judging.methods.geval import SAMPLED
from judging.models import (
    ACTIVE_RUN_STATUSES,
    ENDED_RUN_STATUSES,
    Judge,
    JudgeConfig,
    JudgeKind,
    JudgeRun,
    JudgeScore,
    Judgment,
    JudgmentStatus,
    RunStatus,
    settled_runs_q,
)
from judging.run_plans import LaunchError, estimate_of, first_specs, plan_units, prompt_language_of_run
from judging.selectors import judge_run_logprob_fallback_note
from judging.versions import judge_run_ended

log = logging.getLogger(__name__)

PARSE_ERROR_PREFIX = "parse:"

BROKER_OUTAGES = (BrokerUnavailable, RedisUnavailable, OSError)


def _enqueue_start_on_commit(run_id: int) -> None:
    """Once the run is committed, hand its start to the broker. A broker that stays away is no error: the run is
    committed and marked, and the periodic nudge, a waiting `judge --wait` and a worker that reconnects start it."""

    def send() -> None:
        try:
            run_task_enqueue(JUDGE_RUN_START, run_id, patient=False)
        except BROKER_OUTAGES as exc:
            log.warning(
                "judge run %s: its start could not be queued (%s); it will start when the broker is back", run_id, exc
            )
            JudgeRun.objects.filter(pk=run_id, status=RunStatus.QUEUED).update(start_unsent_at=timezone.now())
        else:
            JudgeRun.objects.filter(pk=run_id, start_unsent_at__isnull=False).update(start_unsent_at=None)

    transaction.on_commit(send)


def start_unsent_message(run: JudgeRun) -> str:
    """What the researcher is told when a run is saved but the broker could not take its start."""
    return (
        f"the run {run.name!r} (id {run.pk}) is saved, but the task queue (broker) could not be reached, so it has "
        "not started yet; it starts by itself once the broker is back (the workers' periodic nudge picks it up)"
    )


# -- configs ----------------------------------------------------------------------------------------


def judge_config_create(*, raw: dict[str, Any], owner: User | None) -> JudgeConfig:
    """Save a validated config; a config with a name its owner already uses becomes that config's next version
    (versions count per owner, so they say nothing of other researchers' configs)."""
    cfg = validate_config(raw)
    for _ in range(5):
        latest = JudgeConfig.objects.filter(owner=owner, name=cfg.name).aggregate(v=Max("version"))["v"] or 0
        try:
            with transaction.atomic():
                return JudgeConfig.objects.create(name=cfg.name, version=latest + 1, config=cfg.stored(), owner=owner)
        except IntegrityError:
            continue
    raise ConfigError(["could not allocate a version for this config name; try again"])


def free_run_name(dataset: Dataset, base: str) -> str:
    return _free_run_name(dataset, base)


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
    response_ids: Collection[int] | None = None,
) -> JudgeRun:
    """Create the run, its judge and every judgment (pending), then start it once committed; ``response_ids``
    narrows the scope to those answers (a certification's reference set, a drift check's sample)."""
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
    units = plan_units(dataset=dataset, cfg=cfg, campaign=campaign, limit=limit, response_ids=response_ids)
    if not units:
        raise LaunchError("nothing to judge in this scope")
    language = prompt_language_of_run(cfg=cfg, units=units) if cfg.uses_llm else ""
    specs = first_specs(dataset, cfg, units, language)
    estimate = estimate_of(dataset, cfg, units, specs, language, launched_by)
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
                    prompt_language=language,
                    estimate=estimate.stored(),
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
                _enqueue_start_on_commit(run.pk)
            run.refresh_from_db(fields=["start_unsent_at"])
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
        run_task_enqueue(JUDGE_RUN_WORK, run_id)
    return fan_out


def judge_run_cancel(*, run: JudgeRun) -> bool:
    """Stop a run: workers see it within about half a second and send no new calls."""
    with transaction.atomic():
        updated = JudgeRun.objects.filter(pk=run.pk, status__in=ACTIVE_RUN_STATUSES).update(
            status=RunStatus.CANCELLED, finished_at=timezone.now()
        )
        if updated:
            # In the transaction that ends it, so no reader sees the run cancelled without its scores and version.
            _settle(JudgeRun.objects.select_for_update().select_related("judge").get(pk=run.pk))
    if updated:
        _project_results(run)
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
        _enqueue_start_on_commit(locked.pk)
    return reset


# -- execution --------------------------------------------------------------------------------------


# A watcher's next task may start a little before its countdown ends by the database's clock; it must still find the
# watch free. Another task in that margin may watch too, which is harmless (claims are conditional).
WATCH_MARGIN_S = 0.5


def judge_run_work(*, run_id: int) -> str:
    """One slice of work for a run; decides what comes next. Returns the slice's end state."""
    run = JudgeRun.objects.filter(pk=run_id).first()
    if run is None:
        return "gone"
    if run.status != RunStatus.RUNNING:
        # A leftover task of an ended run stored nothing, so a settled run has nothing for it to do.
        if not run.is_active and not run.is_settled:
            judge_run_settle(run_id=run_id)
        return "stopped"
    report: SliceReport = SliceExecutor(run).execute()
    if report.state == "stopped":
        # Results this slice stored while the run was being stopped (its calls in flight at a cancel or a budget
        # stop) may have landed after the run's scores were written.
        judge_run_settle(run_id=run_id, rewrite=report.finished > 0)
        return "stopped"
    if report.state == "more":
        run_task_enqueue(JUDGE_RUN_WORK, run_id)
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
        run_task_enqueue(JUDGE_RUN_WORK, run_id)
        return "more"
    # One watcher per run waits for the other claims to finish or expire (a killed worker's do). The watch is held
    # until the watcher's own next task is due, not until the last lease ends: a lease may outlast the longest wait,
    # and the watcher's next task must then be free to watch again, or the run would stall with nobody watching.
    now = timezone.now()
    wait = max(1.0, min(((lease_end or now) - now).total_seconds() + 1.0, settings.JUDGE_WATCH_MAX_S))
    won = (
        JudgeRun.objects.filter(pk=run_id, status=RunStatus.RUNNING)
        .filter(Q(watch_until__isnull=True) | Q(watch_until__lte=now))
        .update(watch_until=now + timedelta(seconds=wait - WATCH_MARGIN_S))
    )
    if won:
        run_task_enqueue(JUDGE_RUN_WORK, run_id, countdown=wait)
        return "watching"
    return "idle"


def judge_runs_resume() -> int:
    """After a worker (re)starts: give every running run a work task (claims make extras harmless)."""
    return _judge_runs_wake(silent_since=None)


def judge_runs_nudge_stalled(*, patient: bool = True) -> int:
    """Periodically: a run silent for three leases gets a new task (its task was lost with a worker,
    or its start was never delivered), and a run whose start never reached the broker is started. Returns how many
    runs were nudged. `patient=False` gives up on an absent broker within seconds (for a caller that polls)."""
    stale_after = timedelta(seconds=3 * settings.JUDGE_LEASE_S)
    return _judge_runs_wake(silent_since=timezone.now() - stale_after, patient=patient)


def _judge_runs_wake(*, silent_since: datetime | None, patient: bool = True) -> int:
    """Queued and running runs with no sign of life since `silent_since` (None: all of them) get a
    start or a work task. Each run is taken with a conditional update of its heartbeat, so two
    callers at once wake it once."""
    runs = JudgeRun.objects.filter(status__in=[RunStatus.QUEUED, RunStatus.RUNNING]).annotate(
        last_sign_of_life=Coalesce("heartbeat_at", "started_at", "created_at")
    )
    if silent_since is not None:
        # A run whose start never reached the broker is started at once, without waiting for it to look stalled.
        runs = runs.filter(
            Q(last_sign_of_life__lt=silent_since) | Q(status=RunStatus.QUEUED, start_unsent_at__isnull=False)
        )
    woken = 0
    for run_id, status, heartbeat_at in runs.order_by("pk").values_list("pk", "status", "heartbeat_at"):
        taken = JudgeRun.objects.filter(pk=run_id, status=status, heartbeat_at=heartbeat_at).update(
            heartbeat_at=timezone.now(), watch_until=None, start_unsent_at=None
        )
        if not taken:
            continue
        try:
            run_task_enqueue(
                JUDGE_RUN_WORK if status == RunStatus.RUNNING else JUDGE_RUN_START, run_id, patient=patient
            )
        except BROKER_OUTAGES:
            if status == RunStatus.QUEUED:
                JudgeRun.objects.filter(pk=run_id, status=status).update(start_unsent_at=timezone.now())
            raise
        woken += 1
    return woken


# Every counter of a run, recounted from its judgments: the ones a slice adds to and the cost.
_COUNTERS = (*RUN_COUNTERS, "cost_usd")


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


def judge_run_finalize(*, run_id: int) -> bool:
    """running -> succeeded/failed once no unit is pending or claimed. True when this call finished it.

    One transaction: the counters, the scores, the version and, last, the status. A reader never sees the run ended
    without its scores and version, and a worker stopped half-way leaves it running, for the periodic nudge to
    finish again."""
    with transaction.atomic():
        run = JudgeRun.objects.select_for_update().select_related("judge").filter(pk=run_id).first()
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
        notes = []
        if nothing_parsed:
            kinds = ", ".join(f"{k}: {v}" for k, v in sorted(run.error_summary.items()) if k.startswith("parse:"))
            notes.append(
                f"No score could be read from any of the {run.total} judgment(s) ({kinds}); the raw output of each "
                "judgment shows what the judge replied."
            )
        if run.logprob_fallbacks:
            # Stored in the site's language whatever language the writing thread has active: the run page finds
            # the note by its opening words and rebuilds it in each reader's language.
            with translation.override(settings.LANGUAGE_CODE):
                notes.append(judge_run_logprob_fallback_note(run))
        lost = Judgment.objects.filter(run=run).aggregate(n=Sum("lost_calls"))["n"] or 0
        if lost:
            notes.append(
                f"{lost} call(s) were sent by a worker that stopped (or lost the database) before it stored their "
                "answers; they are counted in the calls and, estimated from their prompt and max_tokens, in the cost."
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
        run.save(update_fields=[*_COUNTERS, "notes", "error_summary"])
        _settle(run)
        run.status = RunStatus.FAILED if run.failed or nothing_parsed else RunStatus.SUCCEEDED
        run.finished_at = timezone.now()
        run.save(update_fields=["status", "finished_at"])
    _project_results(run)
    return True


def judge_run_settle(*, run_id: int, rewrite: bool = False) -> bool:
    """Write an ended run's scores and fix its version, in one transaction. A settled run is left as it is unless
    `rewrite` (a slice stored results after the run ended). True when this call wrote them; safe to call twice."""
    with transaction.atomic():
        run = (
            JudgeRun.objects.select_for_update()
            .select_related("judge")
            .filter(pk=run_id)
            .exclude(status__in=ACTIVE_RUN_STATUSES)
            .first()
        )
        if run is None or (run.is_settled and not rewrite):
            return False
        _settle(run)
    _project_results(run)
    return True


def judge_runs_settle_ended() -> int:
    """Periodically: an ended run without its scores and version gets them (a run ended by a budget stop whose
    slices all stopped, or one whose worker stopped between its end and these writes before they were one
    transaction). A run whose units are still held by a live slice is left to that slice, which settles it when it
    stops. Returns how many runs were settled."""
    held = Judgment.objects.filter(
        run_id=OuterRef("pk"), status=JudgmentStatus.CLAIMED, lease_until__gte=timezone.now()
    )
    unsettled = (
        JudgeRun.objects.filter(status__in=ENDED_RUN_STATUSES)
        .exclude(settled_runs_q())
        .exclude(Exists(held))
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    return sum(judge_run_settle(run_id=run_id) for run_id in unsettled)


def _settle(run: JudgeRun) -> None:
    """The scores and the version of an ended (or ending) run whose row the caller holds locked."""
    _write_scores(run)
    judge_run_ended(run_id=run.pk)


def _project_results(run: JudgeRun) -> None:
    if run.method == "factscore":
        # After the scores are committed, so a failed projection loses neither judgments nor scores.
        factscore_results_project(run_id=run.pk)


def judge_run_write_scores(*, run_id: int) -> int:
    """Per answer and aspect, the mean over samples (pairwise: the win rate) into JudgeScore."""
    with transaction.atomic():
        # Slices ending together may both write: the row lock makes them take turns, and each
        # reads the judgments only once it holds it.
        run = JudgeRun.objects.select_for_update().select_related("judge").get(pk=run_id)
        written = _write_scores(run)
    _project_results(run)
    return written


def _write_scores(run: JudgeRun) -> int:
    """The run's scores from its finished judgments, replacing any it had; the caller holds the run's row lock."""
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
    if connection.vendor == "postgresql":
        _insert_scores_postgres(run.judge_id, scores)
    else:
        _insert_scores(run.judge_id, scores)
    JudgeRun.objects.filter(pk=run.pk).update(position_consistency=consistency)
    run.position_consistency = consistency
    return len(scores)


def _insert_scores(judge_id: int, scores: dict[tuple[int, str], float]) -> None:
    JudgeScore.objects.bulk_create(
        [
            JudgeScore(judge_id=judge_id, response_id=response_id, aspect_name=aspect, value=value)
            for (response_id, aspect), value in scores.items()
        ],
        batch_size=2000,
    )


def _insert_scores_postgres(judge_id: int, scores: dict[tuple[int, str], float]) -> None:
    """The same rows as `_insert_scores` in one statement, without a model object and a parameter row per score."""
    if not scores:
        return
    keys = list(scores)
    with connection.cursor() as cursor:
        cursor.execute(
            _INSERT_SCORES_POSTGRES,
            [judge_id, [key[0] for key in keys], [key[1] for key in keys], [scores[key] for key in keys]],
        )


_INSERT_SCORES_POSTGRES = (
    "INSERT INTO judging_judgescore (judge_id, response_id, aspect_name, value) "
    "SELECT %s, * FROM unnest(%s::bigint[], %s::varchar[], %s::double precision[])"
)

import argparse
import contextlib
import json
import time
from collections.abc import Callable
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import InterfaceError, OperationalError, close_old_connections, connection

from annotations.management.lookup import add_owner_argument, dataset_or_error
from annotations.models import Campaign, Dataset
from judging import run_plans, services
from judging.config import ConfigError, validate_config
from judging.models import JudgeRun, RunStatus
from judging.selectors import RunProgress, judge_run_progress

BAR_WIDTH = 30


def progress_line(progress: RunProgress) -> str:
    filled = int(BAR_WIDTH * progress.percent / 100)
    bar = "#" * filled + "." * (BAR_WIDTH - filled)
    parts = [f"[{bar}] {progress.percent:5.1f}% {progress.finished}/{progress.total}", f"calls {progress.calls}"]
    if progress.calls_per_s is not None:
        parts.append(f"{progress.calls_per_s:.1f} calls/s")
    if progress.eta_s is not None:
        parts.append(f"ETA {progress.eta_s}s")
    if progress.cost_usd is not None:
        parts.append(f"${progress.cost_usd:.4f}" + ("+" if progress.cost_partial else ""))
    else:
        parts.append("cost unknown")
    if progress.failed:
        parts.append(f"failed {progress.failed}")
    if progress.parse_errors:
        parts.append(f"parse errors {progress.parse_errors}")
    return " ".join(parts)


class Command(BaseCommand):
    help = (
        "Launch a judge run on a dataset from a judge config (a JSON file). With --wait, show a "
        "progress bar until it ends and exit non-zero unless it succeeded."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dataset", required=True, help="dataset name")
        add_owner_argument(parser)
        parser.add_argument("--config", required=True, help="judge config JSON file")
        parser.add_argument("--name", help="run name (default: the config's name, with a suffix for repeats)")
        parser.add_argument("--limit", type=int, help="judge at most this many answers")
        parser.add_argument("--campaign", help="only the answers of this annotation campaign")
        parser.add_argument("--wait", action="store_true", help="wait for the run, showing progress")
        parser.add_argument(
            "--estimate",
            action="store_true",
            help="print units, calls, cached calls, tokens and cost, and launch nothing",
        )
        parser.add_argument(
            "--pilot",
            action="store_true",
            help=f"judge the first {run_plans.PILOT_UNITS} units only, wait, and print their calls and cost per unit "
            "and what the whole scope would take at that rate (for a provider that may return no "
            "log-probabilities); the full run launched afterwards gets the pilot's replies from the cache",
        )
        parser.add_argument("--poll", type=float, default=0.5, help=argparse_hidden())

    def handle(self, *args: object, **options: object) -> None:
        dataset = dataset_or_error(str(options["dataset"]), options["owner"])
        try:
            raw = json.loads(Path(str(options["config"])).read_text(encoding="utf-8"))
        except OSError as exc:
            raise CommandError(f"cannot read the config: {exc}") from None
        except ValueError as exc:
            raise CommandError(f"the config is not valid JSON: {exc}") from None
        campaign = None
        if options["campaign"]:
            campaign = Campaign.objects.filter(dataset=dataset, name=str(options["campaign"])).first()
            if campaign is None:
                raise CommandError(f"no campaign named {options['campaign']!r} on this dataset")
        limit = options["limit"]
        if options["estimate"]:
            self._estimate(dataset, raw, campaign, int(limit) if isinstance(limit, int) else None)
            return
        if options["pilot"]:
            self._pilot(dataset, raw, campaign, int(limit) if isinstance(limit, int) else None, options)
            return
        try:
            run = services.judge_run_launch(
                dataset=dataset,
                config=raw,
                launched_by=None,
                campaign=campaign,
                limit=int(limit) if isinstance(limit, int) else None,
                name=str(options["name"]) if options["name"] else None,
            )
        except ConfigError as exc:
            raise CommandError("invalid judge config:\n  " + "\n  ".join(exc.errors)) from None
        except services.LaunchError as exc:
            raise CommandError(str(exc)) from None
        except DATABASE_OUTAGES as exc:
            # The launch writes in one transaction: without a database nothing of it was saved.
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise CommandError(f"the database could not be reached ({reason}); nothing was launched") from None
        self.stdout.write(f"launched judge run {run.name!r} (id {run.pk}): {run.total} unit(s)")
        for line in launch_estimate_lines(run.estimate):
            self.stdout.write("  " + line)
        if run.prompt_language:
            self.stdout.write(f"  prompt language:   {run.prompt_language}")
        if run.start_unsent_at is not None:
            self.stderr.write(services.start_unsent_message(run))
        self._wait(run, options)

    def _estimate(self, dataset: Dataset, raw: object, campaign: Campaign | None, limit: int | None) -> None:
        if not isinstance(raw, dict):
            raise CommandError("the config must be a JSON object")
        if limit is not None and limit < 1:
            raise CommandError("limit must be at least 1")
        try:
            cfg = validate_config(raw)
            estimate = run_plans.estimate_run(dataset=dataset, cfg=cfg, campaign=campaign, limit=limit)
        except ConfigError as exc:
            raise CommandError("invalid judge config:\n  " + "\n  ".join(exc.errors)) from None
        except services.LaunchError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"estimate for {cfg.name!r} on {dataset.name!r} (nothing was launched):")
        for line in estimate_lines(estimate):
            self.stdout.write("  " + line)

    def _pilot(
        self, dataset: Dataset, raw: object, campaign: Campaign | None, limit: int | None, options: dict[str, object]
    ) -> None:
        try:
            cfg = validate_config(raw)
            whole = run_plans.estimate_run(dataset=dataset, cfg=cfg, campaign=campaign, limit=limit)
            pilot_limit = run_plans.pilot_limit(dataset=dataset, cfg=cfg, campaign=campaign)
            run = services.judge_run_launch(
                dataset=dataset,
                config=cfg.stored(),
                launched_by=None,
                campaign=campaign,
                limit=min(pilot_limit, limit) if limit else pilot_limit,
                name=services.free_run_name(dataset, f"{cfg.name} (pilot)"),
            )
        except ConfigError as exc:
            raise CommandError("invalid judge config:\n  " + "\n  ".join(exc.errors)) from None
        except services.LaunchError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"launched the pilot {run.name!r} (id {run.pk}): {run.total} unit(s)")
        if run.start_unsent_at is not None:
            self.stderr.write(services.start_unsent_message(run))
        self._wait(run, {**options, "wait": True})
        run.refresh_from_db()
        for line in pilot_lines(run, whole):
            self.stdout.write(line)

    def _wait(self, run: JudgeRun, options: dict[str, object]) -> None:
        if not options["wait"]:
            return
        poll = max(0.05, float(options["poll"]))  # type: ignore[arg-type]
        outages = OutageReporter(self.stdout.write)
        while True:
            try:
                progress = judge_run_progress(run)
            except DATABASE_OUTAGES as exc:
                # The run goes on in the workers; only this process lost its connection, which Django reopens.
                outages.down("database", exc)
                _drop_connection()
                time.sleep(min(2.0, max(poll, 0.5)))
                continue
            outages.up("database")
            self.stdout.write("\r" + progress_line(progress), ending="")
            self.stdout.flush()
            # Only once its scores and version are written is what the run reports readable by the next command.
            if progress.is_settled:
                break
            # The same periodic rules the worker's scheduler applies, for a worker started without --beat.
            try:
                if progress.is_active:
                    services.judge_runs_nudge_stalled(patient=False)
                else:
                    services.judge_runs_settle_ended()
            except services.BROKER_OUTAGES as exc:
                outages.down("broker", exc)
            except DATABASE_OUTAGES as exc:
                outages.down("database", exc)
                _drop_connection()
            else:
                outages.up("broker")
            time.sleep(poll)
        self.stdout.write("")
        self.stdout.write(f"run {run.name!r} {progress.status}")
        comparison = estimate_comparison(run.estimate, progress.calls, progress.cost_usd, progress.cost_partial)
        if comparison:
            self.stdout.write(comparison)
        if progress.notes:
            self.stdout.write(progress.notes)
        if progress.errors_by_kind:
            self.stdout.write("errors: " + ", ".join(f"{k}={v}" for k, v in progress.errors_by_kind.items()))
        if progress.status != RunStatus.SUCCEEDED:
            raise CommandError(f"judge run {run.name!r} ended with status {progress.status}")


DATABASE_OUTAGES = (OperationalError, InterfaceError)


def _drop_connection() -> None:
    with contextlib.suppress(*DATABASE_OUTAGES):
        connection.close()
    close_old_connections()


class OutageReporter:
    """Says once when the database or the broker stops answering and once when it is back, without a traceback."""

    def __init__(self, write: Callable[..., None]) -> None:
        self.write = write
        self.since: dict[str, float] = {}

    def down(self, what: str, exc: BaseException) -> None:
        if what in self.since:
            return
        self.since[what] = time.monotonic()
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        self.write("")
        self.write(f"{what} unreachable ({reason}); the run goes on in the workers, waiting for the {what} to return")

    def up(self, what: str) -> None:
        started = self.since.pop(what, None)
        if started is not None:
            self.write("")
            self.write(f"{what} back after {time.monotonic() - started:.0f}s; going on")


def _usd(value: float | None) -> str:
    return f"${value:.4f}" if value is not None else "unknown (litellm has no prices for this model)"


def _range(expected: object, worst: object) -> str:
    return f"{expected}" if expected == worst else f"{expected} expected, up to {worst} in the worst case"


def estimate_lines(estimate: run_plans.Estimate) -> list[str]:
    lines = [
        f"units:             {estimate.units}",
        f"calls:             {_range(estimate.calls, estimate.calls_max)}",
        f"cached calls:      {estimate.cached_calls}",
        f"prompt tokens:     {_range(estimate.prompt_tokens, estimate.prompt_tokens_max)}",
        f"completion tokens: {_range(estimate.completion_tokens, estimate.completion_tokens_max)}",
        f"cost:              {_range(_usd(estimate.cost_usd), _usd(estimate.cost_usd_max))}",
        f"aspects:           {', '.join(estimate.aspects)}",
    ]
    if estimate.language:
        lines.append(f"prompt language:   {estimate.language}")
    if estimate.calls_max > estimate.calls:
        lines.append(WORST_CASE_NOTE)
    return lines


WORST_CASE_NOTE = (
    "expected: every reply parses and carries log-probabilities; worst case: the provider returns none (each score "
    "is then estimated from sampled replies) and every reply needs each re-ask the config allows. Retries of failed "
    "requests (rate limits, provider errors) come on top."
)


def launch_estimate_lines(stored: dict[str, object]) -> list[str]:
    if not stored:
        return []
    calls = _range(stored.get("calls"), stored.get("calls_max"))
    cost = _range(_usd(_float_or_none(stored.get("cost_usd"))), _usd(_float_or_none(stored.get("cost_usd_max"))))
    return [f"estimate:          calls {calls}; cost {cost}"]


def estimate_comparison(stored: dict[str, object], calls: int, cost: float | None, cost_partial: bool) -> str:
    """The run's final calls and cost beside its launch estimate."""
    if not stored:
        return ""
    spent = _usd(cost) + (" (some calls unpriced)" if cost_partial else "")
    low, high = stored.get("calls"), stored.get("calls_max")
    estimated_calls = f"{low}" if low == high else f"{low} to {high}"
    cost_low, cost_high = _usd(_float_or_none(stored.get("cost_usd"))), _usd(_float_or_none(stored.get("cost_usd_max")))
    estimated_cost = cost_low if cost_low == cost_high else f"{cost_low} to {cost_high}"
    beyond = ""
    if isinstance(high, int) and calls > high:
        beyond = " (more than the worst case: retries of failed or lost requests are not in the estimate)"
    return f"calls: {calls} (estimated {estimated_calls}){beyond}; cost: {spent} (estimated {estimated_cost})"


def pilot_lines(run: JudgeRun, whole: run_plans.Estimate) -> list[str]:
    """The pilot's measured calls and cost per unit, and the whole scope at that rate beside its estimate."""
    units = max(1, run.total)
    per_unit = run.calls / units
    lines = [
        f"pilot: {run.total} unit(s), {run.calls} call(s) ({per_unit:.2f} per unit), cost "
        + (f"${run.cost_usd:.4f}" if run.cost_known else "unknown (litellm has no prices for this model)")
        + (
            f"; {run.sampled_fallbacks} unit(s) scored from sampled replies (no log-probabilities)"
            if run.sampled_fallbacks
            else ""
        ),
    ]
    projected_calls = round(per_unit * whole.units)
    projected_cost = _usd(run.cost_usd / units * whole.units) if run.cost_known else _usd(None)
    lines.append(
        f"whole scope at the pilot's rate: {whole.units} unit(s), about {projected_calls} call(s), {projected_cost} "
        f"(estimated calls {_range(whole.calls, whole.calls_max)}); nothing more was launched, and the pilot's "
        "replies are in the cache for the full run"
    )
    return lines


def _float_or_none(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def argparse_hidden() -> str:
    return argparse.SUPPRESS

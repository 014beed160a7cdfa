import argparse
import json
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotations.management.lookup import add_owner_argument, dataset_or_error
from annotations.models import Campaign, Dataset
from judging import services
from judging.config import ConfigError, validate_config
from judging.models import JudgeRun, RunStatus
from judging.selectors import RunProgress, judge_run_progress

BAR_WIDTH = 30


def progress_line(progress: RunProgress) -> str:
    filled = int(BAR_WIDTH * progress.percent / 100)
    bar = "#" * filled + "." * (BAR_WIDTH - filled)
    parts = [f"[{bar}] {progress.percent:5.1f}% {progress.finished}/{progress.total}"]
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
        self.stdout.write(f"launched judge run {run.name!r} (id {run.pk}): {run.total} unit(s)")
        self._wait(run, options)

    def _estimate(self, dataset: Dataset, raw: object, campaign: Campaign | None, limit: int | None) -> None:
        if not isinstance(raw, dict):
            raise CommandError("the config must be a JSON object")
        if limit is not None and limit < 1:
            raise CommandError("limit must be at least 1")
        try:
            cfg = validate_config(raw)
            estimate = services.estimate_run(dataset=dataset, cfg=cfg, campaign=campaign, limit=limit)
        except ConfigError as exc:
            raise CommandError("invalid judge config:\n  " + "\n  ".join(exc.errors)) from None
        except services.LaunchError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"estimate for {cfg.name!r} on {dataset.name!r} (nothing was launched):")
        for line in estimate_lines(estimate):
            self.stdout.write("  " + line)

    def _wait(self, run: JudgeRun, options: dict[str, object]) -> None:
        if not options["wait"]:
            return
        poll = max(0.05, float(options["poll"]))  # type: ignore[arg-type]
        while True:
            progress = judge_run_progress(run)
            self.stdout.write("\r" + progress_line(progress), ending="")
            self.stdout.flush()
            if not progress.is_active:
                break
            # The same periodic rule the worker's scheduler applies, for a worker started without --beat.
            services.judge_runs_nudge_stalled()
            time.sleep(poll)
        self.stdout.write("")
        self.stdout.write(f"run {run.name!r} {progress.status}")
        if progress.notes:
            self.stdout.write(progress.notes)
        if progress.errors_by_kind:
            self.stdout.write("errors: " + ", ".join(f"{k}={v}" for k, v in progress.errors_by_kind.items()))
        if progress.status != RunStatus.SUCCEEDED:
            raise CommandError(f"judge run {run.name!r} ended with status {progress.status}")


def estimate_lines(estimate: services.Estimate) -> list[str]:
    cost = f"${estimate.cost_usd:.4f}" if estimate.cost_usd is not None else "unknown (litellm has no prices)"
    return [
        f"units:             {estimate.units}",
        f"calls:             {estimate.calls}",
        f"cached calls:      {estimate.cached_calls}",
        f"prompt tokens:     {estimate.prompt_tokens}",
        f"completion tokens: {estimate.completion_tokens}",
        f"cost:              {cost}",
        f"aspects:           {', '.join(estimate.aspects)}",
    ]


def argparse_hidden() -> str:
    return argparse.SUPPRESS

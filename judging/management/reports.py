"""What the statistics report commands share: the dataset, judge, scope and rater-model options, the one way a report
is read and printed (JSON, or text in English), and the text helpers of their tables."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser, no_translations

from annotations.management.lookup import add_owner_argument, dataset_or_error
from annotations.models import Dataset
from judging.analysis.selectors import (
    HUMAN_SCORE_CHOICES,
    ORIGINS,
    RatingScope,
    ScopeError,
    campaign_by_name,
    rating_scope,
)
from judging.certification.selectors import judge_certification


def add_scope_arguments(parser: CommandParser) -> None:
    parser.add_argument(
        "--origin",
        choices=ORIGINS,
        help="whose ratings: all (default), imported (the raters of the imported file) or app (collected here)",
    )
    parser.add_argument("--campaign", help="only the ratings this annotation campaign collected (app ratings)")
    parser.add_argument(
        "--include-excluded",
        action="store_true",
        help="include the raters a researcher excluded (left out by default), to compare",
    )
    parser.add_argument(
        "--human",
        choices=HUMAN_SCORE_CHOICES,
        default="raw",
        help="an answer's human score: the mean of its ratings (raw, default) or its adjudicated value where a "
        "dispute was settled (adjudicated); agreement among raters always reads the raw ratings",
    )


def scope_or_error(dataset: Dataset, options: dict[str, Any]) -> RatingScope:
    campaign = None
    if options.get("campaign"):
        campaign = campaign_by_name(dataset, str(options["campaign"]))
        if campaign is None:
            raise CommandError(f"no campaign named {options['campaign']!r} on this dataset")
    try:
        scope = rating_scope(options.get("origin"), campaign, include_excluded=bool(options.get("include_excluded")))
    except ScopeError as exc:
        raise CommandError(str(exc)) from None
    return scope.with_adjudicated(options.get("human") == "adjudicated").with_rater_model(
        str(options.get("rater_model") or "none")
    )


def add_rater_model_argument(parser: CommandParser) -> None:
    from judging.statistics.rater_models import MODELS  # noqa: PLC0415 - the commands' startup stays light

    parser.add_argument(
        "--rater-model",
        choices=("none", *MODELS),
        default="none",
        help="an answer's human score estimated by a rater model from every rating of the aspect (Dawid-Skene or "
        "MACE: the posterior label; severity: the score adjusted for each rater's severity) instead of the mean",
    )


def exclusions_text(scope: dict[str, Any], *, hint: bool = True) -> str | None:
    """The line that says which excluded raters the numbers leave out or include, with the option that brings
    them back when `hint`; None when there are none."""
    exclusions = scope.get("exclusions") or {}
    raters = exclusions.get("raters") or []
    if not raters:
        return None
    names = ", ".join(f"{rater['rater']} ({rater['reason']})" for rater in raters)
    if exclusions.get("left_out"):
        suffix = "; --include-excluded brings them back in" if hint else ""
        return f"Leaving out {len(raters)} excluded rater(s): {names}{suffix}"
    return f"Including {len(raters)} excluded rater(s): {names}"


def write_scope(command: BaseCommand, scope: RatingScope, report: dict[str, Any]) -> None:
    command.stdout.write(f"Ratings: {scope.label}")
    line = exclusions_text(report["scope"])
    if line:
        command.stdout.write(line)


def as_json(report: dict[str, Any]) -> str:
    # Unicode names stay readable; allow_nan=False guarantees the output never carries NaN.
    return json.dumps(report, ensure_ascii=False, indent=2, allow_nan=False)


def number(stat: dict[str, Any] | None, digits: int = 3) -> str:
    value = (stat or {}).get("value")
    return "-" if value is None else f"{value:.{digits}f}"


def interval_text(interval: dict[str, Any] | None, digits: int = 3) -> str:
    if not interval or interval.get("low") is None:
        return "-"
    return f"[{interval['low']:.{digits}f}, {interval['high']:.{digits}f}]"


def text_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in [header, *rows]
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


class DatasetReportCommand(BaseCommand):
    """A read-only report on one dataset's ratings: `--dataset` and its owner, `--judge` when `judge_help` names it,
    the command's own options, the rating scope, the rater model when `rater_model`, and `--json`. `report` computes
    it (its `errors` become a command error), with the judge's certification beside it when `certified`;
    `write_text` prints it for a reader, starting with `write_heading`."""

    # The system checks would load every URL and view first (about 0.4 s); `manage.py check` runs them on their own.
    requires_system_checks: list[str] = []
    judge_help = ""
    certified = False
    rater_model = True
    json_help = "print the JSON documented in docs/statistics.md"
    errors: tuple[type[Exception], ...] = ()

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dataset", required=True, help="dataset name")
        add_owner_argument(parser)
        if self.judge_help:
            parser.add_argument("--judge", required=True, help=self.judge_help)
        self.add_report_arguments(parser)
        add_scope_arguments(parser)
        if self.rater_model:
            add_rater_model_argument(parser)
        parser.add_argument("--json", action="store_true", help=self.json_help)

    def add_report_arguments(self, parser: CommandParser) -> None:
        """The command's own options, placed between the dataset's and the scope's."""

    def report(self, dataset: Dataset, scope: RatingScope, options: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def write_text(self, report: dict[str, Any], scope: RatingScope, options: dict[str, Any]) -> None:
        raise NotImplementedError

    def write_heading(self, title: str, scope: RatingScope, report: dict[str, Any]) -> None:
        """The report's title, the judge version it read with that version's standing when `certified`, and the
        ratings it read."""
        self.stdout.write(title)
        if self.certified:
            certification = report["certification"]
            self.stdout.write(f"Judge version {certification['version'] or 'none'}: {certification['standing']}")
        write_scope(self, scope, report)

    # Reports are for scripts and logs: always in English, whatever language the calling process had active.
    @no_translations
    def handle(self, *args: object, **options: Any) -> None:
        dataset = dataset_or_error(str(options["dataset"]), options["owner"])
        scope = scope_or_error(dataset, options)
        try:
            report = self.report(dataset, scope, options)
            if self.certified:
                report = {**report, "certification": judge_certification(dataset, str(options["judge"]))}
        except self.errors as exc:
            raise CommandError(str(exc)) from None
        if options["json"]:
            self.stdout.write(as_json(report))
            return
        self.write_text(report, scope, options)

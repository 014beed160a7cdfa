from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser, no_translations

from annotations.management.lookup import add_owner_argument, dataset_or_error
from annotations.models import Dataset
from judging.analysis.reports import agreement_report
from judging.analysis.selectors import (
    HUMAN_SCORE_CHOICES,
    ORIGINS,
    RatingScope,
    ScopeError,
    campaign_by_name,
    rating_scope,
)


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


class Command(BaseCommand):
    # A read-only report: the system checks would load every URL and view first (about 0.4 s), and
    # `manage.py check` runs them on their own.
    requires_system_checks: list[str] = []
    help = (
        "Agreement between raters per aspect: Krippendorff's alpha (nominal, ordinal, interval) with "
        "a bootstrap 95% CI for the rubric's level, Fleiss' kappa, Gwet's AC1, ICCs and percent agreement."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="dataset name (quote names with spaces)")
        add_owner_argument(parser)
        add_scope_arguments(parser)
        parser.add_argument("--json", action="store_true", help="print the stable JSON documented in the README")

    # Reports are for scripts and logs: always in English, whatever language the calling process had active.
    @no_translations
    def handle(self, *args: object, **options: Any) -> None:
        dataset = dataset_or_error(str(options["name"]), options["owner"])
        scope = scope_or_error(dataset, options)
        report = agreement_report(dataset, scope)
        if options["json"]:
            self.stdout.write(as_json(report))
            return
        rows = []
        reasons: dict[str, str] = {}
        for aspect, summary in report["aspects"].items():
            primary = {"ratio": "interval"}.get(summary["level"], summary["level"])
            for key in ("fleiss_kappa", "gwet_ac1"):
                if summary[key]["undefined"]:
                    reasons[f"{aspect} {key}"] = summary[key]["undefined"]
            rows.append(
                [
                    aspect,
                    summary["level"],
                    str(summary["n_items"]),
                    str(summary["n_ratings"]),
                    number(summary["alpha"][primary]),
                    interval_text(summary["alpha_ci95"]),
                    number(summary["alpha"]["nominal"]),
                    number(summary["alpha"]["ordinal"]),
                    number(summary["alpha"]["interval"]),
                    number(summary["fleiss_kappa"]),
                    number(summary["gwet_ac1"]),
                    number(summary["icc"]["ICC1"]),
                    number(summary["percent_agreement"]["exact"]),
                    number(summary["percent_agreement"]["within_1"]),
                ]
            )
        header = ["aspect", "level", "items", "ratings", "alpha", "95% CI", "nominal", "ordinal", "interval"]
        header += ["fleiss", "AC1", "ICC1", "exact", "±1"]
        self.stdout.write(f"Agreement for dataset {report['dataset']}")
        write_scope(self, scope, report)
        self.stdout.write(text_table(header, rows))
        for where, reason in reasons.items():
            self.stdout.write(f"  {where}: undefined ({reason})")
        self._write_preferences(report["preferences"])

    def _write_preferences(self, preferences: dict[str, Any]) -> None:
        if not preferences["n_preferences"]:
            self.stdout.write("Preferences: none given")
            return
        agreement = preferences["agreement"]
        self.stdout.write(
            f"Preferences: {preferences['n_preferences']} on {preferences['n_prompts']} prompts; none appropriate "
            f"{number(preferences['none_appropriate'])}; alpha (nominal) {number(agreement['alpha'])} "
            f"{interval_text(agreement['alpha_ci95'])}"
        )
        rows = [
            [
                row["system"],
                str(row["shown"]),
                str(row["chosen"]),
                number(row["win_rate"]),
                interval_text(row["win_rate_ci95"]),
                number(row["none_appropriate"]),
            ]
            for row in preferences["systems"]
        ]
        self.stdout.write(text_table(["system", "shown", "chosen", "win rate", "95% CI", "none appropriate"], rows))
        for judge, by_aspect in preferences["judges"].items():
            for aspect, entry in by_aspect.items():
                shown = number(entry["agreement"]) if entry["agreement"]["value"] is not None else "-"
                why = f" ({entry['agreement']['undefined']})" if entry["agreement"]["undefined"] else ""
                self.stdout.write(
                    f"  {judge} / {aspect}: same preference as the humans {shown}{why} on "
                    f"{entry['n_decided']} of {entry['n_pairs']} shared pairs"
                )
                votes = entry.get("vote_agreement")
                if votes:
                    self.stdout.write(
                        f"  {judge} / {aspect}: vote agreement with the humans (Zheng et al. 2023): "
                        f"{_vote_share(votes['with_ties'])} with ties, {_vote_share(votes['without_ties'])} without"
                    )


def _vote_share(setting: dict[str, Any]) -> str:
    value = setting["agreement"]["value"]
    shown = "-" if value is None else f"{value:.3f}"
    return f"{shown} ({setting['n_agree']} of {setting['n_vote_pairs']} vote pairs)"

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from annotations.models import Dataset
from judging.analysis.ranking_reports import HUMANS, ranking_report
from judging.analysis.reports import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, JudgeNotFound, ReportError
from judging.analysis.selectors import RatingScope
from judging.management.argument_types import whole_number_at_least
from judging.management.reports import DatasetReportCommand, interval_text, number, text_table
from judging.statistics.pairwise import DEFAULT_TIES, TIE_CONVENTIONS
from judging.statistics.ranking import MIN_BOOTSTRAP

_resamples = whole_number_at_least(MIN_BOOTSTRAP, "number of resamples")
_seed = whole_number_at_least(0, "seed")


class Command(DatasetReportCommand):
    help = (
        "Rank the systems with their uncertainty: Bradley-Terry from pairwise outcomes (the humans' preferences or a "
        "pairwise judge), or with --aspect by mean rating; rank intervals from a bootstrap over prompts."
    )
    errors = (JudgeNotFound, ReportError)

    def add_report_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--source", default=HUMANS, help="humans (default) or a judge's name")
        parser.add_argument("--aspect", help="rank by the mean rating on this aspect instead of pairwise outcomes")
        parser.add_argument("--reference", help="system whose log-strength is 0 (default: the first in sorted order)")
        parser.add_argument(
            "--ties",
            choices=list(TIE_CONVENTIONS),
            help=f"how Bradley-Terry treats ties: half (a tie is half a win to each side), drop (ties left out) or "
            f"davidson (Davidson's tie model); default {DEFAULT_TIES}",
        )
        parser.add_argument(
            "--bootstrap",
            type=_resamples,
            default=BOOTSTRAP_RESAMPLES,
            help=f"prompt resamples for the rank intervals (default {BOOTSTRAP_RESAMPLES}, at least {MIN_BOOTSTRAP})",
        )
        parser.add_argument("--seed", type=_seed, default=BOOTSTRAP_SEED, help="bootstrap seed (default 0)")

    def report(self, dataset: Dataset, scope: RatingScope, options: dict[str, Any]) -> dict[str, Any]:
        return ranking_report(
            dataset,
            str(options["source"]),
            options["aspect"],
            options["reference"],
            n_resamples=options["bootstrap"],
            seed=options["seed"],
            scope=scope,
            ties=options["ties"],
        )

    def write_text(self, report: dict[str, Any], scope: RatingScope, options: dict[str, Any]) -> None:
        what = f"mean rating on {report['aspect']}" if report["aspect"] else _bradley_terry_with(report["ties"])
        self.write_heading(
            f"Ranking of the systems of dataset {report['dataset']} by {report['source']} ({what})", scope, report
        )
        if report["undefined"]:
            self.stdout.write(f"Undefined: {report['undefined']}")
            return
        count = report.get("n_comparisons", report.get("n_answers"))
        unit = "comparisons" if report["model"] == "bradley_terry" else "answers"
        self.stdout.write(
            f"{count} {unit} on {report['n_prompts']} prompts; reference {report['reference'] or 'none'}; rank "
            f"intervals from {report['bootstrap']['resamples']} prompt resamples (seed {report['bootstrap']['seed']})"
        )
        rows = [
            [
                str(row["rank"]) if row["rank"] is not None else "—",
                f"{row['rank_ci95']['best']}–{row['rank_ci95']['worst']}" if row["rank_ci95"] else "",
                row["system"],
                number(row["strength"]),
                number(row["se"]),
                interval_text(row["ci95"]),
                "" if row["wins"] is None else f"{row['wins']}/{row['losses']}/{row['ties']}",
            ]
            for row in report["systems"]
        ]
        self.stdout.write(text_table(["rank", "rank 95%", "system", "strength", "SE", "95% CI", "W/L/T"], rows))
        nu = report.get("ties", {}).get("tie_parameter")
        if nu is not None:
            nu_ci = report["ties"].get("tie_parameter_ci95")
            self.stdout.write(
                f"Davidson tie parameter nu: {number(nu)} {interval_text(nu_ci) if nu_ci else ''}".rstrip()
            )
        versus = report.get("versus_humans")
        if versus:
            self.stdout.write(
                f"Kendall's tau-b with the humans' ranking over {versus['n_systems']} systems: "
                f"{number(versus['kendall_tau'])} {interval_text(versus['ci95'])}"
            )


def _bradley_terry_with(ties: dict[str, Any]) -> str:
    counted = f"{ties['n_ties']} ties" if ties["n_ties"] != 1 else "1 tie"
    return f"Bradley-Terry, ties: {ties['convention']}, {ties['description']}; {counted}"

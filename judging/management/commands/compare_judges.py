from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from annotations.models import Dataset
from judging.analysis.decisions import COMPARISON_LEVELS, ComparisonError, JudgeNotFound, judge_comparison_report
from judging.analysis.selectors import RatingScope
from judging.management.reports import DatasetReportCommand, interval_text, number, text_table
from judging.statistics.correlation import COEFFICIENTS


class Command(DatasetReportCommand):
    help = (
        "Two judges against the same human scores, per aspect: both correlations, their difference with a 95% CI "
        "(Zou 2007 for Pearson, a paired bootstrap otherwise), Williams's t and Steiger's z. The one-sided p tests "
        "whether the first judge tracks the humans better."
    )
    rater_model = False
    json_help = "print the stable JSON documented in the README"
    errors = (JudgeNotFound, ComparisonError)

    def add_report_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--judges", nargs=2, required=True, metavar=("J1", "J2"), help="the two judges' names")
        parser.add_argument("--aspect", help="one aspect (default: every aspect both judges scored)")
        parser.add_argument("--level", choices=COMPARISON_LEVELS, default="response", help="default: response")
        parser.add_argument("--coefficient", choices=COEFFICIENTS, default="pearson", help="default: pearson")

    def report(self, dataset: Dataset, scope: RatingScope, options: dict[str, Any]) -> dict[str, Any]:
        first, second = (str(name) for name in options["judges"])
        return judge_comparison_report(
            dataset,
            first,
            second,
            scope,
            aspect=options["aspect"],
            level=str(options["level"]),
            coefficient=str(options["coefficient"]),
        )

    def write_text(self, report: dict[str, Any], scope: RatingScope, options: dict[str, Any]) -> None:
        first, second = (str(name) for name in options["judges"])
        self.write_heading(
            f"{first} versus {second} on dataset {report['dataset']} "
            f"({report['coefficient']}, {report['level']} level)",
            scope,
            report,
        )
        rows = []
        for aspect, entry in report["aspects"].items():
            williams = entry["williams"]
            rows.append(
                [
                    aspect,
                    str(entry["n"]),
                    number(entry["judges"][0]["r"]),
                    number(entry["judges"][1]["r"]),
                    number(entry["difference"]),
                    interval_text(entry["difference_ci95"]),
                    number(williams["t"]),
                    number(williams["p_two_sided"], 4),
                    number(williams["p_one_sided"], 4),
                    number(entry["steiger"]["z"]),
                    entry["undefined"] or "",
                ]
            )
        header = ["aspect", "n", "r1", "r2", "r1 - r2", "95% CI", "Williams t", "p", "p (r1 > r2)", "Steiger z", "note"]
        self.stdout.write(text_table(header, rows))

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from annotations.models import Dataset
from judging.analysis.judge_reports import DEFAULT_EPSILON, METRIC_CHOICES, AltTestSettings, alt_test_report
from judging.analysis.reports import JudgeNotFound, ReportError
from judging.analysis.selectors import RatingScope
from judging.management.argument_types import open_unit_interval, whole_number_at_least
from judging.management.reports import DatasetReportCommand, number, text_table
from judging.statistics.alt_test import DEFAULT_MIN_INSTANCES, DEFAULT_Q


def _epsilon(text: str) -> float:
    value = float(text)
    if not 0.0 <= value < 1.0:
        raise ValueError(text)
    return value


_epsilon.__name__ = "epsilon (a number in [0, 1))"
_q = open_unit_interval("q")
_min_instances = whole_number_at_least(2, "minimum")


class Command(DatasetReportCommand):
    help = (
        "The alternative-annotator test (Calderon, Reichart and Dror 2025): can the judge replace a rater? Each rater "
        "is left out in turn; one-sided t-tests with the cost-benefit margin epsilon, Benjamini-Yekutieli at FDR q; "
        "passed when the winning rate is at least 0.5."
    )
    certified = True
    judge_help = "judge name"
    errors = (JudgeNotFound, ReportError)

    def add_report_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--aspect", help="one aspect (default: every aspect the judge scores)")
        parser.add_argument(
            "--epsilon",
            type=_epsilon,
            default=DEFAULT_EPSILON,
            help=f"cost-benefit margin given to the judge (default {DEFAULT_EPSILON}; the paper suggests 0.2 for "
            "experts, 0.15 for skilled annotators, 0.1 for crowd-workers)",
        )
        parser.add_argument("--q", type=_q, default=DEFAULT_Q, help=f"false discovery rate (default {DEFAULT_Q})")
        parser.add_argument(
            "--metric",
            choices=METRIC_CHOICES,
            default="auto",
            help="alignment score: auto (accuracy for nominal aspects, negative RMSE otherwise), accuracy or neg_rmse",
        )
        parser.add_argument(
            "--min-instances",
            type=_min_instances,
            default=DEFAULT_MIN_INSTANCES,
            help=f"raters with fewer usable answers are skipped (default {DEFAULT_MIN_INSTANCES})",
        )

    def report(self, dataset: Dataset, scope: RatingScope, options: dict[str, Any]) -> dict[str, Any]:
        settings = AltTestSettings(
            epsilon=options["epsilon"], q=options["q"], metric=options["metric"], min_instances=options["min_instances"]
        )
        return alt_test_report(dataset, str(options["judge"]), options["aspect"], settings, scope)

    def write_text(self, report: dict[str, Any], scope: RatingScope, options: dict[str, Any]) -> None:
        self.write_heading(
            f"Alternative-annotator test of judge {report['judge']} on dataset {report['dataset']}", scope, report
        )
        for aspect, result in report["aspects"].items():
            self.stdout.write("")
            passed = result["passed"]
            verdict = (
                f"undefined: {passed['undefined']}"
                if passed["value"] is None
                else ("PASSED" if passed["value"] else "FAILED")
            )
            self.stdout.write(
                f"aspect {aspect}: {verdict}; winning rate {number(result['winning_rate'])} "
                f"({result['rejected']} of {result['raters_tested']} raters), advantage probability "
                f"{number(result['advantage_probability'])}; epsilon {result['epsilon']}, q {result['q']}, "
                f"metric {result['metric']}"
            )
            rows = [
                [
                    row["rater"],
                    str(row["n"]),
                    number(row["rho_judge"]),
                    number(row["rho_human"]),
                    number(row["p_value"], 4),
                    number(row["p_adjusted"], 4),
                    "" if row["rejected"] is None else ("yes" if row["rejected"] else "no"),
                    row["skipped"] or "",
                ]
                for row in result["raters"]
            ]
            header = ["rater", "n", "rho judge", "rho rater", "p", "p BY", "rejected", "skipped"]
            self.stdout.write(text_table(header, rows))

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from annotations.models import Dataset
from judging.analysis.rater_model_reports import rater_model_report
from judging.analysis.reports import ReportError
from judging.analysis.selectors import RatingScope
from judging.management.reports import DatasetReportCommand, number, text_table
from judging.statistics.rater_models import MODELS


def _reliability_first(rater: dict[str, Any]) -> tuple[bool, float]:
    value = rater["reliability"]["value"]
    return (value is None, -(value or 0.0))


class Command(DatasetReportCommand):
    help = (
        "Human scores from a rater model: Dawid-Skene or MACE (categorical labels) or the additive rater-severity "
        "model (ordinal scores) per aspect, with each rater's estimated reliability and each answer's model-based "
        "label or score (docs/statistics.md, Rater models)."
    )
    rater_model = False
    json_help = "also print every answer's label or score, as JSON"
    errors = (ReportError,)

    def add_report_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--model", required=True, choices=MODELS, help="the rater model")
        parser.add_argument("--aspect", help="one aspect (default: every aspect)")

    def report(self, dataset: Dataset, scope: RatingScope, options: dict[str, Any]) -> dict[str, Any]:
        return rater_model_report(dataset, str(options["model"]), options["aspect"], scope)

    def write_text(self, report: dict[str, Any], scope: RatingScope, options: dict[str, Any]) -> None:
        self.write_heading(f"Rater model {report['model']} on dataset {report['dataset']}", scope, report)
        for aspect, result in report["aspects"].items():
            self.stdout.write("")
            if result["undefined"]:
                self.stdout.write(f"aspect {aspect}: undefined: {result['undefined']}")
                continue
            state = "converged" if result["converged"] else "did not converge"
            self.stdout.write(
                f"aspect {aspect}: {len(result['items'])} answers, {state} in {result['iterations']} rounds"
            )
            rows = [
                [
                    str(rater["rater"]),
                    str(rater["n"]),
                    number(rater["reliability"]),
                    number(rater["severity"]),
                    number(rater["error_sd"]),
                ]
                for rater in sorted(result["raters"], key=_reliability_first)
            ]
            self.stdout.write(text_table(["rater", "n", "reliability", "severity", "error sd"], rows))

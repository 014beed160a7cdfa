from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from annotations.models import Dataset
from judging.analysis.prediction_powered import ppi_report
from judging.analysis.reports import JudgeNotFound, ReportError
from judging.analysis.selectors import RatingScope
from judging.management.reports import DatasetReportCommand, interval_text, number, text_table
from judging.statistics.ppi import TUNINGS


def _rows(entries: list[dict[str, Any]], label: Any) -> list[list[str]]:
    rows = []
    for entry in entries:
        ppi, human = entry["ppi"], entry["human_only"]
        rows.append(
            [
                label(entry),
                str(entry["n"]),
                str(entry["n_total"]),
                number(ppi["estimate"]),
                interval_text(ppi["interval"]),
                number(human["estimate"]),
                interval_text(human["interval"]),
                number(entry["effective_n"], 1),
                number(entry["tuning_lambda"]),
                entry["undefined"] or "",
            ]
        )
    return rows


class Command(DatasetReportCommand):
    help = (
        "Prediction-powered inference (Angelopoulos et al. 2023, with PPI++ power tuning): each system's mean score "
        "and each pairwise difference from the judge's scores on every answer and the humans' on a random subset, "
        "with 95% CLT intervals beside the human-only ones and the effective number of human ratings."
    )
    judge_help = "judge name (it must score every answer)"
    errors = (JudgeNotFound, ReportError)

    def add_report_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--aspect", help="one aspect (default: every aspect the judge scores)")
        parser.add_argument(
            "--tuning",
            choices=TUNINGS,
            default="ppi++",
            help="ppi++ (default: the variance-minimising weight on the judge) or ppi (weight 1)",
        )

    def report(self, dataset: Dataset, scope: RatingScope, options: dict[str, Any]) -> dict[str, Any]:
        return ppi_report(dataset, str(options["judge"]), options["aspect"], str(options["tuning"]), scope)

    def write_text(self, report: dict[str, Any], scope: RatingScope, options: dict[str, Any]) -> None:
        self.write_heading(
            f"Prediction-powered estimates from judge {report['judge']} on dataset {report['dataset']} "
            f"({report['tuning']}, {report['confidence']:.0%} intervals)",
            scope,
            report,
        )
        header = ["", "n", "N", "PPI", "PPI 95% CI", "humans", "humans 95% CI", "effective n", "lambda", "undefined"]
        for aspect, result in report["aspects"].items():
            self.stdout.write("")
            self.stdout.write(f"aspect {aspect}: system means")
            self.stdout.write(text_table(["system", *header[1:]], _rows(result["systems"], lambda e: e["system"])))
            if result["differences"]:
                self.stdout.write(f"aspect {aspect}: differences (A - B on the prompts both answered)")
                self.stdout.write(
                    text_table(
                        ["A - B", *header[1:]],
                        _rows(result["differences"], lambda e: f"{e['system_a']} - {e['system_b']}"),
                    )
                )

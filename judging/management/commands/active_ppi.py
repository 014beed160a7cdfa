from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser, no_translations

from judging.management.argument_types import open_unit_interval
from judging.management.csv_columns import column_cells, numbers, optional_numbers, read_rows
from judging.management.reports import as_json, interval_text, number, text_table
from judging.statistics.active_ppi import active_ppi_mean
from judging.statistics.ppi import TUNINGS
from judging.statistics.stratified_ppi import Stratum, stratified_ppi_mean


def _strata(names: list[str], human: list[float | None], judge: list[float]) -> list[Stratum]:
    grouped: dict[str, tuple[list[float], list[float], list[float]]] = {}
    for name, y, f in zip(names, human, judge, strict=True):
        rated, labelled, unlabelled = grouped.setdefault(name, ([], [], []))
        if y is None:
            unlabelled.append(f)
        else:
            rated.append(y)
            labelled.append(f)
    return [
        {"name": name, "human": rated, "judge_labelled": labelled, "judge_unlabelled": unlabelled}
        for name, (rated, labelled, unlabelled) in sorted(grouped.items())
    ]


def active_ppi_report(options: dict[str, Any]) -> dict[str, Any]:
    """Active PPI (with --probability) or stratified PPI (with --stratum) of one column of an export."""
    columns, rows = read_rows(str(options["values"]))
    judge = numbers(column_cells(rows, str(options["judge"]), columns), str(options["judge"]))
    human = optional_numbers(column_cells(rows, str(options["human"]), columns), str(options["human"]))
    tuning, confidence = str(options["tuning"]), float(options["confidence"])
    try:
        if options["stratum"]:
            names = column_cells(rows, str(options["stratum"]), columns)
            result: dict[str, Any] = dict(
                stratified_ppi_mean(_strata(names, human, judge), confidence=confidence, tuning=tuning)
            )
            return {"design": "stratified", **result}
        probabilities = numbers(column_cells(rows, str(options["probability"]), columns), str(options["probability"]))
        return {
            "design": "active",
            **active_ppi_mean(human, judge, probabilities, confidence=confidence, tuning=tuning),
        }
    except ValueError as exc:
        raise CommandError(str(exc)) from None


class Command(BaseCommand):
    requires_system_checks: list[str] = []
    help = (
        "Prediction-powered mean when the humans did not rate a uniform random subset: active PPI (Zrnic and "
        "Candès 2024) from each item's recorded sending probability, or stratified PPI (Fisch et al. 2024) from "
        "each item's stratum, read from a CSV export with one row per item (docs/statistics.md)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--values", required=True, help="a UTF-8 CSV file with a header, one row per item")
        parser.add_argument("--judge", required=True, help="the column of the judge's scores (every row)")
        parser.add_argument("--human", required=True, help="the column of human scores (empty where not rated)")
        design = parser.add_mutually_exclusive_group(required=True)
        design.add_argument("--probability", help="the column of each item's probability of being sent to humans")
        design.add_argument("--stratum", help="the column naming each item's stratum (uniform sampling inside each)")
        parser.add_argument("--tuning", choices=TUNINGS, default="ppi++", help="ppi++ (default) or ppi (weight 1)")
        parser.add_argument("--confidence", type=open_unit_interval("confidence"), default=0.95)
        parser.add_argument("--json", action="store_true", help="print the JSON of docs/statistics.md")

    @no_translations
    def handle(self, *args: object, **options: Any) -> None:
        report = active_ppi_report(options)
        if options["json"]:
            self.stdout.write(as_json(report))
            return
        if report["undefined"]:
            self.stdout.write(f"{report['design']} PPI: undefined: {report['undefined']}")
            return
        main = report["active"] if report["design"] == "active" else report["stratified"]
        rows = [
            [
                report["design"],
                number(main["estimate"]),
                interval_text(main["interval"]),
                number(main["standard_error"]),
            ],
            [
                "humans only",
                number(report["human_only"]["estimate"]),
                interval_text(report["human_only"]["interval"]),
                number(report["human_only"]["standard_error"]),
            ],
        ]
        if report["design"] == "active":
            uniform = report["uniform"]
            rows.append(
                ["uniform sampling (width)", "-", interval_text(uniform["interval"]), number(uniform["standard_error"])]
            )
        self.stdout.write(
            f"{report['design'].capitalize()} PPI ({report['tuning']}, {report['confidence']:.0%} intervals): "
            f"{report['n']} human-rated of {report['n_total']} items"
        )
        self.stdout.write(text_table(["", "estimate", "interval", "standard error"], rows))
        if report["design"] == "active":
            self.stdout.write(
                f"lambda {number(report['tuning_lambda'])}; expected ratings {report['expected_n']:.1f}; "
                f"ratings saved against uniform sampling {number(report['ratings_saved'], 1)}"
            )
            return
        strata = [
            [
                stratum["name"],
                f"{stratum['weight']:.3f}",
                str(stratum["n"]),
                str(stratum["n_judge_only"]),
                number(stratum["estimate"]),
                number(stratum["standard_error"]),
                number(stratum["tuning_lambda"]),
            ]
            for stratum in report["strata"]
        ]
        self.stdout.write(
            text_table(["stratum", "weight", "n", "judge only", "estimate", "standard error", "lambda"], strata)
        )

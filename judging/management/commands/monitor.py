from __future__ import annotations

import math
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser, no_translations

from judging.management.argument_types import open_unit_interval, whole_number_at_least
from judging.management.csv_columns import column_cells, numbers, read_rows
from judging.management.reports import as_json, interval_text, number, text_table
from judging.statistics.sequences import (
    METHODS,
    WIN_VALUES,
    Decision,
    Look,
    confidence_sequence,
    difference_decision,
    fixed_sample_intervals,
    paired_difference_sequence,
    width_decision,
    win_rate_sequence,
)


def _positive_width(text: str) -> float:
    value = float(text)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(text)
    return value


_positive_width.__name__ = "width (a positive number)"


def monitor_report(options: dict[str, Any]) -> dict[str, Any]:
    """The running confidence sequence of the file's stream, its stopping rule and the fixed-n intervals."""
    columns, rows = read_rows(str(options["values"]))
    column = str(options["column"])
    method, confidence = str(options["method"]), float(options["confidence"])
    cells = column_cells(rows, column, columns)
    fixed: list[Look] = []
    try:
        if options["outcomes"]:
            unknown = sorted({cell for cell in cells if cell not in WIN_VALUES})
            if unknown:
                raise CommandError(f"column {column!r} must hold win, tie or loss, not {', '.join(map(repr, unknown))}")
            what = f"win rate in {column}"
            looks = win_rate_sequence(cells, confidence=confidence, method=method)
        else:
            if options["lower"] is None or options["upper"] is None:
                raise CommandError("--lower and --upper (the scale's ends) are needed for scores")
            lower, upper = float(options["lower"]), float(options["upper"])
            values = numbers(cells, column)
            if options["versus"]:
                second = numbers(column_cells(rows, str(options["versus"]), columns), str(options["versus"]))
                what = f"mean of {column} - {options['versus']}"
                looks = paired_difference_sequence(
                    values, second, lower=lower, upper=upper, confidence=confidence, method=method
                )
                fixed = fixed_sample_intervals(
                    [a - b for a, b in zip(values, second, strict=True)], confidence=confidence
                )
            else:
                what = f"mean of {column}"
                looks = confidence_sequence(values, lower=lower, upper=upper, confidence=confidence, method=method)
                fixed = fixed_sample_intervals(values, confidence=confidence)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    decision: Decision | None = None
    if options["stop_when"] == "beats":
        decision = difference_decision(looks, first=column, second=str(options["versus"] or "the other"))
    elif options["stop_when"] == "width":
        decision = width_decision(looks, float(options["width"]))
    first_met = None
    if decision is not None and decision["met"]:
        for look in looks:
            probe = (
                difference_decision([look], first=column, second=str(options["versus"] or "the other"))
                if options["stop_when"] == "beats"
                else width_decision([look], float(options["width"]))
            )
            if probe["met"]:
                first_met = look["n"]
                break
    return {
        "what": what,
        "method": method,
        "confidence": confidence,
        "n": len(looks),
        "looks": looks,
        "fixed_n": fixed,
        "stopping_rule": decision,
        "first_met_at": first_met,
    }


class Command(BaseCommand):
    requires_system_checks: list[str] = []
    help = (
        "Anytime-valid monitoring: the confidence sequence of a stream of scores (or of paired differences, or of "
        "win/tie/loss outcomes) read from a CSV in arrival order, its interval at every look, and a stopping rule "
        "(one side beats the other, or the interval is narrow enough) with its evidence (docs/statistics.md, "
        "Confidence sequences)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--values", required=True, help="a UTF-8 CSV file with a header, one row per observation")
        parser.add_argument("--column", required=True, help="the column of scores (or of outcomes with --outcomes)")
        parser.add_argument("--versus", help="a second column: monitor the paired difference column - versus")
        parser.add_argument("--outcomes", action="store_true", help="the column holds win, tie or loss")
        parser.add_argument("--lower", type=float, help="the scale's lowest possible score")
        parser.add_argument("--upper", type=float, help="the scale's highest possible score")
        parser.add_argument("--method", choices=METHODS, default="betting", help="the confidence sequence")
        parser.add_argument("--confidence", type=open_unit_interval("confidence"), default=0.95)
        parser.add_argument(
            "--stop-when",
            choices=("beats", "width"),
            help="beats: the difference's sequence excludes 0 (needs --versus); width: the interval is at most --width",
        )
        parser.add_argument("--width", type=_positive_width, help="the width for --stop-when width")
        parser.add_argument(
            "--every", type=whole_number_at_least(1, "every"), default=1, help="print every k-th look (default 1)"
        )
        parser.add_argument("--json", action="store_true", help="print every look as JSON")

    @no_translations
    def handle(self, *args: object, **options: Any) -> None:
        if options["stop_when"] == "beats" and not options["versus"]:
            raise CommandError("--stop-when beats compares two columns: give the second with --versus")
        if options["stop_when"] == "width" and options["width"] is None:
            raise CommandError("--stop-when width needs --width")
        report = monitor_report(options)
        if options["json"]:
            self.stdout.write(as_json(report))
            return
        self.stdout.write(
            f"Confidence sequence ({report['method']}, {report['confidence']:.0%} at every look at once) for the "
            f"{report['what']}, {report['n']} observations"
        )
        every = int(options["every"])
        fixed = report["fixed_n"]
        rows = []
        for index, look in enumerate(report["looks"]):
            if (index + 1) % every and index + 1 != report["n"]:
                continue
            rows.append(
                [
                    str(look["n"]),
                    number(look["estimate"]),
                    interval_text(look["interval"]),
                    interval_text(fixed[index]["interval"]) if fixed else "-",
                ]
            )
        self.stdout.write(
            text_table(["n", "mean", "anytime-valid interval", "fixed-n interval (valid only at a planned n)"], rows)
        )
        decision = report["stopping_rule"]
        if decision is None:
            return
        if decision["undefined"]:
            self.stdout.write(f"Stopping rule {decision['rule']}: undefined: {decision['undefined']}")
            return
        state = "met" if decision["met"] else "not met"
        self.stdout.write(
            f"Stopping rule {decision['rule']}: {state} ({decision['decision']}) at n = {decision['n']}, "
            f"interval {interval_text(decision['evidence'])}"
        )
        if report["first_met_at"] is not None:
            self.stdout.write(f"First met after {report['first_met_at']} observations")

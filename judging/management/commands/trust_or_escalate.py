from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from annotations.models import Dataset
from judging.analysis.prediction_powered import DEFAULT_DELTA, DEFAULT_TARGET, trust_or_escalate_calibrate
from judging.analysis.reports import JudgeNotFound, ReportError
from judging.analysis.selectors import RatingScope
from judging.management.argument_types import open_unit_interval, whole_number_at_least
from judging.management.reports import DatasetReportCommand, number
from judging.statistics.trust_escalate import DEFAULT_MIN_KEPT

_level = open_unit_interval("level")
_min_kept = whole_number_at_least(1, "minimum")


class Command(DatasetReportCommand):
    help = (
        "Trust or Escalate (Jung, Brahman and Choi 2025): the judge confidence above which its score agrees with the "
        "human label on at least the target share of kept answers, with probability at least 1 - delta, calibrated "
        "by fixed-sequence exact binomial tests on the answers the humans labelled."
    )
    judge_help = "judge name (a run that recorded its confidence)"
    rater_model = False
    errors = (JudgeNotFound, ReportError)

    def add_report_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--aspect", required=True, help="the aspect to calibrate")
        parser.add_argument(
            "--target", type=_level, default=DEFAULT_TARGET, help=f"agreement to guarantee (default {DEFAULT_TARGET})"
        )
        parser.add_argument(
            "--delta", type=_level, default=DEFAULT_DELTA, help=f"allowed failure probability (default {DEFAULT_DELTA})"
        )
        parser.add_argument(
            "--min-kept",
            type=_min_kept,
            default=DEFAULT_MIN_KEPT,
            help=f"no threshold keeping fewer calibration answers is tested (default {DEFAULT_MIN_KEPT})",
        )

    def report(self, dataset: Dataset, scope: RatingScope, options: dict[str, Any]) -> dict[str, Any]:
        return trust_or_escalate_calibrate(
            dataset=dataset,
            judge_name=str(options["judge"]),
            aspect_name=str(options["aspect"]),
            target=options["target"],
            delta=options["delta"],
            min_kept=options["min_kept"],
            scope=scope,
        )

    def write_text(self, report: dict[str, Any], scope: RatingScope, options: dict[str, Any]) -> None:
        self.write_heading(
            f"Trust or Escalate for judge {report['judge']} on dataset {report['dataset']}, aspect {report['aspect']}",
            scope,
            report,
        )
        guarantee = f"agreement >= {report['target']:g} with probability >= {1 - report['delta']:g}"
        if report["undefined"]:
            self.stdout.write(f"threshold: undefined: {report['undefined']}")
        else:
            self.stdout.write(f"threshold: {number(report['threshold'], 4)}")
            self.stdout.write(f"coverage: {number(report['coverage'])} ({report['kept']} of {report['n']} kept)")
            self.stdout.write(f"guaranteed agreement: {guarantee}")
            self.stdout.write(
                f"empirical agreement on kept: {number(report['empirical_agreement'])} (lower bound "
                f"{number(report['agreement_lower_bound'])}, p {number(report['p_value'], 4)})"
            )
        self.stdout.write(f"n: {report['n']} calibration answers")
        skipped = report["labelled_without_confidence"]
        if skipped or report["tied_human_labels"]:
            self.stdout.write(
                f"left out: {skipped} labelled answers without a judge confidence, {report['tied_human_labels']} "
                "with a tied human label"
            )

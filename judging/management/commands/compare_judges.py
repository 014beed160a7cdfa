from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser, no_translations

from annotations.management.lookup import add_owner_argument, dataset_or_error
from judging.analysis.decisions import COMPARISON_LEVELS, ComparisonError, JudgeNotFound, judge_comparison_report
from judging.management.commands.agreement import (
    add_scope_arguments,
    as_json,
    interval_text,
    number,
    scope_or_error,
    text_table,
    write_scope,
)
from judging.statistics.correlation import COEFFICIENTS


class Command(BaseCommand):
    # A read-only report: the system checks would load every URL and view first (about 0.4 s), and
    # `manage.py check` runs them on their own.
    requires_system_checks: list[str] = []
    help = (
        "Two judges against the same human scores, per aspect: both correlations, their difference with a 95% CI "
        "(Zou 2007 for Pearson, a paired bootstrap otherwise), Williams's t and Steiger's z. The one-sided p tests "
        "whether the first judge tracks the humans better."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dataset", required=True, help="dataset name")
        add_owner_argument(parser)
        parser.add_argument("--judges", nargs=2, required=True, metavar=("J1", "J2"), help="the two judges' names")
        parser.add_argument("--aspect", help="one aspect (default: every aspect both judges scored)")
        parser.add_argument("--level", choices=COMPARISON_LEVELS, default="response", help="default: response")
        parser.add_argument("--coefficient", choices=COEFFICIENTS, default="pearson", help="default: pearson")
        add_scope_arguments(parser)
        parser.add_argument("--json", action="store_true", help="print the stable JSON documented in the README")

    # Reports are for scripts and logs: always in English, whatever language the calling process had active.
    @no_translations
    def handle(self, *args: object, **options: Any) -> None:
        dataset = dataset_or_error(str(options["dataset"]), options["owner"])
        scope = scope_or_error(dataset, options)
        first, second = (str(name) for name in options["judges"])
        try:
            report = judge_comparison_report(
                dataset,
                first,
                second,
                scope,
                aspect=options["aspect"],
                level=str(options["level"]),
                coefficient=str(options["coefficient"]),
            )
        except (JudgeNotFound, ComparisonError) as exc:
            raise CommandError(str(exc)) from None
        if options["json"]:
            self.stdout.write(as_json(report))
            return
        self.stdout.write(
            f"{first} versus {second} on dataset {report['dataset']} ({report['coefficient']}, {report['level']} level)"
        )
        write_scope(self, scope, report)
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

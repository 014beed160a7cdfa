from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser, no_translations

from annotations.management.lookup import add_owner_argument, dataset_or_error
from judging.analysis.reports import JudgeNotFound, correlation_report
from judging.certification.selectors import judge_certification
from judging.management.commands.agreement import (
    add_rater_model_argument,
    add_scope_arguments,
    as_json,
    interval_text,
    number,
    scope_or_error,
    text_table,
    write_scope,
)
from judging.statistics.correlation import LEVELS


class Command(BaseCommand):
    # A read-only report: the system checks would load every URL and view first (about 0.4 s), and
    # `manage.py check` runs them on their own.
    requires_system_checks: list[str] = []
    help = (
        "Judge versus humans per aspect at four levels (response, per_prompt, per_system, system): "
        "Pearson, Spearman, Kendall tau-b, n and bootstrap 95% CIs (prompts resampled)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dataset", required=True, help="dataset name")
        add_owner_argument(parser)
        parser.add_argument("--judge", required=True, help="judge name: a run, an imported auto_evals name, or derived")
        add_scope_arguments(parser)
        add_rater_model_argument(parser)
        parser.add_argument("--json", action="store_true", help="print the stable JSON documented in the README")

    # Reports are for scripts and logs: always in English, whatever language the calling process had active.
    @no_translations
    def handle(self, *args: object, **options: Any) -> None:
        dataset = dataset_or_error(str(options["dataset"]), options["owner"])
        scope = scope_or_error(dataset, options)
        try:
            report = correlation_report(dataset, str(options["judge"]), scope)
        except JudgeNotFound as exc:
            raise CommandError(str(exc)) from None
        certified = judge_certification(dataset, str(options["judge"]))
        if options["json"]:
            self.stdout.write(as_json({**report, "certification": certified}))
            return
        self.stdout.write(f"Judge {report['judge']} versus humans on dataset {report['dataset']}")
        self.stdout.write(f"Judge version {certified['version'] or 'none'}: {certified['standing']}")
        write_scope(self, scope, report)
        if not report["aspects"]:
            self.stdout.write("The judge has no scores for any aspect of the dataset's rubric.")
        for aspect, levels in report["aspects"].items():
            rows = []
            for level in LEVELS:
                entry = levels[level]
                rows.append(
                    [
                        level,
                        str(entry["n"]),
                        str(entry.get("n_groups", "")),
                        number(entry["pearson"]),
                        interval_text(entry["ci95"]["pearson"]),
                        number(entry["spearman"]),
                        interval_text(entry["ci95"]["spearman"]),
                        number(entry["kendall"]),
                        interval_text(entry["ci95"]["kendall"]),
                    ]
                )
            self.stdout.write("")
            self.stdout.write(f"aspect {aspect}")
            header = ["level", "n", "groups", "pearson", "95% CI", "spearman", "95% CI", "kendall", "95% CI"]
            self.stdout.write(text_table(header, rows))

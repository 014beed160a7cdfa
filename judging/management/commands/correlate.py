from __future__ import annotations

from typing import Any

from annotations.models import Dataset
from judging.analysis.judge_reports import correlation_report
from judging.analysis.reports import JudgeNotFound
from judging.analysis.selectors import RatingScope
from judging.management.reports import DatasetReportCommand, interval_text, number, text_table
from judging.statistics.correlation import LEVELS


class Command(DatasetReportCommand):
    help = (
        "Judge versus humans per aspect at four levels (response, per_prompt, per_system, system): "
        "Pearson, Spearman, Kendall tau-b, n and bootstrap 95% CIs (prompts resampled)."
    )
    certified = True
    judge_help = "judge name: a run, an imported auto_evals name, or derived"
    json_help = "print the stable JSON documented in the README"
    errors = (JudgeNotFound,)

    def report(self, dataset: Dataset, scope: RatingScope, options: dict[str, Any]) -> dict[str, Any]:
        return correlation_report(dataset, str(options["judge"]), scope)

    def write_text(self, report: dict[str, Any], scope: RatingScope, options: dict[str, Any]) -> None:
        self.write_heading(f"Judge {report['judge']} versus humans on dataset {report['dataset']}", scope, report)
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

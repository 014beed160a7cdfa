from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotations.models import Dataset
from judging.factscore.selectors import factscore_report, factscore_run_by_judge_name


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines.extend("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows)
    return "\n".join(lines)


class Command(BaseCommand):
    # A read-only report: the system checks would load every URL and view first (about 0.4 s), and
    # `manage.py check` runs them on their own.
    requires_system_checks: list[str] = []
    help = (
        "FActScore of a factscore judge run per system: FActScore (supported/all facts, averaged over answers that "
        "did not refuse), %% responding and facts per answer; with human fact reviews, the estimator's error rate "
        "(+/- beyond 5 points), ranking agreement and nominal alpha on fact labels."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dataset", required=True, help="dataset name")
        parser.add_argument("--judge", required=True, help="name of a factscore judge run")
        parser.add_argument("--json", action="store_true", help="print the report as JSON (stable keys)")
        parser.add_argument("--answers", action="store_true", help="also list every answer (JSON and text)")

    def handle(self, *args: object, **options: Any) -> None:
        dataset = Dataset.objects.filter(name=options["dataset"]).first()
        if dataset is None:
            raise CommandError(f"no dataset named {options['dataset']!r}")
        run = factscore_run_by_judge_name(dataset, str(options["judge"]))
        if run is None:
            raise CommandError(f"dataset {dataset.name!r} has no factscore judge run named {options['judge']!r}")
        report = factscore_report(run, include_answers=bool(options["answers"]))
        if options["json"]:
            self.stdout.write(json.dumps(report, ensure_ascii=False, indent=2, sort_keys=True))
            return
        self.stdout.write(f"FActScore of judge {report['judge']} on dataset {report['dataset']} ({report['status']})")
        if report["results_pending"]:
            self.stdout.write("The worker is still preparing this run's results; the numbers below may be incomplete.")
        rows = [
            [
                row["system"],
                _fmt(row["factscore"]),
                _fmt(row["pct_responding"], 1),
                _fmt(row["facts_per_answer"], 1),
                str(row["n_prompts"]),
                str(row["n_scored"]),
                str(row["n_refused"]),
                str(row["n_no_facts"]),
                str(row["n_failed"]),
            ]
            for row in report["systems"]
        ]
        header = ["system", "factscore", "% responding", "facts/answer", "prompts", "scored", "refused", "no facts"]
        header += ["failed"]
        self.stdout.write(_table(header, rows))
        if report["unfinished_answers"]:
            self.stdout.write(f"{report['unfinished_answers']} answer(s) still pending, not counted yet.")
        human = report["human"]
        if human is None:
            self.stdout.write("No submitted human fact reviews.")
        else:
            estimator = human["estimator"]
            self.stdout.write("")
            self.stdout.write(f"Estimator vs humans ({human['reviewed_answers']} reviewed answers)")
            rows = [
                [
                    row["system"],
                    _fmt(row["human"]),
                    _fmt(row["estimated"]),
                    f"{row['error_rate']:.1f}{row['mark']}",
                    str(row["human_rank"]),
                    str(row["estimated_rank"]),
                    str(row["n_answers"]),
                ]
                for row in estimator["systems"]
            ]
            header = ["system", "human", "estimated", "error rate", "human rank", "est. rank", "answers"]
            self.stdout.write(_table(header, rows))
            ranking = {True: "same as the humans", False: "differs from the humans", None: "n/a"}
            self.stdout.write(f"ranking: {ranking[estimator['ranking_equal']]}")
            alpha = human["agreement"]["alpha"]
            self.stdout.write(
                "fact-label agreement (nominal alpha): "
                + (_fmt(alpha["value"]) if alpha["value"] is not None else f"undefined ({alpha['undefined']})")
            )
        if options["answers"]:
            self.stdout.write("")
            rows = [
                [
                    a["item"],
                    a["system"],
                    a["refusal_rule"] if a["refused"] else "",
                    str(a["n_facts"]),
                    str(a["n_supported"]),
                    _fmt(a["score"]),
                    _fmt(a["human_score"]),
                ]
                for a in report["answers"]
            ]
            self.stdout.write(_table(["item", "system", "refusal", "facts", "supported", "score", "human"], rows))

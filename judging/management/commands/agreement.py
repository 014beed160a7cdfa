from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser, no_translations

from annotations.management.lookup import add_owner_argument, dataset_or_error
from judging.analysis.reports import agreement_report
from judging.management.reports import (
    add_scope_arguments,
    as_json,
    interval_text,
    number,
    scope_or_error,
    text_table,
    write_scope,
)


class Command(BaseCommand):
    # A read-only report: the system checks would load every URL and view first (about 0.4 s), and
    # `manage.py check` runs them on their own.
    requires_system_checks: list[str] = []
    help = (
        "Agreement between raters per aspect: Krippendorff's alpha (nominal, ordinal, interval) with "
        "a bootstrap 95% CI for the rubric's level, Fleiss' kappa, Gwet's AC1, ICCs and percent agreement."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="dataset name (quote names with spaces)")
        add_owner_argument(parser)
        add_scope_arguments(parser)
        parser.add_argument("--json", action="store_true", help="print the stable JSON documented in the README")

    # Reports are for scripts and logs: always in English, whatever language the calling process had active.
    @no_translations
    def handle(self, *args: object, **options: Any) -> None:
        dataset = dataset_or_error(str(options["name"]), options["owner"])
        scope = scope_or_error(dataset, options)
        report = agreement_report(dataset, scope)
        if options["json"]:
            self.stdout.write(as_json(report))
            return
        rows = []
        reasons: dict[str, str] = {}
        for aspect, summary in report["aspects"].items():
            primary = {"ratio": "interval"}.get(summary["level"], summary["level"])
            for key in ("fleiss_kappa", "gwet_ac1"):
                if summary[key]["undefined"]:
                    reasons[f"{aspect} {key}"] = summary[key]["undefined"]
            rows.append(
                [
                    aspect,
                    summary["level"],
                    str(summary["n_items"]),
                    str(summary["n_ratings"]),
                    number(summary["alpha"][primary]),
                    interval_text(summary["alpha_ci95"]),
                    number(summary["alpha"]["nominal"]),
                    number(summary["alpha"]["ordinal"]),
                    number(summary["alpha"]["interval"]),
                    number(summary["fleiss_kappa"]),
                    number(summary["gwet_ac1"]),
                    number(summary["icc"]["ICC1"]),
                    number(summary["percent_agreement"]["exact"]),
                    number(summary["percent_agreement"]["within_1"]),
                ]
            )
        header = ["aspect", "level", "items", "ratings", "alpha", "95% CI", "nominal", "ordinal", "interval"]
        header += ["fleiss", "AC1", "ICC1", "exact", "±1"]
        self.stdout.write(f"Agreement for dataset {report['dataset']}")
        write_scope(self, scope, report)
        self.stdout.write(text_table(header, rows))
        for where, reason in reasons.items():
            self.stdout.write(f"  {where}: undefined ({reason})")
        self._write_preferences(report["preferences"])

    def _write_preferences(self, preferences: dict[str, Any]) -> None:
        if not preferences["n_preferences"]:
            self.stdout.write("Preferences: none given")
            return
        agreement = preferences["agreement"]
        self.stdout.write(
            f"Preferences: {preferences['n_preferences']} on {preferences['n_prompts']} prompts; none appropriate "
            f"{number(preferences['none_appropriate'])}; alpha (nominal) {number(agreement['alpha'])} "
            f"{interval_text(agreement['alpha_ci95'])}"
        )
        rows = [
            [
                row["system"],
                str(row["shown"]),
                str(row["chosen"]),
                number(row["win_rate"]),
                interval_text(row["win_rate_ci95"]),
                number(row["none_appropriate"]),
            ]
            for row in preferences["systems"]
        ]
        self.stdout.write(text_table(["system", "shown", "chosen", "win rate", "95% CI", "none appropriate"], rows))
        for judge, by_aspect in preferences["judges"].items():
            for aspect, entry in by_aspect.items():
                shown = number(entry["agreement"]) if entry["agreement"]["value"] is not None else "-"
                why = f" ({entry['agreement']['undefined']})" if entry["agreement"]["undefined"] else ""
                self.stdout.write(
                    f"  {judge} / {aspect}: same preference as the humans {shown}{why} on "
                    f"{entry['n_decided']} of {entry['n_pairs']} shared pairs"
                )
                votes = entry.get("vote_agreement")
                if votes:
                    self.stdout.write(
                        f"  {judge} / {aspect}: vote agreement with the humans (Zheng et al. 2023): "
                        f"{_vote_share(votes['with_ties'])} with ties, {_vote_share(votes['without_ties'])} without"
                    )


def _vote_share(setting: dict[str, Any]) -> str:
    value = setting["agreement"]["value"]
    shown = "-" if value is None else f"{value:.3f}"
    return f"{shown} ({setting['n_agree']} of {setting['n_vote_pairs']} vote pairs)"

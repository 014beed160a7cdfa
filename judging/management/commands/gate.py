import json
import os
import tomllib
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotations.management.lookup import dataset_or_error
from judging.analysis.gate import PASS, RulesError, gate_evaluate, parse_rules

# The convention of test runners and linters, which CI systems rely on: 1 means the checked thing failed, 2 that the
# check itself could not be made as asked.
GATE_FAILED, USAGE_ERROR = 1, 2


class Command(BaseCommand):
    help = (
        "Check release rules on a dataset's statistics (win rate against a baseline, agreement, judge certification) "
        "and exit 0 when every rule passes, 1 when one does not and 2 on a usage error (unreadable or malformed "
        "rules, an unknown dataset or system), printing one line per rule and writing a JSON report."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("rules", help="rules file (TOML or JSON)")
        parser.add_argument("--report", default="gate-report.json", help="where to write the JSON report")
        parser.add_argument("--dataset", help="dataset for the rules that name none (overrides the file's)")
        parser.add_argument("--owner", help="owner of the datasets, when several owners use the name")

    def handle(self, *args: object, **options: object) -> None:
        path = str(options["rules"])
        try:
            raw = Path(path).read_bytes()
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror}", returncode=USAGE_ERROR) from None
        try:
            settings, rules = (
                parse_rules(raw, origin=path)
                if not options["dataset"]
                else parse_rules(_with_dataset(raw, str(options["dataset"]), path), origin=path)
            )
        except RulesError as exc:
            raise CommandError(str(exc), returncode=USAGE_ERROR) from None
        owner = options["owner"] or settings.get("owner")
        default = settings.get("dataset")
        names = {str(rule.get("dataset", default)) for rule in rules}
        try:
            datasets = {name: dataset_or_error(name, owner) for name in sorted(names)}
            outcomes = gate_evaluate(datasets, rules, default_dataset=default)
        except (CommandError, RulesError) as exc:
            raise CommandError(str(exc), returncode=USAGE_ERROR) from None
        passed = all(o.outcome == PASS for o in outcomes)
        for outcome in outcomes:
            self.stdout.write(outcome.line())
        report = {"passed": passed, "rules_file": path, "rules": [o.as_json() for o in outcomes]}
        target = str(options["report"])
        partial = f"{target}.partial"
        with open(partial, "w", encoding="utf-8") as handle:
            json.dump(report, handle, ensure_ascii=False, indent=2)
        os.replace(partial, target)
        failed = sum(o.outcome != PASS for o in outcomes)
        if not passed:
            raise CommandError(
                f"gate failed: {failed} of {len(outcomes)} rules did not pass (report: {target})",
                returncode=GATE_FAILED,
            )
        self.stdout.write(self.style.SUCCESS(f"gate passed: {len(outcomes)} rules (report: {target})"))


def _with_dataset(raw: bytes, dataset: str, origin: str) -> bytes:
    """The rules file with its top-level dataset replaced, as JSON."""
    text = raw.decode("utf-8-sig", errors="replace")
    try:
        data = json.loads(text) if text.lstrip().startswith("{") else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise RulesError(f"{origin}: neither valid JSON nor valid TOML ({exc})") from None
    if isinstance(data, dict):
        data["dataset"] = dataset
    return json.dumps(data).encode()

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotations.management.lookup import add_owner_argument, dataset_or_error
from judging.analysis.reports import JudgeNotFound
from judging.analysis.services import CalibrationError, judge_calibrate
from judging.management.reports import as_json, exclusions_text, number


class Command(BaseCommand):
    help = (
        "LLM-MATE calibration: fit weights of per-aspect deductions to the humans' overall score on an "
        "80/20 split, report the held-out Pearson, and save the judge's calibrated scores as a derived judge."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dataset", required=True, help="dataset name")
        add_owner_argument(parser)
        parser.add_argument("--judge", required=True, help="judge with per-aspect scores for every input aspect")
        parser.add_argument("--target", required=True, help="the overall aspect to predict, e.g. acceptability")
        parser.add_argument(
            "--inputs", required=True, help="comma-separated input aspects, e.g. factuality,amount_info,formality"
        )
        parser.add_argument("--name", help="name of the derived judge (default: '<judge> MATE <target>')")
        parser.add_argument("--seed", type=int, default=0, help="seed of the 80/20 split (default 0)")
        parser.add_argument("--json", action="store_true", help="print the result as JSON")

    def handle(self, *args: object, **options: Any) -> None:
        dataset = dataset_or_error(str(options["dataset"]), options["owner"])
        inputs = [part.strip() for part in str(options["inputs"]).split(",") if part.strip()]
        try:
            result = judge_calibrate(
                dataset=dataset,
                judge_name=str(options["judge"]),
                target=str(options["target"]),
                inputs=inputs,
                name=options["name"],
                seed=int(options["seed"]),
            )
        except (JudgeNotFound, CalibrationError) as exc:
            raise CommandError(str(exc)) from None
        if options["json"]:
            self.stdout.write(as_json(result))
            return
        self.stdout.write(f"Derived judge {result['judge']} ({result['n_scores']} scores on {result['target']})")
        line = exclusions_text(result["scope"], hint=False)
        if line:
            self.stdout.write(line)
        for aspect, weight in result["weights"].items():
            self.stdout.write(f"  w[{aspect}] = {weight:.4f}")
        self.stdout.write(
            f"  held-out Pearson = {number(result['heldout_pearson'], 4)} "
            f"(train {result['n_train']}, test {result['n_test']}, seed {result['seed']})"
        )

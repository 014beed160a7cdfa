from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser, no_translations

from annotations.management.lookup import add_owner_argument, dataset_or_error
from annotations.models import Dataset
from judging.analysis.reports import DatasetData, ReportError, _aspects_or_error, aspect_ratings, load_dataset_data
from judging.analysis.selectors import AspectInfo, RatingScope, exclusions_json
from judging.management.commands.agreement import (
    add_scope_arguments,
    as_json,
    number,
    scope_or_error,
    text_table,
    write_scope,
)
from judging.statistics.rater_models import MODELS, RaterModelResult, fit_rater_model

POSITIONAL = (
    "the imported raters are columns of the file, not the same person on every answer; a rater model needs each "
    "rater to be one person"
)


def _reliability_first(rater: dict[str, Any]) -> tuple[bool, float]:
    value = rater["reliability"]["value"]
    return (value is None, -(value or 0.0))


def _aspect_result(data: DatasetData, aspect: AspectInfo, model: str) -> dict[str, Any]:
    ratings = aspect_ratings(data, aspect)
    if not ratings.raters_consistent:
        return {"model": model, "raters": [], "items": [], "undefined": POSITIONAL}
    triples = [
        (int(unit), ratings.rater_labels[int(rater)], float(value))
        for unit, rater, value in zip(ratings.unit, ratings.rater, ratings.value, strict=True)
    ]
    result: RaterModelResult = fit_rater_model(model, triples)
    response_ids = data.answers.response_ids
    systems = data.answers.system_keys
    # The model keys items by the answer row it was given; this reads them back as rows without a cast.
    row_of: dict[Hashable, int] = {int(unit): int(unit) for unit in ratings.unit}
    items = [
        {
            "response_id": int(response_ids[row_of[item["item"]]]),
            "system": systems[row_of[item["item"]]],
            "label": item["label"],
            "posterior": {f"{label:g}": p for label, p in item["posterior"].items()},
            "score": item["score"],
        }
        for item in result["items"]
    ]
    return {
        "model": model,
        "raters": [dict(rater) for rater in result["raters"]],
        "items": sorted(items, key=lambda item: item["response_id"]),
        "iterations": result["iterations"],
        "converged": result["converged"],
        "log_likelihood": result["log_likelihood"],
        "undefined": result["undefined"],
    }


def rater_model_report(dataset: Dataset, model: str, aspect_name: str | None, scope: RatingScope) -> dict[str, Any]:
    """``rater_model --dataset D --model M --json``: {"dataset", "model", "scope", "aspects": {A: {"model", "raters":
    [{"rater", "n", "reliability", "severity", "error_sd"}], "items": [{"response_id", "system", "label",
    "posterior", "score"}], "iterations", "converged", "log_likelihood", "undefined"}}}."""
    data = load_dataset_data(dataset, scope)
    aspects = {
        aspect.name: _aspect_result(data, aspect, model) for aspect in _aspects_or_error(data.aspects, aspect_name)
    }
    return {
        "dataset": dataset.name,
        "model": model,
        "scope": exclusions_json(data.scope, data.ratings.excluded),
        "aspects": aspects,
    }


class Command(BaseCommand):
    requires_system_checks: list[str] = []
    help = (
        "Human scores from a rater model: Dawid-Skene or MACE (categorical labels) or the additive rater-severity "
        "model (ordinal scores) per aspect, with each rater's estimated reliability and each answer's model-based "
        "label or score (docs/statistics.md, Rater models)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dataset", required=True, help="dataset name")
        add_owner_argument(parser)
        parser.add_argument("--model", required=True, choices=MODELS, help="the rater model")
        parser.add_argument("--aspect", help="one aspect (default: every aspect)")
        add_scope_arguments(parser)
        parser.add_argument("--json", action="store_true", help="also print every answer's label or score, as JSON")

    @no_translations
    def handle(self, *args: object, **options: Any) -> None:
        dataset = dataset_or_error(str(options["dataset"]), options["owner"])
        scope = scope_or_error(dataset, options)
        try:
            report = rater_model_report(dataset, str(options["model"]), options["aspect"], scope)
        except ReportError as exc:
            raise CommandError(str(exc)) from None
        if options["json"]:
            self.stdout.write(as_json(report))
            return
        self.stdout.write(f"Rater model {report['model']} on dataset {report['dataset']}")
        write_scope(self, scope, report)
        for aspect, result in report["aspects"].items():
            self.stdout.write("")
            if result["undefined"]:
                self.stdout.write(f"aspect {aspect}: undefined: {result['undefined']}")
                continue
            state = "converged" if result["converged"] else "did not converge"
            self.stdout.write(
                f"aspect {aspect}: {len(result['items'])} answers, {state} in {result['iterations']} rounds"
            )
            rows = [
                [
                    str(rater["rater"]),
                    str(rater["n"]),
                    number(rater["reliability"]),
                    number(rater["severity"]),
                    number(rater["error_sd"]),
                ]
                for rater in sorted(result["raters"], key=_reliability_first)
            ]
            self.stdout.write(text_table(["rater", "n", "reliability", "severity", "error sd"], rows))

"""Rater-model reports: the `rater_model` command's per-aspect fit, and each rater's estimated reliability that the
campaign quality panel shows (registered in `judging.apps`)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

from annotations.models import AspectKind, Campaign, Dataset, MeasurementLevel
from annotations.quality.rater_reliability import AspectReliability
from judging.analysis.reports import DatasetData, _aspects_or_error, aspect_rater_model_fit, load_dataset_data
from judging.analysis.selectors import AspectInfo, RatingScope, exclusions_json, rating_scope
from judging.analysis.wording import phrase

if TYPE_CHECKING:
    from judging.statistics.rater_models import RaterModelResult

POSITIONAL = (
    "the imported raters are columns of the file, not the same person on every answer; a rater model needs each "
    "rater to be one person"
)


def model_for_level(level: str) -> str:
    """The rater model suited to an aspect's measurement level: nominal labels have no order, so Dawid–Skene's
    confusion matrices; ordered scores, the severity model, which reads distances between them."""
    return "dawid-skene" if level == MeasurementLevel.NOMINAL else "severity"


def aspect_rater_model(data: DatasetData, aspect: AspectInfo, model: str) -> dict[str, Any]:
    result: RaterModelResult | None = aspect_rater_model_fit(data, aspect, model)
    if result is None:
        return {"model": model, "raters": [], "items": [], "undefined": POSITIONAL}
    response_ids = data.answers.response_ids
    systems = data.answers.system_keys
    # The model keys items by the answer row it was given; this reads them back as rows without a cast.
    row_of: dict[Hashable, int] = {int(unit): int(unit) for unit in range(response_ids.size)}
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
        aspect.name: aspect_rater_model(data, aspect, model) for aspect in _aspects_or_error(data.aspects, aspect_name)
    }
    return {
        "dataset": dataset.name,
        "model": model,
        "scope": exclusions_json(data.scope, data.ratings.excluded),
        "aspects": aspects,
    }


def campaign_rater_reliability(campaign: Campaign) -> list[AspectReliability]:
    """Per aspect of the campaign's rubric, each rater's reliability from the model suited to its level, fitted to
    the campaign's ratings with the excluded raters left out (the rating scope's default). The reasons are in the
    reader's language, for the page."""
    data = load_dataset_data(campaign.dataset, rating_scope(campaign=campaign))
    rated = set(campaign.aspects.filter(kind=AspectKind.SCALE).values_list("pk", flat=True))
    found = []
    for aspect in (aspect for aspect in data.aspects if aspect.id in rated):
        model = model_for_level(aspect.level)
        result = aspect_rater_model(data, aspect, model)
        raters = result["raters"]
        found.append(
            AspectReliability(
                aspect=aspect.label or aspect.name,
                model=model,
                undefined=phrase(result["undefined"]) if result["undefined"] else None,
                reliability={str(rater["rater"]): rater["reliability"]["value"] for rater in raters},
                reasons={
                    str(rater["rater"]): phrase(rater["reliability"]["undefined"] or "")
                    for rater in raters
                    if rater["reliability"]["value"] is None
                },
            )
        )
    return found

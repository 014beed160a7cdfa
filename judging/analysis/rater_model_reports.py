"""Rater-model reports: the `rater_model` command's per-aspect fit, and each rater's estimated reliability that the
campaign quality panel shows (registered in `judging.apps`)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

import numpy as np

from annotations.models import AspectKind, Campaign, Dataset, MeasurementLevel, Response
from annotations.quality.rater_reliability import AspectReliability, ItemPosterior
from judging.analysis.reports import (
    DatasetData,
    aspect_rater_model_fit,
    aspect_ratings,
    aspects_or_error,
    cached_report,
    load_dataset_data,
)
from judging.analysis.selectors import AspectInfo, RatingScope, exclusions_json, rating_scope
from judging.analysis.wording import phrase

if TYPE_CHECKING:
    from judging.statistics.rater_models import RaterModelResult

POSITIONAL = (
    "the imported raters are columns of the file, not the same person on every answer; a rater model needs each "
    "rater to be one person"
)


def models_for_level(level: str) -> tuple[str, ...]:
    """The rater models suited to an aspect's measurement level: nominal labels have no order, so Dawid–Skene's
    confusion matrices and MACE's competence and spamming; ordered scores, the severity model, which reads distances
    between them."""
    return ("dawid-skene", "mace") if level == MeasurementLevel.NOMINAL else ("severity",)


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
        aspect.name: aspect_rater_model(data, aspect, model) for aspect in aspects_or_error(data.aspects, aspect_name)
    }
    return {
        "dataset": dataset.name,
        "model": model,
        "scope": exclusions_json(data.scope, data.ratings.excluded),
        "aspects": aspects,
    }


def _campaign_fits(campaign: Campaign, data: DatasetData) -> list[dict[str, Any]]:
    """Per scale aspect of the campaign, the fit of each model suited to its level, with every answer's place (item,
    turn) and the number of ratings it was fitted on; reasons stay English (the page phrases them)."""
    rated = set(campaign.aspects.filter(kind=AspectKind.SCALE).values_list("pk", flat=True))
    fits: list[dict[str, Any]] = []
    row_of = {int(response): i for i, response in enumerate(data.answers.response_ids)}
    for aspect in (aspect for aspect in data.aspects if aspect.id in rated):
        counts = np.bincount(aspect_ratings(data, aspect).unit, minlength=data.answers.response_ids.size)
        for model in models_for_level(aspect.level):
            result = aspect_rater_model(data, aspect, model)
            fits.append(
                {
                    "aspect": aspect.label or aspect.name,
                    "model": model,
                    "result": result,
                    "counts": counts,
                    "rows": row_of,
                }
            )
    # The campaign's answers in one query, whatever the fits hold, so the panel reads a fixed number of queries.
    places = {
        pk: (item, turn)
        for pk, item, turn in Response.objects.filter(campaign_tasks__campaign=campaign).values_list(
            "pk", "turn__item__external_id", "turn__index"
        )
    }
    found = []
    for fit in fits:
        result, counts, row_of = fit["result"], fit["counts"], fit["rows"]
        items = []
        for item in result["items"]:
            response_id = int(item["response_id"])
            label = item["label"]
            external, turn = places.get(response_id, ("?", 0))
            items.append(
                {
                    "response_id": response_id,
                    "item": str(external),
                    "turn": int(turn) + 1,
                    "system": item["system"],
                    "label": None if label is None else float(label),
                    "probability": None if label is None else float(item["posterior"][f"{label:g}"]),
                    "score": item["score"]["value"],
                    "raters": int(counts[row_of[response_id]]),
                }
            )
        found.append(
            {
                "aspect": fit["aspect"],
                "model": fit["model"],
                "undefined": result["undefined"],
                "raters": [
                    (str(rater["rater"]), rater["reliability"]["value"], rater["reliability"]["undefined"])
                    for rater in result["raters"]
                ],
                "items": items,
            }
        )
    return found


def campaign_rater_reliability(campaign: Campaign) -> list[AspectReliability]:
    """Per aspect of the campaign's rubric, each rater's reliability and each answer's posterior label from each model
    suited to its level, fitted to the campaign's ratings with the excluded raters left out (the rating scope's
    default). The fit is cached under the dataset's statistics version, so a page view refits nothing until a
    rating, an exclusion or a gold mark changes; the reasons are in the reader's language, for the page."""
    fits = cached_report(
        campaign.dataset,
        rating_scope(campaign=campaign),
        ["campaign-rater-models", campaign.pk],
        lambda data: _campaign_fits(campaign, data),
    )
    return [
        AspectReliability(
            aspect=fit["aspect"],
            model=fit["model"],
            undefined=phrase(fit["undefined"]) if fit["undefined"] else None,
            reliability={rater: value for rater, value, _why in fit["raters"]},
            reasons={rater: phrase(why or "") for rater, value, why in fit["raters"] if value is None},
            items=[ItemPosterior(**item) for item in fit["items"]],
        )
        for fit in fits
    ]

"""The dataset details report: per aspect, the histogram of the human ratings and the answers the raters disagree
on most, for one system or all; cached like every report."""

from __future__ import annotations

from typing import Any

import numpy as np

from annotations.models import Dataset
from judging.analysis.reports import (
    DISAGREEMENT_ROWS,
    EXCERPT_CHARS,
    HISTOGRAM_MAX_BARS,
    DatasetData,
    aspect_rating_rows,
    aspect_ratings,
    cached_report,
    load_dataset_data,
    pick_aspect,
    single_threaded_blas,
    system_mask,
)
from judging.analysis.selectors import (
    ALL_RATINGS,
    AspectInfo,
    RatingScope,
    answer_details,
    exclusions_json,
)
from judging.statistics.agreement import OUTLIER_RULE as RATER_OUTLIER_RULE
from judging.statistics.agreement import rater_statistics


def _histogram(values: np.ndarray, aspect: AspectInfo) -> list[dict[str, Any]]:
    if values.size == 0:
        return []
    distinct, counts = np.unique(values, return_counts=True)
    if distinct.size <= HISTOGRAM_MAX_BARS:
        return [{"label": _format_value(v), "count": int(c)} for v, c in zip(distinct, counts, strict=True)]
    counts_binned, edges = np.histogram(values, bins=HISTOGRAM_MAX_BARS, range=(aspect.min_value, aspect.max_value))
    return [
        {"label": f"{_format_value(edges[i])}–{_format_value(edges[i + 1])}", "count": int(counts_binned[i])}
        for i in range(counts_binned.size)
    ]


def _format_value(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.3g}"


def _excerpt(text: str | None) -> str:
    text = text or ""
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "…"


def _disagreements(data: DatasetData, aspect: AspectInfo, answer_mask: np.ndarray | None) -> list[dict[str, Any]]:
    """Answers whose ratings spread most (range, then standard deviation), with every rating side by side."""
    rows = aspect_rating_rows(data, aspect, answer_mask)
    if rows.size == 0:
        return []
    answers = data.ratings.answer[rows]
    values = data.ratings.value[rows]
    size = data.answers.response_ids.size
    count = np.bincount(answers, minlength=size)
    total = np.bincount(answers, weights=values, minlength=size)
    square = np.bincount(answers, weights=values * values, minlength=size)
    highest = np.full(size, -np.inf)
    lowest = np.full(size, np.inf)
    np.maximum.at(highest, answers, values)
    np.minimum.at(lowest, answers, values)
    candidates = np.flatnonzero(count >= 2)
    if candidates.size == 0:
        return []
    mean = total[candidates] / count[candidates]
    spread = np.sqrt(np.maximum(square[candidates] / count[candidates] - mean * mean, 0.0))
    value_range = highest[candidates] - lowest[candidates]
    order = np.lexsort((candidates, -np.round(spread, 12), -value_range))[:DISAGREEMENT_ROWS]
    chosen = candidates[order]
    response_ids = [int(data.answers.response_ids[row]) for row in chosen]
    details = answer_details(response_ids)
    result = []
    for rank, row in enumerate(chosen):
        members = rows[answers == row]
        detail = details.get(int(data.answers.response_ids[row]), {})
        result.append(
            {
                "response_id": int(data.answers.response_ids[row]),
                "item": detail.get("item", ""),
                "turn": int(detail.get("turn", 0)) + 1,
                "system": data.answers.system_keys[row],
                "mean": float(mean[order[rank]]),
                "sd": float(spread[order[rank]]),
                "range": float(value_range[order[rank]]),
                "ratings": [
                    {
                        "rater": data.ratings.rater_pseudonyms.get(int(data.ratings.rater_id[m]), ""),
                        "value": float(data.ratings.value[m]),
                    }
                    for m in members
                ],
                "prompt": _excerpt(detail.get("prompt")),
                "answer": _excerpt(detail.get("text")),
            }
        )
    return result


@single_threaded_blas
def compute_dataset_details(
    dataset: Dataset, aspect_name: str | None, system_key: str | None, data: DatasetData | None = None
) -> dict[str, Any]:
    data = data or load_dataset_data(dataset)
    mask = system_mask(data, system_key)
    aspect = pick_aspect(data.aspects, aspect_name)
    distributions = []
    for info in data.aspects:
        rows = aspect_rating_rows(data, info, mask)
        distributions.append(
            {
                "aspect": info.name,
                "label": info.label or info.name,
                "n": int(rows.size),
                "bars": _histogram(data.ratings.value[rows], info),
            }
        )
    return {
        "scope": exclusions_json(data.scope, data.ratings.excluded),
        "aspect": aspect.name if aspect else None,
        "system": system_key or None,
        "systems": sorted(set(data.answers.system_keys)),
        "distributions": distributions,
        "raters": rater_statistics(aspect_ratings(data, aspect, mask)) if aspect else [],
        "raters_positional": bool(aspect and not aspect_ratings(data, aspect).raters_consistent),
        "outlier_rule": RATER_OUTLIER_RULE,
        "disagreements": _disagreements(data, aspect, mask) if aspect else [],
    }


def dataset_details(
    dataset: Dataset,
    aspect_name: str | None = None,
    system_key: str | None = None,
    scope: RatingScope = ALL_RATINGS,
) -> dict[str, Any]:
    """Distributions (per aspect), per-rater table and most-disagreed answers for the dataset page."""
    return cached_report(
        dataset,
        scope,
        ["details", aspect_name or "", system_key or ""],
        lambda data: compute_dataset_details(dataset, aspect_name, system_key, data),
    )

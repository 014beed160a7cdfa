"""Reports that support a decision: is judge A closer to the humans than judge B, and how many items a study
needs. Shared by the commands (``compare_judges``, ``plan_study``), the API and the dashboard, like
``judging.analysis.reports``, whose data loading and cache they reuse.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np

from annotations.models import Campaign, Dataset
from judging.analysis.reports import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    DatasetData,
    JudgeNotFound,
    aspect_ratings,
    cached_report,
    human_means,
    judge_or_raise,
    load_dataset_data,
    single_threaded_blas,
)
from judging.analysis.selectors import (
    ALL_RATINGS,
    AspectInfo,
    RatingScope,
    dataset_judges,
    exclusions_json,
    judge_scores,
    rating_scope,
)
from judging.models import Judge
from judging.statistics.agreement import intraclass_correlations
from judging.statistics.correlation import COEFFICIENTS
from judging.statistics.judge_comparison import (
    ComparisonError,
    compare_judges,
    compare_judges_within_groups,
    holm_adjust,
)
from judging.statistics.planning import (
    PlanningError,
    expected_width,
    items_for_power,
    items_for_width,
    krippendorff_minimum_units,
)
from judging.statistics.results import Interval, Stat, undefined, undefined_interval

COMPARISON_LEVELS = ("response", "per_prompt", "system")
PLAN_STATISTICS = ("pearson", "spearman", "kendall", "icc", "alpha")
# A pair is marked on the judges page when its Holm-adjusted two-sided p is below this.
MATRIX_SIGNIFICANCE = 0.05
# The half-width a campaign is asked to reach on its planning line, and the ICC assumed before any rating exists.
PLAN_TARGET_HALF_WIDTH = 0.05
PLAN_ASSUMED_ICC = 0.7

__all__ = ["ComparisonError", "JudgeNotFound", "PlanningError"]


def _undefined_comparison(judges: list[str], n: int, reason: str) -> dict[str, Any]:
    return {
        "n": n,
        "judges": [{"judge": name, "r": undefined(reason)} for name in judges],
        "r_between": undefined(reason),
        "difference": undefined(reason),
        "difference_ci95": undefined_interval(reason),
        "difference_ci95_method": None,
        "williams": {
            "t": undefined(reason),
            "df": None,
            "p_two_sided": undefined(reason),
            "p_one_sided": undefined(reason),
        },
        "steiger": {"z": undefined(reason), "p_two_sided": undefined(reason)},
        "undefined": reason,
    }


def _system_means(data: DatasetData, rows: np.ndarray, *columns: np.ndarray) -> list[np.ndarray]:
    keys = [data.answers.system_keys[row] for row in rows]
    systems = sorted(set(keys))
    code = np.asarray([systems.index(key) for key in keys], dtype=np.int64)
    count = np.bincount(code, minlength=len(systems)).astype(np.float64)
    return [np.bincount(code, weights=column[rows], minlength=len(systems)) / count for column in columns]


def _compare_aspect(
    data: DatasetData,
    aspect: AspectInfo,
    names: list[str],
    scores: list[np.ndarray],
    *,
    level: str,
    coefficient: str,
    n_resamples: int,
    seed: int,
) -> dict[str, Any]:
    human = human_means(data, aspect)
    first, second = scores
    rows = np.flatnonzero(np.isfinite(human) & np.isfinite(first) & np.isfinite(second))
    try:
        if level == "per_prompt":
            result = compare_judges_within_groups(
                human[rows],
                first[rows],
                second[rows],
                data.answers.turn_ids[rows],
                coefficient=coefficient,
                n_resamples=n_resamples,
                seed=seed,
            )
        elif level == "system":
            means = _system_means(data, rows, human, first, second)
            result = compare_judges(*means, coefficient=coefficient, unit="system", n_resamples=n_resamples, seed=seed)
        else:
            result = compare_judges(
                human[rows], first[rows], second[rows], coefficient=coefficient, n_resamples=n_resamples, seed=seed
            )
    except ComparisonError as exc:
        return _undefined_comparison(names, int(rows.size), str(exc))
    return {
        "n": result["n"],
        "judges": [{"judge": name, "r": r} for name, r in zip(names, result["r"], strict=True)],
        "r_between": result["r_between"],
        "difference": result["difference"],
        "difference_ci95": result["difference_ci95"],
        "difference_ci95_method": result["difference_ci95_method"],
        "williams": result["williams"],
        "steiger": result["steiger"],
        "undefined": None,
    }


def _check_choices(level: str, coefficient: str) -> None:
    if level not in COMPARISON_LEVELS:
        raise ComparisonError(f"level must be one of {', '.join(COMPARISON_LEVELS)}, not {level!r}")
    if coefficient not in COEFFICIENTS:
        raise ComparisonError(f"coefficient must be one of {', '.join(COEFFICIENTS)}, not {coefficient!r}")


@single_threaded_blas
def compute_judge_comparison(
    dataset: Dataset,
    judges: tuple[Judge, Judge],
    data: DatasetData,
    *,
    aspect: str | None,
    level: str,
    coefficient: str,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, Any]:
    names = [judge.name for judge in judges]
    by_judge = [judge_scores(judge, data.answers) for judge in judges]
    aspects = [info for info in data.aspects if aspect is None or info.name == aspect]
    if aspect is not None and not aspects:
        raise ComparisonError(f"the dataset's rubric has no aspect named {aspect!r}")
    for name, scores in zip(names, by_judge, strict=True):
        rated = [info for info in aspects if info.name in scores]
        covered = any(np.any(np.isfinite(human_means(data, info)) & np.isfinite(scores[info.name])) for info in rated)
        if not covered:
            where = f"aspect {aspect!r}" if aspect else "any aspect"
            raise ComparisonError(
                f"judge {name!r} has no score on {where} of an answer the humans rated in this scope "
                f"({data.scope.label})"
            )
    results: dict[str, Any] = {}
    for info in aspects:
        if not all(info.name in scores for scores in by_judge):
            continue
        results[info.name] = _compare_aspect(
            data,
            info,
            names,
            [scores[info.name] for scores in by_judge],
            level=level,
            coefficient=coefficient,
            n_resamples=n_resamples,
            seed=seed,
        )
    if not results:
        raise ComparisonError(f"judges {names[0]!r} and {names[1]!r} share no scored aspect")
    if all(entry["undefined"] for entry in results.values()):
        first_aspect, first_entry = next(iter(results.items()))
        raise ComparisonError(f"aspect {first_aspect!r}: {first_entry['undefined']}")
    return {
        "dataset": dataset.name,
        "judges": names,
        "level": level,
        "coefficient": coefficient,
        "scope": exclusions_json(data.scope, data.ratings.excluded),
        "aspects": results,
    }


def judge_comparison_report(
    dataset: Dataset,
    judge1: str,
    judge2: str,
    scope: RatingScope = ALL_RATINGS,
    *,
    aspect: str | None = None,
    level: str = "response",
    coefficient: str = "pearson",
) -> dict[str, Any]:
    """``compare_judges --json``: {"dataset", "judges", "level", "coefficient", "scope", "aspects": {A: {"n",
    "judges": [{"judge", "r"}], "r_between", "difference", "difference_ci95", "williams", "steiger", ...}}}.

    Raises ``JudgeNotFound`` for an unknown judge and ``ComparisonError`` (with the reason) for anything else the
    comparison cannot stand on."""
    _check_choices(level, coefficient)
    if judge1 == judge2:
        raise ComparisonError("name two different judges to compare")
    judges = (judge_or_raise(dataset, judge1), judge_or_raise(dataset, judge2))
    return cached_report(
        dataset,
        scope,
        ["compare_judges", judges[0].pk, judges[1].pk, aspect or "", level, coefficient],
        lambda data: compute_judge_comparison(
            dataset, judges, data, aspect=aspect, level=level, coefficient=coefficient
        ),
    )


# ---------------------------------------------------------------- the judges page's matrix


def _matrix_cell(entry: dict[str, Any], p_holm: float | None) -> dict[str, Any]:
    mark = None
    difference = entry["difference"]["value"]
    if p_holm is not None and p_holm < MATRIX_SIGNIFICANCE and difference is not None:
        mark = "row" if difference > 0 else "column"
    return {
        "n": entry["n"],
        "difference": entry["difference"],
        "difference_ci95": entry["difference_ci95"],
        "p_two_sided": entry["williams"]["p_two_sided"],
        "p_holm": {"value": p_holm, "undefined": None}
        if p_holm is not None
        else {"value": None, "undefined": entry["williams"]["p_two_sided"]["undefined"] or "undefined"},
        "better": mark,
        "undefined": entry["undefined"],
    }


@single_threaded_blas
def compute_judge_matrix(
    dataset: Dataset, data: DatasetData, judges: list[Judge], *, n_resamples: int = BOOTSTRAP_RESAMPLES
) -> dict[str, Any]:
    scores = {judge.name: judge_scores(judge, data.answers) for judge in judges}
    aspects: dict[str, Any] = {}
    for info in data.aspects:
        names = [judge.name for judge in judges if info.name in scores[judge.name]]
        if len(names) < 2:
            continue
        pairs = list(combinations(names, 2))
        entries = [
            _compare_aspect(
                data,
                info,
                list(pair),
                [scores[pair[0]][info.name], scores[pair[1]][info.name]],
                level="response",
                coefficient="pearson",
                n_resamples=n_resamples,
                seed=BOOTSTRAP_SEED,
            )
            for pair in pairs
        ]
        adjusted = holm_adjust([entry["williams"]["p_two_sided"]["value"] for entry in entries])
        cells = {pair: _matrix_cell(entry, p) for pair, entry, p in zip(pairs, entries, adjusted, strict=True)}
        rows = []
        for row_name in names:
            row: list[dict[str, Any] | None] = []
            for column_name in names:
                if row_name == column_name:
                    row.append(None)
                elif (row_name, column_name) in cells:
                    row.append(cells[(row_name, column_name)])
                else:
                    mirrored = dict(cells[(column_name, row_name)])
                    mirrored["difference"] = _negated(mirrored["difference"])
                    mirrored["difference_ci95"] = _negated_interval(mirrored["difference_ci95"])
                    mirrored["better"] = {"row": "column", "column": "row"}.get(mirrored["better"] or "")
                    row.append(mirrored)
            rows.append({"judge": row_name, "cells": row})
        r_by_judge: dict[str, Stat] = {}
        for entry in entries:
            for judge_entry in entry["judges"]:
                r_by_judge.setdefault(judge_entry["judge"], judge_entry["r"])
        aspects[info.name] = {
            "judges": names,
            "r": r_by_judge,
            "rows": rows,
            "pairs": len(pairs),
            "marked": sum(1 for cell in cells.values() if cell["better"]),
        }
    return {
        "level": "response",
        "coefficient": "pearson",
        "correction": "Holm",
        "significance": MATRIX_SIGNIFICANCE,
        "scope": exclusions_json(data.scope, data.ratings.excluded),
        "aspects": aspects,
    }


def _negated(stat: Stat) -> Stat:
    value = stat["value"]
    return {"value": -value if value is not None else None, "undefined": stat["undefined"]}


def _negated_interval(bounds: Interval) -> Interval:
    if bounds["low"] is None or bounds["high"] is None:
        return bounds
    return {"low": -bounds["high"], "high": -bounds["low"], "undefined": None}


def judge_matrix(dataset: Dataset, scope: RatingScope = ALL_RATINGS) -> dict[str, Any]:
    """Every pair of the dataset's judges per aspect at the response level (Pearson): the difference, Zou's
    interval, n, Williams's two-sided p and its Holm adjustment across the aspect's pairs."""
    from judging.models import Judge as JudgeModel  # noqa: PLC0415 -- the model, not a type, is needed here

    ids = [row["id"] for row in dataset_judges(dataset)]
    judges = list(JudgeModel.objects.filter(pk__in=ids).order_by("name"))
    return cached_report(
        dataset,
        scope,
        ["judge_matrix", *[judge.pk for judge in judges]],
        lambda data: compute_judge_matrix(dataset, data, judges),
    )


# ---------------------------------------------------------------- planning


@dataclass(frozen=True)
class PlanRequest:
    statistic: str
    expected: float | None = None
    width: float | None = None
    raters: int | None = None
    confidence: float = 0.95
    power: float | None = None
    null: float = 0.0
    significance: float = 0.05
    alpha_min: float | None = None
    smallest_category: float | None = None


def plan_study(request: PlanRequest) -> dict[str, int]:
    """``plan_study --json``: {"items": N}. Raises ``PlanningError`` naming the missing or out-of-range value."""
    if request.statistic not in PLAN_STATISTICS:
        raise PlanningError(f"statistic must be one of {', '.join(PLAN_STATISTICS)}, not {request.statistic!r}")
    if request.statistic == "alpha":
        if request.alpha_min is None or request.smallest_category is None:
            raise PlanningError("Krippendorff's minimum needs --alpha-min and --smallest-category")
        items = krippendorff_minimum_units(
            request.alpha_min, request.smallest_category, significance=request.significance
        )
        return {"items": items}
    if request.expected is None:
        raise PlanningError("planning needs the expected value of the statistic (--expected)")
    if request.power is not None:
        if request.statistic != "pearson":
            raise PlanningError("the power calculation is for a Pearson correlation (--statistic pearson)")
        if request.width is not None:
            raise PlanningError("give either a width or a power, not both")
        return {
            "items": items_for_power(request.expected, request.power, request.null, significance=request.significance)
        }
    if request.width is None:
        raise PlanningError("planning needs a target interval width (--width) or a power (--power)")
    return {
        "items": items_for_width(
            request.statistic, request.expected, request.width, raters=request.raters, confidence=request.confidence
        )
    }


def campaign_plan(campaign: Campaign, answers: int) -> list[dict[str, Any]]:
    """Per numeric aspect the campaign asks for: the half-width of the 95% interval on the single-rater ICC that
    ``answers`` answers with the campaign's raters per answer buy, and the answers that +-0.05 would take. The ICC
    is the one observed on the campaign's ratings so far (one-way ICC1) when defined and between 0 and 1, else
    0.70, stated as assumed."""
    raters = int(campaign.raters_per_item)
    if raters < 2 or answers < 2:
        return []
    data = load_dataset_data(campaign.dataset, rating_scope("app", campaign))
    asked = set(campaign.aspects.values_list("name", flat=True))
    lines = []
    for info in data.aspects:
        if asked and info.name not in asked:
            continue
        if info.level == "nominal":
            continue
        ratings = aspect_ratings(data, info)
        observed = intraclass_correlations(ratings)["ICC1"]["value"] if ratings.n_ratings else None
        assumed = observed is None or not 0.0 < observed < 1.0
        icc = PLAN_ASSUMED_ICC if assumed else float(observed)  # type: ignore[arg-type]
        half = expected_width("icc", icc, answers, raters=raters) / 2.0
        target = items_for_width("icc", icc, 2 * PLAN_TARGET_HALF_WIDTH, raters=raters)
        lines.append(
            {
                "aspect": info.name,
                "label": info.label or info.name,
                "icc": icc,
                "assumed": assumed,
                "raters": raters,
                "answers": answers,
                "half_width": half,
                "target_half_width": PLAN_TARGET_HALF_WIDTH,
                "answers_for_target": target,
            }
        )
    return lines

"""The human ceiling: each rater against the mean of the other raters on the same answers, at the four levels of
judging.statistics.correlation, averaged over raters."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from judging.statistics.arrays import FloatArray, IntArray
from judging.statistics.correlation import (
    COEFFICIENTS,
    LEVELS,
    correlation_point_estimates,
    paired_scores,
)
from judging.statistics.results import defined, undefined


@dataclass(frozen=True)
class RaterScores:
    """Individual non-missing ratings of the answers of one aspect (answer = index into the
    per-answer arrays the caller also passes to ``paired_scores``)."""

    answer: IntArray
    rater: IntArray
    value: FloatArray
    rater_labels: tuple[str, ...]


def _leave_one_out(ratings: RaterScores, n_answers: int) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    count = np.bincount(ratings.answer, minlength=n_answers).astype(np.float64)
    total = np.bincount(ratings.answer, weights=ratings.value, minlength=n_answers)
    shared = count[ratings.answer] >= 2
    with np.errstate(invalid="ignore", divide="ignore"):
        others = (total[ratings.answer] - ratings.value) / (count[ratings.answer] - 1.0)
    return others, shared


def human_ceiling(
    ratings: RaterScores,
    prompt: Sequence[Any],
    system: Sequence[Any],
) -> dict[str, Any]:
    """Each rater against the mean of the other raters on the same answers, at the four levels,
    averaged over raters (the best a judge compared with one human's peers can expect)."""
    n_answers = len(prompt)
    others, shared = _leave_one_out(ratings, n_answers)
    prompt_a = np.asarray(list(prompt), dtype=object)
    system_a = np.asarray(list(system), dtype=object)
    per_rater: list[dict[str, dict[str, Any]]] = []
    for rater in np.unique(ratings.rater):
        rows = np.flatnonzero((ratings.rater == rater) & shared)
        if rows.size == 0:
            continue
        answers = ratings.answer[rows]
        paired = paired_scores(ratings.value[rows], others[rows], list(prompt_a[answers]), list(system_a[answers]))
        per_rater.append(correlation_point_estimates(paired))
    result: dict[str, Any] = {"n_raters": len(per_rater)}
    for level in LEVELS:
        result[level] = {}
        for name in COEFFICIENTS:
            values = [row[level][name]["value"] for row in per_rater if row[level][name]["value"] is not None]
            result[level][name] = (
                defined(float(np.mean(values))) if values else undefined("no rater shares enough answers with others")
            )
    return result

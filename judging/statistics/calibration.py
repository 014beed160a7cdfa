"""LLM-MATE calibration, as pure numpy functions.

Each input aspect becomes a deduction d_a = -|x_a - ideal_a| / span_a (0 ideal, -1 worst); weights
w are fitted by least squares (no intercept) so that overall - ideal_overall ~= w . d on 80% of the
human-rated answers; the remaining 20% give the held-out Pearson of w . d + ideal_overall against
the human overall score. The fitted w then turn a judge's per-aspect scores into a derived score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from judging.statistics.arrays import FloatArray
from judging.statistics.correlation import coefficients
from judging.statistics.results import Stat, undefined

TRAIN_SHARE = 0.8


@dataclass(frozen=True)
class AspectScale:
    name: str
    min_value: float
    max_value: float
    ideal: float

    @property
    def span(self) -> float:
        return self.max_value - self.min_value


def deductions(values: FloatArray, scale: AspectScale) -> FloatArray:
    """-|x - ideal| / span; NaN stays NaN (missing)."""
    if scale.span <= 0:
        raise ValueError(f"aspect {scale.name!r} has an empty scale")
    return -np.abs(np.asarray(values, dtype=np.float64) - scale.ideal) / scale.span


def _design(inputs: Mapping[str, Sequence[float] | FloatArray], scales: Sequence[AspectScale]) -> FloatArray:
    return np.column_stack([deductions(np.asarray(inputs[scale.name], dtype=np.float64), scale) for scale in scales])


def fit_mate(
    inputs: Mapping[str, Sequence[float] | FloatArray],
    target: Sequence[float] | FloatArray,
    *,
    input_scales: Sequence[AspectScale],
    target_scale: AspectScale,
    seed: int = 0,
) -> dict[str, Any]:
    """Fit MATE weights on a seeded 80/20 split of the answers that have every score.

    Returns {"weights": {aspect: w}, "heldout_pearson": Stat, "n_train", "n_test", "seed",
    "undefined": reason or None}.
    """
    names = [scale.name for scale in input_scales]
    result: dict[str, Any] = {
        "inputs": names,
        "target": target_scale.name,
        "weights": {name: None for name in names},
        "heldout_pearson": undefined("not fitted"),
        "n_train": 0,
        "n_test": 0,
        "seed": seed,
        "undefined": None,
    }
    if not names:
        result["undefined"] = "no input aspect"
        return result
    design = _design(inputs, input_scales)
    response = np.asarray(target, dtype=np.float64) - target_scale.ideal
    complete = np.flatnonzero(np.all(np.isfinite(design), axis=1) & np.isfinite(response))
    order = np.random.default_rng(seed).permutation(complete)
    n_train = round(TRAIN_SHARE * order.size)
    train, test = order[:n_train], order[n_train:]
    result["n_train"], result["n_test"] = int(train.size), int(test.size)
    if train.size < len(names) + 1:
        result["undefined"] = f"too few complete answers to fit {len(names)} weights ({train.size} for training)"
        result["heldout_pearson"] = undefined(result["undefined"])
        return result
    if np.linalg.matrix_rank(design[train]) < len(names):
        result["undefined"] = "the input deductions are collinear or constant on the training answers"
        result["heldout_pearson"] = undefined(result["undefined"])
        return result
    weights, *_ = np.linalg.lstsq(design[train], response[train], rcond=None)
    result["weights"] = {name: float(w) for name, w in zip(names, weights, strict=True)}
    predicted = design[test] @ weights + target_scale.ideal
    heldout: Stat = coefficients(predicted, response[test] + target_scale.ideal)["pearson"]
    result["heldout_pearson"] = heldout
    return result


def apply_mate(
    weights: Mapping[str, float],
    inputs: Mapping[str, Sequence[float] | FloatArray],
    *,
    input_scales: Sequence[AspectScale],
    target_scale: AspectScale,
) -> FloatArray:
    """w . d + ideal_overall for each answer; NaN where any input score is missing."""
    design = _design(inputs, input_scales)
    vector = np.asarray([weights[scale.name] for scale in input_scales], dtype=np.float64)
    return design @ vector + target_scale.ideal

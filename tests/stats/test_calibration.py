"""LLM-MATE calibration: deductions, least squares on a seeded 80/20 split, held-out Pearson."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from judging.statistics.calibration import AspectScale, apply_mate, deductions, fit_mate

FACTUALITY = AspectScale("factuality", 0, 3, 3)
AMOUNT = AspectScale("amount info", -1, 1, 0)
FORMALITY = AspectScale("formality", -1, 1, 0)
ACCEPTABILITY = AspectScale("acceptability", 0, 3, 3)
INPUTS = [FORMALITY, AMOUNT, FACTUALITY]


def synthetic(seed: int, noise: float, n: int = 300):
    rng = np.random.default_rng(seed)
    inputs = {
        "factuality": rng.integers(0, 4, n).astype(float),
        "amount info": rng.integers(-1, 2, n).astype(float),
        "formality": rng.integers(-1, 2, n).astype(float),
    }
    true_weights = np.array([0.335, 0.739, 2.048])
    design = np.column_stack([deductions(inputs[s.name], s) for s in INPUTS])
    target = 3 + design @ true_weights + rng.normal(0, noise, n)
    return inputs, target, true_weights, design


def test_deduction_is_zero_at_ideal_and_minus_one_at_worst() -> None:
    assert deductions(np.array([3.0, 0.0, 1.5]), FACTUALITY).tolist() == [0.0, -1.0, -0.5]
    assert deductions(np.array([0.0, -1.0, 1.0]), AMOUNT).tolist() == [0.0, -0.5, -0.5]
    assert np.isnan(deductions(np.array([np.nan]), AMOUNT)[0])


def test_exact_linear_data_recovers_weights_and_perfect_heldout() -> None:
    inputs, target, true_weights, _ = synthetic(0, noise=0.0)
    fit = fit_mate(inputs, target, input_scales=INPUTS, target_scale=ACCEPTABILITY, seed=1)
    assert [fit["weights"][s.name] for s in INPUTS] == pytest.approx(true_weights.tolist(), abs=1e-9)
    assert fit["heldout_pearson"]["value"] == pytest.approx(1.0, abs=1e-12)
    assert (fit["n_train"], fit["n_test"]) == (240, 60)
    json.dumps(fit, allow_nan=False)


def test_noisy_fit_equals_lstsq_on_the_same_seeded_split() -> None:
    inputs, target, _, design = synthetic(2, noise=0.6)
    target[5] = np.nan
    fit = fit_mate(inputs, target, input_scales=INPUTS, target_scale=ACCEPTABILITY, seed=7)
    complete = np.flatnonzero(np.isfinite(target))
    order = np.random.default_rng(7).permutation(complete)
    train, test = order[: round(0.8 * order.size)], order[round(0.8 * order.size) :]
    expected, *_ = np.linalg.lstsq(design[train], target[train] - 3, rcond=None)
    assert [fit["weights"][s.name] for s in INPUTS] == pytest.approx(expected.tolist(), abs=1e-9)
    predicted = design[test] @ expected + 3
    assert fit["heldout_pearson"]["value"] == pytest.approx(stats.pearsonr(predicted, target[test])[0], abs=1e-9)
    applied = apply_mate(fit["weights"], inputs, input_scales=INPUTS, target_scale=ACCEPTABILITY)
    assert applied[test] == pytest.approx(predicted, abs=1e-9)


def test_undefined_fits() -> None:
    inputs, target, _, _ = synthetic(3, noise=0.1, n=3)
    small = fit_mate(inputs, target, input_scales=INPUTS, target_scale=ACCEPTABILITY)
    assert small["undefined"] == "too few complete answers to fit 3 weights (2 for training)"
    assert small["heldout_pearson"]["value"] is None
    inputs, target, _, _ = synthetic(4, noise=0.1)
    inputs["formality"] = np.zeros_like(inputs["formality"])
    constant = fit_mate(inputs, target, input_scales=INPUTS, target_scale=ACCEPTABILITY)
    assert constant["undefined"] == "the input deductions are collinear or constant on the training answers"
    assert fit_mate({}, target, input_scales=[], target_scale=ACCEPTABILITY)["undefined"] == "no input aspect"

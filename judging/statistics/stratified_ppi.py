"""Stratified prediction-powered inference for a mean: Fisch, Maynez, Hofer, Dhingra, Globerson and Cohen,
"Stratified Prediction-Powered Inference for Effective Hybrid Evaluation of Language Models", NeurIPS 2024.

The items are split into K strata (by system, aspect or the judge's confidence bin) fixed before any human rating;
within stratum k the humans rate a uniform random n_k of its N_k items, and the judge scores them all.

- Per stratum: the PPI (or PPI++) estimate θ̂_k and standard error SE_k of ``ppi.ppi_point``, each stratum with its
  own λ_k; a stratum whose items were all rated has the human mean, λ_k = 0 and SE_k = σ(Y_k) / sqrt(n_k).
- Combined: θ̂ = Σ w_k θ̂_k and SE = sqrt(Σ w_k² SE_k²), with w_k = N_k / N the stratum's share of the items (or the
  population shares the caller gives); interval θ̂ ± z · SE. The human-only comparison is Σ w_k mean(Y_k) with
  SE² = Σ w_k² σ²(Y_k) / n_k.
- Allocation: the paper chooses the n_k that minimise the combined variance for a budget of n ratings. That variance
  is Σ w_k² (σ_k² / n_k + λ_k² var(f_k) / (N_k − n_k)), σ_k the standard deviation of one rating's rectifier
  Y − λ_k f in stratum k (from a pilot or a previous campaign); leaving out the judge-only term, which is small while
  n_k is a small part of N_k, the minimum is at n_k ∝ w_k σ_k (Neyman's allocation), used here in that closed form,
  kept between a minimum and N_k and rounded to integers by largest remainders. ``rectifier_deviation`` estimates
  σ_k from a pilot. At least ``ALLOCATION_MINIMUM`` ratings go to each stratum: a stratum given a handful of ratings
  has a poorly estimated λ_k and SE_k, and the combined interval then covers less than it says.

Pure: numpy is imported by the functions that use it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypedDict

from judging.statistics.intervals import normal_quantile
from judging.statistics.ppi import (
    MIN_HUMAN_ITEMS,
    Estimate,
    check_settings,
    clt_estimate,
    ppi_point,
    undefined_estimate,
)
from judging.statistics.results import Stat, defined, undefined

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Array = npt.NDArray[np.float64]

# A stratum's rectifier variance needs two human-rated items.
MIN_STRATUM_ITEMS = 2
# The allocation gives each stratum at least this many ratings, so that its λ and variance are not guessed from a
# handful of items (the combined CLT interval then undercovers).
ALLOCATION_MINIMUM = 10


class Stratum(TypedDict):
    name: str
    human: Sequence[float]
    judge_labelled: Sequence[float]
    judge_unlabelled: Sequence[float]


class StratumEstimate(TypedDict):
    name: str
    weight: float
    n: int
    n_judge_only: int
    estimate: Stat
    standard_error: Stat
    tuning_lambda: Stat


class StratifiedResult(TypedDict):
    stratified: Estimate
    human_only: Estimate
    strata: list[StratumEstimate]
    tuning: str
    confidence: float
    n: int
    n_total: int
    undefined: str | None


def _checked_strata(
    strata: Sequence[Stratum], weights: Sequence[float] | None
) -> tuple[list[tuple[Array, Array, Array]], Array]:
    import numpy as np  # noqa: PLC0415 - numpy is heavy; only the statistics that need it load it

    arrays = []
    for stratum in strata:
        y = np.asarray(stratum["human"], dtype=np.float64)
        f = np.asarray(stratum["judge_labelled"], dtype=np.float64)
        f_u = np.asarray(stratum["judge_unlabelled"], dtype=np.float64)
        if y.ndim != 1 or y.shape != f.shape or f_u.ndim != 1:
            raise ValueError(f"stratum {stratum['name']!r}: human and judge_labelled must be lists of one length")
        if not (np.all(np.isfinite(y)) and np.all(np.isfinite(f)) and np.all(np.isfinite(f_u))):
            raise ValueError(f"stratum {stratum['name']!r}: every score must be a finite number")
        arrays.append((y, f, f_u))
    sizes = np.array([y.size + f_u.size for y, _, f_u in arrays], dtype=np.float64)
    if weights is None:
        if sizes.sum() == 0:
            raise ValueError("every stratum is empty")
        w = sizes / sizes.sum()
    else:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != sizes.shape or not np.all(np.isfinite(w)) or np.any(w < 0) or not math.isclose(w.sum(), 1.0):
            raise ValueError("weights must be one number >= 0 per stratum, summing to 1")
    return arrays, w


def stratified_ppi_mean(
    strata: Sequence[Stratum],
    *,
    weights: Sequence[float] | None = None,
    confidence: float = 0.95,
    tuning: str = "ppi++",
) -> StratifiedResult:
    """StratPPI: per-stratum PPI combined with the strata's weights (N_k / N unless ``weights`` are given)."""
    import numpy as np  # noqa: PLC0415 - numpy is heavy; only the statistics that need it load it

    check_settings(tuning, confidence)
    if not strata:
        raise ValueError("at least one stratum is needed")
    arrays, w = _checked_strata(strata, weights)
    sizes = np.array([y.size + f_u.size for y, _, f_u in arrays], dtype=np.float64)
    n = sum(int(y.size) for y, _, _ in arrays)
    base: StratifiedResult = {
        "stratified": undefined_estimate("undefined"),
        "human_only": undefined_estimate("undefined"),
        "strata": [],
        "tuning": tuning,
        "confidence": confidence,
        "n": n,
        "n_total": int(sizes.sum()),
        "undefined": None,
    }
    reason = None
    if n < MIN_HUMAN_ITEMS:
        reason = f"{n} items have human scores; at least {MIN_HUMAN_ITEMS} are needed for a CLT interval"
    else:
        short = [s["name"] for s, (y, _, _), wk in zip(strata, arrays, w, strict=True) if wk > 0 and y.size < 2]
        if short:
            reason = f"stratum {short[0]!r} has fewer than {MIN_STRATUM_ITEMS} human-rated items"
    if reason is not None:
        return {
            **base,
            "stratified": undefined_estimate(reason),
            "human_only": undefined_estimate(reason),
            "undefined": reason,
        }
    z = normal_quantile(confidence)
    rows: list[StratumEstimate] = []
    centre = variance = human_centre = human_variance = 0.0
    for stratum, (y, f, f_u), wk in zip(strata, arrays, w, strict=True):
        if y.size < MIN_STRATUM_ITEMS:
            # A stratum of weight zero contributes nothing and needs no ratings.
            rows.append(_stratum_row(stratum["name"], float(wk), y.size, f_u.size, None))
            continue
        if f_u.size == 0:
            point = (float(y.mean()), float(y.std()) / math.sqrt(y.size), 0.0)
        else:
            point = ppi_point(y, f, f_u, tuning=tuning)
        rows.append(_stratum_row(stratum["name"], float(wk), y.size, f_u.size, point))
        centre += wk * point[0]
        variance += wk * wk * point[1] ** 2
        human_centre += wk * float(y.mean())
        human_variance += wk * wk * float(y.var()) / y.size
    return {
        **base,
        "stratified": clt_estimate(centre, math.sqrt(variance), z),
        "human_only": clt_estimate(human_centre, math.sqrt(human_variance), z),
        "strata": rows,
    }


def _stratum_row(
    name: str, weight: float, n: int, n_u: int, point: tuple[float, float, float] | None
) -> StratumEstimate:
    if point is None:
        reason = "the stratum has weight 0 and too few human-rated items"
        return {
            "name": name,
            "weight": weight,
            "n": int(n),
            "n_judge_only": int(n_u),
            "estimate": undefined(reason),
            "standard_error": undefined(reason),
            "tuning_lambda": undefined(reason),
        }
    return {
        "name": name,
        "weight": weight,
        "n": int(n),
        "n_judge_only": int(n_u),
        "estimate": defined(point[0]),
        "standard_error": defined(point[1]),
        "tuning_lambda": defined(point[2]),
    }


def rectifier_deviation(
    human: Sequence[float], judge_labelled: Sequence[float], judge_unlabelled: Sequence[float], *, tuning: str = "ppi++"
) -> float:
    """σ of one rating's rectifier Y − λ f at the stratum's PPI++ (or PPI) λ, from a pilot: the σ_k that
    ``optimal_allocation`` needs. With PPI++ a noisy judge gets a small λ, so σ_k stays near σ(Y) however noisy."""
    import numpy as np  # noqa: PLC0415 - numpy is heavy; only the statistics that need it load it

    y = np.asarray(human, dtype=np.float64)
    f = np.asarray(judge_labelled, dtype=np.float64)
    f_u = np.asarray(judge_unlabelled, dtype=np.float64)
    if y.size < MIN_STRATUM_ITEMS or y.shape != f.shape or f_u.size == 0:
        raise ValueError(
            f"a pilot needs at least {MIN_STRATUM_ITEMS} rated items with judge scores and one judge-only item"
        )
    lam = ppi_point(y, f, f_u, tuning=tuning)[2]
    return float(np.std(y - lam * f))


def optimal_allocation(
    sizes: Sequence[int], deviations: Sequence[float], budget: int, *, minimum: int = ALLOCATION_MINIMUM
) -> list[int]:
    """Neyman's allocation of ``budget`` human ratings over strata of ``sizes`` items whose rectifiers have standard
    deviations ``deviations``: n_k ∝ N_k σ_k, each between ``minimum`` (or N_k if smaller) and N_k, summing to the
    budget. Strata with σ_k = 0 everywhere fall back to proportional allocation."""
    import numpy as np  # noqa: PLC0415 - numpy is heavy; only the statistics that need it load it

    size = np.asarray(sizes, dtype=np.int64)
    sd = np.asarray(deviations, dtype=np.float64)
    if size.ndim != 1 or size.size == 0 or sd.shape != size.shape:
        raise ValueError("sizes and deviations must be non-empty lists of one length (one entry per stratum)")
    if np.any(size < 0) or not np.all(np.isfinite(sd)) or np.any(sd < 0):
        raise ValueError("every stratum size must be >= 0 and every deviation a finite number >= 0")
    floor = np.minimum(size, minimum)
    if not int(floor.sum()) <= budget <= int(size.sum()):
        raise ValueError(
            f"budget must be between {int(floor.sum())} (the minimum per stratum) and {int(size.sum())} (every item)"
        )
    score = size * sd
    if score.sum() == 0:
        score = size.astype(np.float64)
    target = floor.astype(np.float64)
    fixed = np.zeros(size.size, dtype=bool)
    # Continuous water-filling: strata that would exceed N_k or fall below their floor are fixed there, and the
    # rest of the budget is split over the others in proportion to N_k σ_k.
    for _ in range(size.size + 1):
        remaining = budget - float(target[fixed].sum())
        free_score = float(score[~fixed].sum())
        if free_score > 0:
            target[~fixed] = remaining * score[~fixed] / free_score
        else:
            target[~fixed] = remaining / max(1, int((~fixed).sum()))
        over = (~fixed) & (target > size)
        under = (~fixed) & (target < floor)
        if not (over.any() or under.any()):
            break
        target[over] = size[over]
        target[under] = floor[under]
        fixed |= over | under
    counts = np.floor(target + 1e-9).astype(np.int64)
    shortfall = budget - int(counts.sum())
    order = np.argsort(-(target - counts), kind="stable")
    for k in order:
        if shortfall <= 0:
            break
        if counts[k] < size[k]:
            counts[k] += 1
            shortfall -= 1
    return [int(c) for c in counts]

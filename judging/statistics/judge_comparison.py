"""Is judge 1 closer to the humans than judge 2? Two correlations with the same human scores are dependent
(they overlap in the human variable), so comparing their separate intervals is the wrong test.

Pearson, in the conventions of R's ``cocor`` (``cocor.dep.groups.overlap``), with j = humans, k = judge 1,
h = judge 2, r1 = r_jk, r2 = r_jh, r12 = r_kh:

- Williams's t as given by Steiger (1980, eq. 7), df = n - 3 (``williams1959``);
- Steiger's (1980) Z1* with the pooled r = (r1 + r2) / 2 in the covariance of the two Fisher z's (eq. 14;
  ``steiger1980``), two-sided p;
- Zou's (2007) interval for r1 - r2 from the two Fisher-z intervals (``zou2007``), no bias adjustment.

The one-sided p tests H1: r1 > r2 (judge 1 tracks the humans better).

Spearman and Kendall tau-b: a paired bootstrap over the units (each draw keeps a unit's human, judge 1 and judge
2 scores together), percentile interval of r1 - r2. Williams's t and Steiger's z are not stated for them and are
reported undefined.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt

from judging.statistics.arrays import FloatArray
from judging.statistics.correlation import COEFFICIENTS, coefficients
from judging.statistics.intervals import normal_quantile
from judging.statistics.results import Interval, Stat, defined, interval, undefined, undefined_interval

MIN_UNITS = 4
DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 0


class ComparisonError(ValueError):
    """The inputs cannot support the comparison; the message names the problem."""


# A correlation computed from identical vectors can come out a few ulps below 1 (how far depends on numpy's summation
# order), so "no variance left" is judged with this margin rather than by exact equality with 1.
ROUNDING_MARGIN = 1e-12


def _r_to_z(r: float) -> float:
    return math.atanh(r)


def williams_t(r1: float, r2: float, r12: float, n: int) -> dict[str, Any]:
    """Williams's t (Steiger 1980, eq. 7) with df = n - 3, p two-sided and one-sided (H1: r1 > r2)."""
    from scipy import stats  # noqa: PLC0415 -- heavy import, only when a comparison runs

    determinant = 1.0 + 2.0 * r1 * r2 * r12 - r1 * r1 - r2 * r2 - r12 * r12
    mean = (r1 + r2) / 2.0
    denominator = 2.0 * ((n - 1.0) / (n - 3.0)) * determinant + mean * mean * (1.0 - r12) ** 3
    df = n - 3
    if denominator <= 0.0:
        reason = "the three correlations leave no variance for Williams's t (a judge equals the other or the humans)"
        return {"t": undefined(reason), "df": df, "p_two_sided": undefined(reason), "p_one_sided": undefined(reason)}
    t = (r1 - r2) * math.sqrt((n - 1.0) * (1.0 + r12) / denominator)
    return {
        "t": defined(t),
        "df": df,
        "p_two_sided": defined(2.0 * float(stats.t.sf(abs(t), df))),
        "p_one_sided": defined(float(stats.t.sf(t, df))),
    }


def steiger_z(r1: float, r2: float, r12: float, n: int) -> dict[str, Stat]:
    """Steiger's (1980) Z1* with the pooled r (eq. 14) and its two-sided p."""
    if max(abs(r1), abs(r2)) >= 1.0:
        reason = "a correlation is +-1, where Fisher's z is infinite"
        return {"z": undefined(reason), "p_two_sided": undefined(reason)}
    pooled = (r1 + r2) / 2.0
    covariance = (r12 * (1.0 - 2.0 * pooled**2) - 0.5 * pooled**2 * (1.0 - 2.0 * pooled**2 - r12**2)) / (
        1.0 - pooled**2
    ) ** 2
    if covariance >= 1.0 - ROUNDING_MARGIN:
        reason = "the two judges' scores are identical, so Steiger's z has no variance"
        return {"z": undefined(reason), "p_two_sided": undefined(reason)}
    z = math.sqrt(n - 3.0) * (_r_to_z(r1) - _r_to_z(r2)) / math.sqrt(2.0 - 2.0 * covariance)
    return {"z": defined(z), "p_two_sided": defined(2.0 * NormalDist().cdf(-abs(z)))}


def zou_interval(r1: float, r2: float, r12: float, n: int, confidence: float = 0.95) -> Interval:
    """Zou's (2007) interval for r1 - r2 of two overlapping dependent correlations."""
    if max(abs(r1), abs(r2)) >= 1.0:
        return undefined_interval("a correlation is +-1, where Fisher's z is infinite")
    half = normal_quantile(confidence) / math.sqrt(n - 3.0)
    low1, high1 = math.tanh(_r_to_z(r1) - half), math.tanh(_r_to_z(r1) + half)
    low2, high2 = math.tanh(_r_to_z(r2) - half), math.tanh(_r_to_z(r2) + half)
    c = ((r12 - 0.5 * r1 * r2) * (1.0 - r1 * r1 - r2 * r2 - r12 * r12) + r12**3) / ((1.0 - r1 * r1) * (1.0 - r2 * r2))
    lower_radicand = (r1 - low1) ** 2 + (high2 - r2) ** 2 - 2.0 * c * (r1 - low1) * (high2 - r2)
    upper_radicand = (high1 - r1) ** 2 + (r2 - low2) ** 2 - 2.0 * c * (high1 - r1) * (r2 - low2)
    difference = r1 - r2
    return interval(difference - math.sqrt(max(lower_radicand, 0.0)), difference + math.sqrt(max(upper_radicand, 0.0)))


def holm_adjust(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's (1979) step-down adjusted p-values; None (an undefined p) stays None and does not count."""
    present = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    m = len(present)
    for rank, (p, index) in enumerate(present):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[index] = running
    return adjusted


def _check_inputs(human: FloatArray, judge1: FloatArray, judge2: FloatArray, unit: str) -> None:
    if human.size < MIN_UNITS:
        raise ComparisonError(
            f"fewer than {MIN_UNITS} {unit}s have a human score and both judges' scores ({human.size}); "
            f"comparing two judges needs at least {MIN_UNITS}"
        )
    for name, values in (("the human", human), ("judge 1's", judge1), ("judge 2's", judge2)):
        if np.all(values == values[0]):
            raise ComparisonError(f"{name} scores are constant over the {human.size} {unit}s, so no correlation exists")


def _rows_pearson(x: FloatArray, y: FloatArray) -> FloatArray:
    dx = x - x.mean(axis=1, keepdims=True)
    dy = y - y.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(np.sum(dx * dy, axis=1) / np.sqrt(np.sum(dx * dx, axis=1) * np.sum(dy * dy, axis=1)))


def _resampled(coefficient: str, x: FloatArray, y: FloatArray) -> FloatArray:
    """The coefficient on each row of (resamples x units) matrices; NaN where a resample is constant."""
    from scipy import stats  # noqa: PLC0415 -- heavy import, only when a comparison runs

    if coefficient == "pearson":
        return _rows_pearson(x, y)
    if coefficient == "spearman":
        return _rows_pearson(stats.rankdata(x, axis=1), stats.rankdata(y, axis=1))
    out = np.full(x.shape[0], np.nan)
    for row in range(x.shape[0]):
        if np.ptp(x[row]) > 0 and np.ptp(y[row]) > 0:
            out[row] = stats.kendalltau(x[row], y[row], variant="b").statistic
    return out


def paired_bootstrap_difference(
    human: FloatArray,
    judge1: FloatArray,
    judge2: FloatArray,
    coefficient: str,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> Interval:
    """Percentile interval of r(human, judge1) - r(human, judge2) over resamples of the units with replacement."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, human.size, size=(n_resamples, human.size))
    differences = _resampled(coefficient, human[draws], judge1[draws]) - _resampled(
        coefficient, human[draws], judge2[draws]
    )
    finite = differences[np.isfinite(differences)]
    if finite.size == 0:
        return undefined_interval("no bootstrap resample was defined")
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(finite, [tail, 1.0 - tail])
    return interval(float(low), float(high))


def compare_judges(
    human: Sequence[float] | FloatArray,
    judge1: Sequence[float] | FloatArray,
    judge2: Sequence[float] | FloatArray,
    *,
    coefficient: str = "pearson",
    unit: str = "answer",
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> dict[str, Any]:
    """Both judges against the same human scores on the same units (rows with a missing score are dropped).

    Raises ``ComparisonError`` with the reason when fewer than 4 units remain or any of the three is constant.
    """
    if coefficient not in COEFFICIENTS:
        raise ComparisonError(f"coefficient must be one of {', '.join(COEFFICIENTS)}, not {coefficient!r}")
    h = np.asarray(human, dtype=np.float64)
    a = np.asarray(judge1, dtype=np.float64)
    b = np.asarray(judge2, dtype=np.float64)
    if not h.shape == a.shape == b.shape:
        raise ComparisonError("human and judge scores must have the same length")
    keep = np.isfinite(h) & np.isfinite(a) & np.isfinite(b)
    h, a, b = h[keep], a[keep], b[keep]
    _check_inputs(h, a, b, unit)
    n = int(h.size)
    r1 = coefficients(h, a)[coefficient]
    r2 = coefficients(h, b)[coefficient]
    r12 = coefficients(a, b)[coefficient]
    result: dict[str, Any] = {
        "n": n,
        "coefficient": coefficient,
        "r": [r1, r2],
        "r_between": r12,
        "difference": defined(r1["value"] - r2["value"])  # type: ignore[operator]
        if r1["value"] is not None and r2["value"] is not None
        else undefined("a correlation is undefined"),
    }
    if coefficient == "pearson" and None not in (r1["value"], r2["value"], r12["value"]):
        v1, v2, v12 = float(r1["value"]), float(r2["value"]), float(r12["value"])  # type: ignore[arg-type]
        result["difference_ci95"] = zou_interval(v1, v2, v12, n)
        result["difference_ci95_method"] = "Zou (2007)"
        result["williams"] = williams_t(v1, v2, v12, n)
        result["steiger"] = steiger_z(v1, v2, v12, n)
        return result
    reason = f"Williams's t and Steiger's z are stated for Pearson correlations, not {coefficient}"
    result["difference_ci95"] = paired_bootstrap_difference(h, a, b, coefficient, n_resamples=n_resamples, seed=seed)
    result["difference_ci95_method"] = f"paired percentile bootstrap over {unit}s, {n_resamples} resamples, seed {seed}"
    result["williams"] = {
        "t": undefined(reason),
        "df": n - 3,
        "p_two_sided": undefined(reason),
        "p_one_sided": undefined(reason),
    }
    result["steiger"] = {"z": undefined(reason), "p_two_sided": undefined(reason)}
    return result


def compare_judges_within_groups(
    human: Sequence[float] | FloatArray,
    judge1: Sequence[float] | FloatArray,
    judge2: Sequence[float] | FloatArray,
    group: Sequence[int] | npt.NDArray[np.int64],
    *,
    coefficient: str = "pearson",
    unit: str = "prompt",
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> dict[str, Any]:
    """The per-prompt level: each judge's coefficient within every group (prompt), averaged over the groups where
    all three are defined, and r1 - r2 with a paired percentile bootstrap over those groups.

    An average of within-group correlations is not one correlation of n pairs, so Williams's t, Steiger's z and
    Zou's interval do not apply; they are reported undefined.
    """
    if coefficient not in COEFFICIENTS:
        raise ComparisonError(f"coefficient must be one of {', '.join(COEFFICIENTS)}, not {coefficient!r}")
    h = np.asarray(human, dtype=np.float64)
    a = np.asarray(judge1, dtype=np.float64)
    b = np.asarray(judge2, dtype=np.float64)
    g = np.asarray(group, dtype=np.int64)
    keep = np.isfinite(h) & np.isfinite(a) & np.isfinite(b)
    h, a, b, g = h[keep], a[keep], b[keep], g[keep]
    rows: list[tuple[float, float, float]] = []
    for code in np.unique(g):
        members = g == code
        r1 = coefficients(h[members], a[members])[coefficient]["value"]
        r2 = coefficients(h[members], b[members])[coefficient]["value"]
        r12 = coefficients(a[members], b[members])[coefficient]["value"]
        if r1 is not None and r2 is not None and r12 is not None:
            rows.append((r1, r2, r12))
    if len(rows) < MIN_UNITS:
        raise ComparisonError(
            f"fewer than {MIN_UNITS} {unit}s have at least 3 answers with varying human and judge scores "
            f"({len(rows)}); comparing two judges within {unit}s needs at least {MIN_UNITS}"
        )
    values = np.asarray(rows)
    differences = values[:, 0] - values[:, 1]
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(rows), size=(n_resamples, len(rows)))
    tail = 0.025
    low, high = np.quantile(differences[draws].mean(axis=1), [tail, 1.0 - tail])
    reason = f"the {unit} level averages within-{unit} correlations; Williams's t and Steiger's z need one correlation"
    return {
        "n": len(rows),
        "coefficient": coefficient,
        "r": [defined(float(values[:, 0].mean())), defined(float(values[:, 1].mean()))],
        "r_between": defined(float(values[:, 2].mean())),
        "difference": defined(float(differences.mean())),
        "difference_ci95": interval(float(low), float(high)),
        "difference_ci95_method": f"paired percentile bootstrap over {unit}s, {n_resamples} resamples, seed {seed}",
        "williams": {
            "t": undefined(reason),
            "df": len(rows) - 3,
            "p_two_sided": undefined(reason),
            "p_one_sided": undefined(reason),
        },
        "steiger": {"z": undefined(reason), "p_two_sided": undefined(reason)},
    }

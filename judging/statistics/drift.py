"""Has a certified judge drifted? Its scores now against its certified scores on the same answers.

The paired test is Wilcoxon's signed-rank test, two-sided (drift in either direction matters), on the differences
current − certified per answer. Zero differences are dropped before ranking (Wilcoxon's own convention, scipy's
``zero_method="wilcox"``), tied absolute differences get mid-ranks, and the p-value is exact when no absolute
differences are tied and at most 50 remain, else from the normal approximation with the tie correction of the variance
and no continuity correction (as R's ``wilcox.test(..., exact = FALSE, correct = FALSE)``).
Several aspects are tested at once, so each is compared with α / m (Bonferroni; m = aspects tested): the chance that a
judge that has not moved is suspended stays at most α per check.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

DEFAULT_ALPHA = 0.05
TEST_NAME = "Wilcoxon signed-rank test, two-sided, zero differences dropped"
EXACT_MAX_N = 50


def signed_rank_p(certified: npt.ArrayLike, current: npt.ArrayLike) -> dict[str, Any]:
    """{"n": pairs, "n_nonzero": pairs that differ, "statistic": W (smaller rank sum) or None, "p_value" or None with
    "undefined"}: with no pair that differs, the scores have not moved at all and p is 1 by definition."""
    from scipy import stats  # noqa: PLC0415 - ~1.8 s to import; only drift checks need it

    a = np.asarray(certified, dtype=np.float64)
    b = np.asarray(current, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError("certified and current scores must pair up one to one")
    keep = np.isfinite(a) & np.isfinite(b)
    differences = b[keep] - a[keep]
    nonzero = int(np.count_nonzero(differences))
    row: dict[str, Any] = {"n": int(differences.size), "n_nonzero": nonzero, "mean_difference": None}
    if differences.size == 0:
        row.update({"statistic": None, "p_value": None, "undefined": "no answer has both a certified and a new score"})
        return row
    row["mean_difference"] = float(differences.mean())
    if nonzero == 0:
        row.update({"statistic": 0.0, "p_value": 1.0, "undefined": None})
        return row
    moved = differences[differences != 0.0]
    # Exact only where the exact null distribution holds: no tied absolute differences (zeros are already dropped).
    exact = moved.size <= EXACT_MAX_N and np.unique(np.abs(moved)).size == moved.size
    result = stats.wilcoxon(
        moved,
        zero_method="wilcox",
        alternative="two-sided",
        correction=False,
        method="exact" if exact else "asymptotic",
    )
    row.update({"statistic": float(result.statistic), "p_value": float(result.pvalue), "undefined": None})
    return row


def drift_decision(per_aspect: dict[str, dict[str, Any]], *, alpha: float = DEFAULT_ALPHA) -> dict[str, Any]:
    """Which aspects moved: those whose p-value is at most α / m, m the aspects with a defined p-value."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie strictly between 0 and 1, not {alpha}")
    tested = [name for name, row in per_aspect.items() if row["p_value"] is not None]
    threshold = alpha / len(tested) if tested else None
    moved = [name for name in tested if threshold is not None and per_aspect[name]["p_value"] <= threshold]
    return {
        "test": TEST_NAME,
        "alpha": alpha,
        "correction": "Bonferroni",
        "aspects_tested": len(tested),
        "threshold": threshold,
        "moved": moved,
        "drifted": bool(moved),
    }

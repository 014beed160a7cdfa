"""Prediction-powered inference for a mean (Angelopoulos, Bates, Fannjiang, Jordan and Zrnic, Science 2023) with
PPI++ power tuning (Angelopoulos, Duchi and Zrnic 2023).

Inputs: human scores Y on n items, the judge's scores f on the same n items ("labelled"), and the judge's scores on
the N_u other items ("unlabelled"). The humans must have rated a random subset of the items; the judge, every item.

- Estimate: θ̂ = λ · mean(f_unlabelled) + mean(Y - λ f_labelled). λ = 1 is the original PPI; λ = 0 is the human-only
  mean; PPI++ estimates the λ that minimises the variance (below), clipped to [0, 1].
- Standard error: sqrt(λ² σ²(f_unlabelled) / N_u + σ²(Y - λ f_labelled) / n), with σ² the variance dividing by the
  count (numpy's default, as ppi_py uses); the interval is θ̂ ± z_(1 - a/2) · SE (the CLT interval of both papers).
- PPI++ λ = cov(Y, f_labelled) / ((1 + n / N_u) · var(f_all)), where cov divides by n and var(f_all) is the sample
  variance (dividing by count - 1) of the judge's scores on all n + N_u items: ppi_py's ``_calc_lam_glm`` for a mean.
- Human-only: mean(Y) ± z · σ(Y) / sqrt(n) (ppi_py's ``classical_mean_ci``).
- Effective number of human ratings: n_eff = n · SE²_human-only / SE²_PPI = σ²(Y) / SE²_PPI, the number of human
  ratings a human-only mean would need for the PPI interval's width (both variances estimated on these data).

A pairwise difference between two systems answering the same prompts is the mean of the per-prompt difference, with
Y = human_A - human_B and f = judge_A - judge_B: the same estimator on paired items.

Pure: numpy is imported by the functions that use it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import TYPE_CHECKING, TypedDict

from judging.statistics.results import Interval, Stat, defined, interval, undefined, undefined_interval

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

# Below this many human-rated items the CLT interval is not trusted, so every figure is undefined.
MIN_HUMAN_ITEMS = 10
TUNINGS = ("ppi++", "ppi")


class Estimate(TypedDict):
    estimate: Stat
    standard_error: Stat
    interval: Interval


class PPIResult(TypedDict):
    ppi: Estimate
    human_only: Estimate
    effective_n: Stat
    tuning_lambda: Stat
    tuning: str
    confidence: float
    n: int
    n_judge_only: int
    n_total: int
    undefined: str | None


def clt_estimate(centre: float, se: float, z: float) -> Estimate:
    return {
        "estimate": defined(centre),
        "standard_error": defined(se),
        "interval": interval(centre - z * se, centre + z * se),
    }


def undefined_estimate(reason: str) -> Estimate:
    return {"estimate": undefined(reason), "standard_error": undefined(reason), "interval": undefined_interval(reason)}


def human_only_mean(human: Sequence[float], *, confidence: float = 0.95) -> Estimate:
    """mean(Y) with the CLT interval mean(Y) +- z sigma(Y) / sqrt(n), sigma dividing by n (ppi_py's
    ``classical_mean_ci``); undefined below MIN_HUMAN_ITEMS items."""
    import numpy as np  # noqa: PLC0415 - numpy is heavy; only the statistics that need it load it

    y = np.asarray(human, dtype=np.float64)
    n = int(y.size)
    if n < MIN_HUMAN_ITEMS:
        return undefined_estimate(
            f"{n} items have human scores; at least {MIN_HUMAN_ITEMS} are needed for a CLT interval"
        )
    z = NormalDist().inv_cdf(1.0 - (1.0 - confidence) / 2.0)
    return clt_estimate(float(y.mean()), float(y.std() / math.sqrt(n)), z)


def ppi_point(
    y: npt.NDArray[np.float64], f: npt.NDArray[np.float64], f_u: npt.NDArray[np.float64], *, tuning: str = "ppi++"
) -> tuple[float, float, float]:
    """(θ̂, SE, λ) of one PPI mean from checked arrays with n >= 2 and N_u >= 1: the arithmetic that the
    stratified estimator repeats per stratum."""
    import numpy as np  # noqa: PLC0415 - numpy is heavy; only the statistics that need it load it

    n, n_u = int(y.size), int(f_u.size)
    lam = 1.0
    if tuning == "ppi++":
        var_all = float(np.var(np.concatenate([f, f_u]), ddof=1))
        cov = float(np.mean((y - y.mean()) * (f - f.mean())))
        lam = 0.0 if var_all == 0.0 else min(1.0, max(0.0, cov / ((1.0 + n / n_u) * var_all)))
    centre = float(lam * f_u.mean() + np.mean(y - lam * f))
    se = math.sqrt(lam * lam * float(f_u.var()) / n_u + float(np.var(y - lam * f)) / n)
    return centre, se, lam


def check_settings(tuning: str, confidence: float) -> None:
    """ValueError unless ``tuning`` is one of ``TUNINGS`` and ``confidence`` lies strictly between 0 and 1."""
    if tuning not in TUNINGS:
        raise ValueError(f"tuning must be one of {', '.join(TUNINGS)}, not {tuning!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, not {confidence!r}")


def ppi_mean(
    human: Sequence[float],
    judge_labelled: Sequence[float],
    judge_unlabelled: Sequence[float],
    *,
    confidence: float = 0.95,
    tuning: str = "ppi++",
) -> PPIResult:
    """The prediction-powered and the human-only estimate of a mean, with their CLT intervals, and n_eff."""
    import numpy as np  # noqa: PLC0415 - numpy is heavy; only the statistics that need it load it

    check_settings(tuning, confidence)
    y = np.asarray(human, dtype=np.float64)
    f = np.asarray(judge_labelled, dtype=np.float64)
    f_u = np.asarray(judge_unlabelled, dtype=np.float64)
    if y.ndim != 1 or y.shape != f.shape or f_u.ndim != 1:
        raise ValueError("human and judge_labelled must be lists of one length, judge_unlabelled a list")
    if not (np.all(np.isfinite(y)) and np.all(np.isfinite(f)) and np.all(np.isfinite(f_u))):
        raise ValueError("every score must be a finite number")
    n, n_u = int(y.size), int(f_u.size)
    base: PPIResult = {
        "ppi": undefined_estimate("undefined"),
        "human_only": undefined_estimate("undefined"),
        "effective_n": undefined("undefined"),
        "tuning_lambda": undefined("undefined"),
        "tuning": tuning,
        "confidence": confidence,
        "n": n,
        "n_judge_only": n_u,
        "n_total": n + n_u,
        "undefined": None,
    }
    reason = None
    if n < MIN_HUMAN_ITEMS:
        reason = f"{n} items have human scores; at least {MIN_HUMAN_ITEMS} are needed for a CLT interval"
    elif n_u < 1:
        reason = "every item has a human score: there is no judge-only item for the judge to add"
    if reason is not None:
        return {
            **base,
            "ppi": undefined_estimate(reason),
            "human_only": undefined_estimate(reason),
            "effective_n": undefined(reason),
            "tuning_lambda": undefined(reason),
            "undefined": reason,
        }
    z = NormalDist().inv_cdf(1.0 - (1.0 - confidence) / 2.0)
    human_only = human_only_mean(human, confidence=confidence)
    human_se = float(human_only["standard_error"]["value"] or 0.0)

    centre, se, lam = ppi_point(y, f, f_u, tuning=tuning)
    if se == 0.0:
        effective: Stat = undefined("the prediction-powered estimate has zero estimated variance")
    else:
        effective = defined(n * human_se * human_se / (se * se))
    return {
        **base,
        "ppi": clt_estimate(centre, se, z),
        "human_only": human_only,
        "effective_n": effective,
        "tuning_lambda": defined(lam),
    }

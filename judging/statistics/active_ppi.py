"""Active (inverse-probability-weighted) prediction-powered inference for a mean: Zrnic and Candès, "Active
Statistical Inference", ICML 2024, with the PPI++ power tuning of Angelopoulos, Duchi and Zrnic (2023).

The judge scores all N items. Item i is sent to the humans with a probability π_i > 0 chosen before its human score
is seen (from the judge's uncertainty, say), independently of the other items given the policy: ξ_i = 1 if it was
rated. With w_i = ξ_i / π_i,

- Estimate: θ̂ = (1/N) Σ_i [λ f_i + (Y_i − λ f_i) w_i]. Each term has expectation Y_i whatever λ and π are, so θ̂ is
  unbiased for the mean of Y over the items; the human scores of unrated items are never needed (w_i = 0).
- Standard error: the standard deviation (dividing by N) of the N terms over sqrt(N); interval θ̂ ± z · SE (the CLT
  interval of the paper).
- PPI++ λ: the λ minimising the terms' empirical variance, cov(Y w, f (w − 1)) / var(f (w − 1)), clipped to [0, 1] as
  in ``ppi.ppi_mean``; λ = 1 is plain active inference, λ = 0 the Horvitz–Thompson mean of the human scores alone.
- Uniform comparison: the same estimator had every item been sent with the same probability π_u = Σ π_i / N (the
  same expected number of ratings). Its variance per item is Var(Y) + (1 − π_u) / π_u · E[(Y − λ_u f)²], with λ_u
  = E[Y f] / E[f²] clipped to [0, 1]; the moments are estimated from the rated items weighted by w. The ratings saved
  are the uniform ratings needed for the active SE, N·E / (N·SE² − Var(Y) + E) with E = E[(Y − λ_u f)²], less Σ π_i.
  The "uniform" interval is centred on the active estimate: only its width is the counterfactual.

``uncertainty_from_distribution`` and ``uncertainty_from_samples`` turn a judge's score distribution or its sampled
scores into an uncertainty (their standard deviation). ``sampling_probabilities`` gives the policy of the paper's
experiments: π proportional to an uncertainty score, mixed
with the uniform rule so that no item is nearly impossible to pick (a tiny π makes one rating's weight huge), scaled to
an expected budget and capped at 1.

Pure: numpy is imported by the functions that use it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TypedDict

from judging.statistics.intervals import normal_quantile
from judging.statistics.ppi import MIN_HUMAN_ITEMS, Estimate, check_settings, clt_estimate, undefined_estimate
from judging.statistics.results import Stat, defined, undefined

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Array = npt.NDArray[np.float64]

DEFAULT_UNIFORM_SHARE = 0.1


class ActivePPIResult(TypedDict):
    active: Estimate
    human_only: Estimate
    uniform: Estimate
    ratings_saved: Stat
    tuning_lambda: Stat
    tuning: str
    confidence: float
    n: int
    expected_n: float
    n_total: int
    undefined: str | None


def uncertainty_from_distribution(probabilities: Mapping[str, float]) -> float:
    """The standard deviation of a judge's score distribution ({"1": p1, "2": p2, ...}, normalised over the scores it
    lists): the judge's own spread around its expected score, a stand-in for the error sqrt(E[(Y − f)² | item]) to
    which the paper's optimal sending probability is proportional."""
    if not probabilities:
        raise ValueError("the score distribution is empty")
    scores, masses = [], []
    for key, value in probabilities.items():
        try:
            score = float(key)
        except ValueError:
            raise ValueError(f"the score {key!r} of the distribution is not a number") from None
        mass = float(value)
        if not (math.isfinite(score) and math.isfinite(mass) and mass >= 0):
            raise ValueError("scores and probabilities must be finite and probabilities non-negative")
        scores.append(score)
        masses.append(mass)
    total = sum(masses)
    if total <= 0:
        raise ValueError("the score distribution has no mass")
    mean = sum(s * m for s, m in zip(scores, masses, strict=True)) / total
    return math.sqrt(sum(m * (s - mean) ** 2 for s, m in zip(scores, masses, strict=True)) / total)


def uncertainty_from_samples(samples: Sequence[float]) -> float:
    """The standard deviation (dividing by k) of k sampled judge scores of one item: their disagreement."""
    if not samples:
        raise ValueError("no samples")
    values = [float(v) for v in samples]
    if not all(math.isfinite(v) for v in values):
        raise ValueError("every sample must be a finite number")
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


def sampling_probabilities(
    uncertainty: Sequence[float], budget: float, *, uniform_share: float = DEFAULT_UNIFORM_SHARE
) -> list[float]:
    """π_i ∝ (1 − τ) u_i / Σu + τ / N with τ = ``uniform_share``, scaled so that Σ π_i = ``budget`` (the expected
    number of human ratings), items that would exceed 1 capped at 1 and their excess spread over the others."""
    import numpy as np  # noqa: PLC0415 - numpy is heavy; only the statistics that need it load it

    u = np.asarray(uncertainty, dtype=np.float64)
    if u.ndim != 1 or u.size == 0:
        raise ValueError("uncertainty must be a non-empty list of numbers")
    if not np.all(np.isfinite(u)) or np.any(u < 0):
        raise ValueError("every uncertainty must be a finite number >= 0")
    if not 0.0 <= uniform_share <= 1.0:
        raise ValueError(f"uniform_share must be between 0 and 1, not {uniform_share!r}")
    if not 0.0 < budget <= u.size:
        raise ValueError(f"budget must be more than 0 and at most the {u.size} items, not {budget!r}")
    total = float(u.sum())
    share = (
        np.full(u.size, 1.0 / u.size) if total == 0.0 else (1.0 - uniform_share) * u / total + uniform_share / u.size
    )
    pi = np.zeros(u.size)
    capped = np.zeros(u.size, dtype=bool)
    # Water-filling: each pass caps the items pushed over 1 and rescales the rest to the budget still to place.
    for _ in range(u.size):
        free_share = float(share[~capped].sum())
        remaining = budget - float(capped.sum())
        pi[~capped] = remaining * share[~capped] / free_share if free_share > 0 else 0.0
        pi[capped] = 1.0
        over = (~capped) & (pi > 1.0)
        if not over.any():
            break
        capped |= over
    if np.any(pi <= 0.0):
        raise ValueError(
            "with uniform_share 0 an item of uncertainty 0 could never be rated, and active PPI needs every "
            "probability above 0"
        )
    return [float(p) for p in pi]


def _checked(
    human: Sequence[float | None], judge: Sequence[float], probabilities: Sequence[float]
) -> tuple[Array, Array, Array, npt.NDArray[np.bool_]]:
    import numpy as np  # noqa: PLC0415 - numpy is heavy; only the statistics that need it load it

    y = np.array([math.nan if v is None else v for v in human], dtype=np.float64)
    f = np.asarray(judge, dtype=np.float64)
    pi = np.asarray(probabilities, dtype=np.float64)
    if y.ndim != 1 or y.shape != f.shape or pi.shape != f.shape:
        raise ValueError("human, judge and probabilities must be lists of one length (one entry per item)")
    if not np.all(np.isfinite(f)):
        raise ValueError("every judge score must be a finite number")
    if not (np.all(np.isfinite(pi)) and np.all(pi > 0.0) and np.all(pi <= 1.0)):
        raise ValueError("every sampling probability must be more than 0 and at most 1")
    rated = ~np.isnan(y)
    if np.any(np.isinf(y)):
        raise ValueError("every human score must be a finite number (None or NaN for an item not rated)")
    return y, f, pi, rated


def active_ppi_mean(
    human: Sequence[float | None],
    judge: Sequence[float],
    probabilities: Sequence[float],
    *,
    confidence: float = 0.95,
    tuning: str = "ppi++",
) -> ActivePPIResult:
    """Active PPI from one entry per item: the human score (None or NaN where the item was not sent to humans), the
    judge's score and the probability with which the item was sent to humans."""
    import numpy as np  # noqa: PLC0415 - numpy is heavy; only the statistics that need it load it

    check_settings(tuning, confidence)
    y, f, pi, rated = _checked(human, judge, probabilities)
    n, n_total = int(rated.sum()), int(f.size)
    result: ActivePPIResult = {
        "active": undefined_estimate("undefined"),
        "human_only": undefined_estimate("undefined"),
        "uniform": undefined_estimate("undefined"),
        "ratings_saved": undefined("undefined"),
        "tuning_lambda": undefined("undefined"),
        "tuning": tuning,
        "confidence": confidence,
        "n": n,
        "expected_n": float(pi.sum()),
        "n_total": n_total,
        "undefined": None,
    }
    if n < MIN_HUMAN_ITEMS:
        reason = f"{n} items have human scores; at least {MIN_HUMAN_ITEMS} are needed for a CLT interval"
        return {
            **result,
            "active": undefined_estimate(reason),
            "human_only": undefined_estimate(reason),
            "uniform": undefined_estimate(reason),
            "ratings_saved": undefined(reason),
            "tuning_lambda": undefined(reason),
            "undefined": reason,
        }
    z = normal_quantile(confidence)
    w = np.where(rated, 1.0 / pi, 0.0)
    yw = np.where(rated, y, 0.0) * w
    g = f * (w - 1.0)
    lam = 1.0
    if tuning == "ppi++":
        var_g = float(np.var(g))
        lam = 0.0 if var_g == 0.0 else min(1.0, max(0.0, float(np.mean((yw - yw.mean()) * (g - g.mean()))) / var_g))
    terms = yw - lam * g
    root_n = math.sqrt(n_total)
    active = clt_estimate(float(terms.mean()), float(terms.std()) / root_n, z)
    human_only = clt_estimate(float(yw.mean()), float(yw.std()) / root_n, z)

    # The uniform rule's moments, estimated from the rated items by inverse-probability weighting.
    y0 = np.where(rated, y, 0.0)
    mean_y = float(np.mean(w * y0))
    var_y = max(0.0, float(np.mean(w * y0 * y0)) - mean_y * mean_y)
    ff = float(np.mean(w * f * f))
    lam_u = 0.0 if ff == 0.0 else min(1.0, max(0.0, float(np.mean(w * y0 * f)) / ff))
    if tuning == "ppi":
        lam_u = 1.0
    e_resid = float(np.mean(w * (y0 - lam_u * f) ** 2))
    pi_u = float(pi.mean())
    uniform_se = math.sqrt(max(0.0, var_y + (1.0 - pi_u) / pi_u * e_resid) / n_total)
    uniform = clt_estimate(float(terms.mean()), uniform_se, z)
    active_se = float(active["standard_error"]["value"] or 0.0)
    denominator = n_total * active_se * active_se - var_y + e_resid
    if denominator <= 0.0:
        saved: Stat = undefined("no uniform budget reaches the active interval's width on these estimates")
    else:
        saved = defined(n_total * e_resid / denominator - float(pi.sum()))
    return {
        **result,
        "active": active,
        "human_only": human_only,
        "uniform": uniform,
        "ratings_saved": saved,
        "tuning_lambda": defined(lam),
    }

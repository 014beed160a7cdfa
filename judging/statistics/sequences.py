"""Confidence sequences: intervals for a mean that hold at every look at once, so a campaign may be watched after
every rating and stopped as soon as its question is answered.

A 95% confidence sequence (C_1, C_2, ...) covers the true mean at every n simultaneously with probability at least
0.95; a fixed-n interval recomputed after each rating does not (the chance that one of the looks misses grows with
the number of looks). Observations are assumed independent with a common mean (or, more generally, each with the same
conditional mean given the past) and bounded in a known range [lower, upper]: the bound is what makes the guarantee
hold without any normal approximation.

Methods (``METHODS``), each on x = (value − lower) / (upper − lower) in [0, 1]:

- ``betting`` (the default): Waudby-Smith and Ramdas, "Estimating means of bounded random variables by betting",
  JRSS-B 2024, the hedged capital process with predictable plug-in bets. For a candidate mean m,
  K⁺_t(m) = Π (1 + λ⁺_i(m) (x_i − m)) and K⁻_t(m) = Π (1 − λ⁻_i(m) (x_i − m)), with
  λ_t = sqrt(2 log(2/α) / (σ̂²_(t−1) t log(1 + t))), λ⁺_t(m) = min(λ_t, c / m), λ⁻_t(m) = min(λ_t, c / (1 − m)),
  c = 1/2, μ̂_t = (1/2 + Σ_(i≤t) x_i) / (t + 1), σ̂²_t = (1/4 + Σ_(i≤t) (x_i − μ̂_i)²) / (t + 1) and σ̂²_0 = 1/4.
  C_t = {m : max(K⁺_t(m), K⁻_t(m)) / 2 < 1/α}, found on a grid of ``GRID`` candidate means; each limit is moved out
  to the nearest rejected grid point, so the grid can only widen the interval.
- ``empirical-bernstein``: Howard, Ramdas, McAuliffe and Sekhon, "Time-uniform, nonparametric, nonasymptotic
  confidence sequences", Annals of Statistics 2021: S_t = Σ (x_i − μ) is sub-exponential with scale c = 1 and variance
  process V_t = Σ (x_i − x̂_(i−1))², x̂ the running mean of the earlier x (1/2 before any) (their Theorem 4); each side
  uses their polynomial stitching boundary (Theorem 1) at α/2 with s = 1.4, η = 2 and m = 1:
  u(v) = sqrt(k1² v ℓ(v) + (k2 c ℓ(v))²) + k2 c ℓ(v), ℓ(v) = s log log(η v / m) + log(ζ(s) / (α log(η)^s)),
  k1 = (η^¼ + η^−¼) / √2, k2 = (√η + 1) / 2, v raised to m when below. C_t = mean ± u(V_t) / t.
- ``normal-mixture``: the two-sided normal-mixture boundary of the same paper for a sub-Gaussian process:
  bounded x makes S_t sub-Gaussian with V_t = t / 4 (Hoeffding), and u(v) = sqrt((v + ρ) log((v + ρ) / (ρ α²))),
  with ρ chosen to make the boundary tightest at ``optimise_at`` observations, ρ = v* / (2 log(1/α) + log(1 + 2
  log(1/α))). It ignores the variance, so it is wider than the others when the scores vary little.

Every method's limits are intersected with the earlier ones (the running intersection is itself a confidence
sequence) and with [lower, upper]. ``fixed_sample_intervals`` gives the ordinary CLT interval at each look, valid only
at a sample size planned in advance; it is here for comparison.

Pure: numpy is imported by the functions that use it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypedDict

from judging.statistics.intervals import normal_quantile
from judging.statistics.results import Interval, Stat, defined, interval, undefined_interval

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Array = npt.NDArray[np.float64]

METHODS = ("betting", "empirical-bernstein", "normal-mixture")
GRID = 2000
BET_TRUNCATION = 0.5
BLOCK = 256
STITCHING_S = 1.4
STITCHING_ETA = 2.0
STITCHING_V_MIN = 1.0
DEFAULT_OPTIMISE_AT = 100
# The running intersection can only become empty when the values are not draws with one fixed mean, or in the event
# of probability at most α in which the sequence misses; either way no interval is honest.
EMPTY = "the running intersection is empty: the values are not consistent with one fixed mean"


class Look(TypedDict):
    n: int
    estimate: Stat
    interval: Interval


class Decision(TypedDict):
    rule: str
    met: bool | None
    decision: str | None
    n: int
    evidence: Interval
    undefined: str | None


def _unit(values: Sequence[float], lower: float, upper: float) -> Array:
    import numpy as np  # noqa: PLC0415 - numpy is heavy; only the statistics that need it load it

    if not (math.isfinite(lower) and math.isfinite(upper) and lower < upper):
        raise ValueError(f"the range must be finite with lower < upper, not [{lower}, {upper}]")
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError("values must be a list of numbers")
    if not np.all(np.isfinite(x)):
        raise ValueError("every value must be a finite number")
    if np.any(x < lower) or np.any(x > upper):
        raise ValueError(f"every value must lie in the stated range [{lower}, {upper}]")
    return (x - lower) / (upper - lower)


def betting_limits(x: Array, *, confidence: float = 0.95, grid: int = GRID) -> tuple[Array, Array]:
    """Lower and upper limits in [0, 1] after each observation of x in [0, 1], before the running intersection."""
    import numpy as np  # noqa: PLC0415 - numpy is heavy; only the statistics that need it load it

    alpha = 1.0 - confidence
    t = np.arange(1, x.size + 1, dtype=np.float64)
    mu = (0.5 + np.cumsum(x)) / (t + 1.0)
    sigma2 = (0.25 + np.cumsum((x - mu) ** 2)) / (t + 1.0)
    sigma2_before = np.concatenate([[0.25], sigma2[:-1]])
    bet = np.sqrt(2.0 * math.log(2.0 / alpha) / (sigma2_before * t * np.log1p(t)))
    m = (np.arange(grid) + 0.5) / grid
    low = np.empty(x.size)
    high = np.empty(x.size)
    carry_up = np.zeros(grid)
    carry_down = np.zeros(grid)
    threshold = math.log(1.0 / alpha) + math.log(2.0)  # max(K⁺, K⁻) / 2 < 1/α
    # Blocks of looks keep the memory at BLOCK × grid numbers however long the stream is.
    for start in range(0, x.size, BLOCK):
        stop = min(start + BLOCK, x.size)
        centred = x[start:stop, None] - m[None, :]
        up = np.minimum(bet[start:stop, None], BET_TRUNCATION / m[None, :])
        down = np.minimum(bet[start:stop, None], BET_TRUNCATION / (1.0 - m[None, :]))
        log_up = carry_up + np.cumsum(np.log1p(up * centred), axis=0)
        log_down = carry_down + np.cumsum(np.log1p(-down * centred), axis=0)
        carry_up, carry_down = log_up[-1], log_down[-1]
        accepted = np.maximum(log_up, log_down) < threshold
        # The limits move out to the last rejected grid point (or the range's end), so that the true mean, which
        # lies between grid points, is never cut off by the grid.
        first = np.argmax(accepted, axis=1)
        last = grid - 1 - np.argmax(accepted[:, ::-1], axis=1)
        block_low = np.where(first > 0, m[np.maximum(first - 1, 0)], 0.0)
        block_high = np.where(last < grid - 1, m[np.minimum(last + 1, grid - 1)], 1.0)
        # Nothing accepted: the sequence has missed (probability at most α). A reversed pair makes the running
        # intersection empty, which the caller reports as undefined.
        none = ~accepted.any(axis=1)
        low[start:stop] = np.where(none, 1.0, block_low)
        high[start:stop] = np.where(none, 0.0, block_high)
    return low, high


def stitching_boundary(v: Array | float, alpha: float, *, scale: float = 1.0) -> Array:
    """Howard et al.'s polynomial stitching boundary u(v) for a sub-gamma process of scale ``scale`` (one-sided at
    level α), with s = 1.4, η = 2 and m = 1."""
    import numpy as np  # noqa: PLC0415 - numpy is heavy; only the statistics that need it load it
    from scipy.special import zeta  # noqa: PLC0415 - scipy is slow to import; only this boundary needs it

    s, eta = STITCHING_S, STITCHING_ETA
    k1 = (eta**0.25 + eta**-0.25) / math.sqrt(2.0)
    k2 = (math.sqrt(eta) + 1.0) / 2.0
    use_v = np.maximum(np.asarray(v, dtype=np.float64), STITCHING_V_MIN)
    ell = s * np.log(np.log(eta * use_v / STITCHING_V_MIN)) + math.log(float(zeta(s)) / (alpha * math.log(eta) ** s))
    second = k2 * scale * ell
    return np.asarray(np.sqrt(k1 * k1 * use_v * ell + second * second) + second)


def normal_mixture_boundary(v: Array | float, alpha: float, *, v_opt: float) -> Array:
    """Howard et al.'s two-sided normal-mixture boundary: P(∃t: |S_t| >= u(V_t)) <= α for a sub-Gaussian S_t, with
    ρ = v_opt / (2 log(1/α) + log(1 + 2 log(1/α)))."""
    import numpy as np  # noqa: PLC0415 - numpy is heavy; only the statistics that need it load it

    log_inv = math.log(1.0 / alpha)
    rho = v_opt / (2.0 * log_inv + math.log(1.0 + 2.0 * log_inv))
    vv = np.asarray(v, dtype=np.float64)
    return np.asarray(np.sqrt((vv + rho) * np.log((vv + rho) / (rho * alpha * alpha))))


def confidence_sequence(
    values: Sequence[float],
    *,
    lower: float,
    upper: float,
    confidence: float = 0.95,
    method: str = "betting",
    optimise_at: int = DEFAULT_OPTIMISE_AT,
) -> list[Look]:
    """The running interval for the mean after each of ``values`` (in the order they arrived), all in [lower,
    upper]: one look per value, each with n, the running mean and the interval."""
    import numpy as np  # noqa: PLC0415 - numpy is heavy; only the statistics that need it load it

    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, not {confidence!r}")
    x = _unit(values, lower, upper)
    if x.size == 0:
        return []
    alpha = 1.0 - confidence
    t = np.arange(1, x.size + 1, dtype=np.float64)
    mean = np.cumsum(x) / t
    if method == "betting":
        low, high = betting_limits(x, confidence=confidence)
    elif method == "empirical-bernstein":
        predicted = np.concatenate([[0.5], mean[:-1]])
        radius = stitching_boundary(np.cumsum((x - predicted) ** 2), alpha / 2.0) / t
        low, high = mean - radius, mean + radius
    else:
        radius = normal_mixture_boundary(t / 4.0, alpha, v_opt=optimise_at / 4.0) / t
        low, high = mean - radius, mean + radius
    low = np.maximum.accumulate(np.clip(low, 0.0, 1.0))
    high = np.minimum.accumulate(np.clip(high, 0.0, 1.0))
    span = upper - lower
    return [
        {
            "n": i + 1,
            "estimate": defined(lower + span * float(mean[i])),
            "interval": interval(lower + span * float(low[i]), lower + span * float(high[i]))
            if low[i] <= high[i]
            else undefined_interval(EMPTY),
        }
        for i in range(x.size)
    ]


def paired_difference_sequence(
    first: Sequence[float],
    second: Sequence[float],
    *,
    lower: float,
    upper: float,
    confidence: float = 0.95,
    method: str = "betting",
) -> list[Look]:
    """The confidence sequence for mean(first − second) over paired items (the same prompt answered by both
    systems), each score in [lower, upper], so each difference lies in [lower − upper, upper − lower]."""
    if len(first) != len(second):
        raise ValueError("first and second must pair up one to one")
    differences = [float(a) - float(b) for a, b in zip(first, second, strict=True)]
    for a, b in zip(first, second, strict=True):
        if not (lower <= a <= upper and lower <= b <= upper):
            raise ValueError(f"every score must lie in the stated range [{lower}, {upper}]")
    span = upper - lower
    return confidence_sequence(differences, lower=-span, upper=span, confidence=confidence, method=method)


WIN_VALUES = {"win": 1.0, "tie": 0.5, "loss": 0.0}


def win_rate_sequence(outcomes: Sequence[str], *, confidence: float = 0.95, method: str = "betting") -> list[Look]:
    """The confidence sequence for a win rate from outcomes "win", "tie" or "loss" (a tie counts one half)."""
    unknown = sorted({o for o in outcomes if o not in WIN_VALUES})
    if unknown:
        raise ValueError(f"outcomes must be win, tie or loss, not {', '.join(map(repr, unknown))}")
    return confidence_sequence(
        [WIN_VALUES[o] for o in outcomes], lower=0.0, upper=1.0, confidence=confidence, method=method
    )


def fixed_sample_intervals(values: Sequence[float], *, confidence: float = 0.95) -> list[Look]:
    """The CLT interval mean ± z · s / sqrt(n) (s dividing by n − 1) at each look: valid at one sample size fixed in
    advance, not when read at every look. Undefined below two values."""
    import numpy as np  # noqa: PLC0415 - numpy is heavy; only the statistics that need it load it

    x = np.asarray(values, dtype=np.float64)
    z = normal_quantile(confidence)
    t = np.arange(1, x.size + 1, dtype=np.float64)
    mean = np.cumsum(x) / t
    square = np.cumsum(x * x)
    looks: list[Look] = []
    for i in range(x.size):
        n = i + 1
        if n < 2:
            looks.append({"n": n, "estimate": defined(float(mean[i])), "interval": undefined_interval("one value")})
            continue
        variance = max(0.0, (float(square[i]) - n * float(mean[i]) ** 2) / (n - 1))
        half = z * math.sqrt(variance / n)
        looks.append(
            {"n": n, "estimate": defined(float(mean[i])), "interval": interval(mean[i] - half, mean[i] + half)}
        )
    return looks


def _no_data(rule: str) -> Decision:
    reason = "no ratings yet: a stopping rule needs at least one look"
    return {
        "rule": rule,
        "met": None,
        "decision": None,
        "n": 0,
        "evidence": undefined_interval(reason),
        "undefined": reason,
    }


def _on_latest_look(looks: Sequence[Look], rule: str, decide: Callable[[float, float], tuple[bool, str]]) -> Decision:
    """The rule decided by `decide(low, high)` (whether it is met, and the decision's words) on the latest look's
    interval, which is the evidence; undefined when there is no look yet or the latest has no interval."""
    if not looks:
        return _no_data(rule)
    last = looks[-1]
    evidence = last["interval"]
    low, high = evidence["low"], evidence["high"]
    if low is None or high is None:
        return {**_no_data(rule), "n": last["n"], "undefined": evidence["undefined"] or "no interval"}
    met, decision = decide(low, high)
    return {"rule": rule, "met": met, "decision": decision, "n": last["n"], "evidence": evidence, "undefined": None}


def difference_decision(looks: Sequence[Look], *, first: str = "A", second: str = "B") -> Decision:
    """The rule "one system beats the other" on the confidence sequence of mean(first − second): met once the
    interval excludes 0 (the decision names the winner), with the interval and n of the latest look as evidence.
    Because the sequence holds at every look, stopping at the first look where it is met keeps the error at α."""

    def decide(low: float, high: float) -> tuple[bool, str]:
        if low > 0.0:
            return True, f"{first} beats {second}"
        if high < 0.0:
            return True, f"{second} beats {first}"
        return False, "not yet: the interval still contains 0"

    return _on_latest_look(looks, f"{first} beats {second} or {second} beats {first}", decide)


def width_decision(looks: Sequence[Look], width: float) -> Decision:
    """The rule "the interval is at most ``width`` wide", on the latest look of a confidence sequence."""
    if not (math.isfinite(width) and width > 0.0):
        raise ValueError(f"the width must be a positive number, not {width!r}")

    def decide(low: float, high: float) -> tuple[bool, str]:
        if high - low <= width:
            return True, f"width {high - low:.4g} <= {width:g}"
        return False, f"not yet: width {high - low:.4g} > {width:g}"

    return _on_latest_look(looks, f"width <= {width:g}", decide)


def first_ratings_paired(rows: list[tuple[int, str, float]], first: str, second: str) -> list[tuple[float, float]]:
    """(first's score, second's score) on each prompt both systems were rated on, from rows of (prompt, system,
    score) in the order they were given; pairs come in the order each was completed, and a prompt rated more than
    once per system uses its first rating of each."""
    seen: dict[int, dict[str, float]] = {}
    pairs = []
    for turn, key, value in rows:
        if key not in (first, second):
            continue
        scores = seen.setdefault(turn, {})
        if key in scores:
            continue
        scores[key] = value
        if len(scores) == 2:
            pairs.append((scores[first], scores[second]))
    return pairs

"""Trust or Escalate (Jung, Brahman and Choi, ICLR 2025): when may a judge's verdict stand in for a human's?

Each calibration item carries the judge's confidence and whether the judge agreed with the human label. The judge
keeps an item when its confidence is at least a threshold λ and escalates it to a human otherwise. The threshold is
chosen so that the disagreement rate on kept items, the selective risk R(λ), is at most α = 1 - target with
probability at least 1 - δ over the draw of the calibration items.

The calibration follows the paper's fixed-sequence testing:
- the candidate thresholds are the distinct calibration confidences that keep at least ``min_kept`` items, tested
  from the highest (fewest items kept) down;
- each λ tests H0: R(λ) > α with the exact binomial p-value P(Binomial(m, α) <= k), where m items are kept and k of
  them disagree; this p-value is at most δ exactly when the one-sided Clopper-Pearson upper bound of R(λ) at
  confidence 1 - δ is at most α, which is the form the authors' code tests;
- testing stops at the first λ whose p-value exceeds δ; the chosen threshold is the lowest λ tested before it.
Because the order is fixed before the agreements are looked at, no multiplicity correction is needed. When even the
first threshold fails, no threshold is returned (the authors' code falls back to the highest one; here the result is
"undefined" with the reason, so nothing is kept).

Pure: numpy and scipy are imported by the functions that use them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TypedDict

from judging.statistics.results import Stat, defined, undefined

# The authors' code tests only thresholds that keep at least 30 calibration items.
DEFAULT_MIN_KEPT = 30


class TrustOrEscalate(TypedDict):
    threshold: Stat
    coverage: Stat
    kept: int
    empirical_agreement: Stat
    agreement_lower_bound: Stat
    p_value: Stat
    thresholds_tested: int
    target: float
    delta: float
    min_kept: int
    n: int
    undefined: str | None


def _check_level(name: str, value: float) -> None:
    if not (isinstance(value, int | float) and 0.0 < float(value) < 1.0):
        raise ValueError(f"{name} must be strictly between 0 and 1, not {value!r}")


def minimum_items(target: float, delta: float) -> int:
    """The fewest kept items with which even perfect agreement can pass: the smallest m with target^m <= δ."""
    _check_level("target", target)
    _check_level("delta", delta)
    return max(1, math.ceil(math.log(delta) / math.log(target) - 1e-12))


def agreement_lower_bound(kept: int, agreeing: int, delta: float) -> float:
    """The one-sided Clopper-Pearson lower confidence bound, at confidence 1 - δ, of the agreement rate."""
    from scipy.stats import beta  # noqa: PLC0415 - scipy is heavy; only the statistics that need it load it

    if kept <= 0:
        raise ValueError("the bound needs at least one kept item")
    disagreeing = kept - agreeing
    if disagreeing >= kept:
        return 0.0
    return 1.0 - float(beta.ppf(1.0 - delta, disagreeing + 1, kept - disagreeing))


def _result(
    *, target: float, delta: float, min_kept: int, n: int, reason: str | None = None, tested: int = 0
) -> TrustOrEscalate:
    missing = undefined(reason or "undefined")
    return {
        "threshold": missing,
        "coverage": missing,
        "kept": 0,
        "empirical_agreement": missing,
        "agreement_lower_bound": missing,
        "p_value": missing,
        "thresholds_tested": tested,
        "target": target,
        "delta": delta,
        "min_kept": min_kept,
        "n": n,
        "undefined": reason,
    }


def trust_or_escalate(
    confidence: Sequence[float],
    agreed: Sequence[bool],
    *,
    target: float,
    delta: float,
    min_kept: int = DEFAULT_MIN_KEPT,
) -> TrustOrEscalate:
    """Calibrate the confidence threshold on ``n`` items (``confidence[i]``, ``agreed[i]``).

    Returns the threshold, the coverage (share of the calibration items kept), the number kept, the empirical
    agreement on them, its Clopper-Pearson lower bound at confidence 1 - δ, the p-value of the chosen threshold and
    how many thresholds were tested; every figure is undefined, with the reason, when no threshold passes.
    """
    import numpy as np  # noqa: PLC0415 - numpy is heavy; only the statistics that need it load it
    from scipy.stats import binom  # noqa: PLC0415 - scipy is heavy; only the statistics that need it load it

    _check_level("target", target)
    _check_level("delta", delta)
    if min_kept < 1:
        raise ValueError(f"min_kept must be at least 1, not {min_kept}")
    conf = np.asarray(confidence, dtype=np.float64)
    agree = np.asarray(agreed, dtype=bool)
    if conf.ndim != 1 or conf.shape != agree.shape:
        raise ValueError(f"confidence and agreed must be two lists of one length, not {conf.shape} and {agree.shape}")
    if not np.all(np.isfinite(conf)):
        raise ValueError("every confidence must be a finite number")
    n = int(conf.size)
    alpha = 1.0 - target
    needed = max(min_kept, minimum_items(target, delta))
    if n < needed:
        return _result(
            target=target,
            delta=delta,
            min_kept=min_kept,
            n=n,
            reason=f"{n} calibration items; at least {needed} are needed (no threshold keeping fewer than "
            f"{min_kept} is tested, and even perfect agreement on fewer than {minimum_items(target, delta)} cannot "
            f"show {target:g} agreement with probability {1 - delta:g})",
        )

    order = np.argsort(-conf, kind="stable")
    sorted_conf = conf[order]
    kept = np.arange(1, n + 1)
    disagreements = np.cumsum(~agree[order])
    # A threshold equal to a confidence keeps every item tied with it: only the last of a run of ties is a cut.
    last_of_tie = np.append(sorted_conf[1:] != sorted_conf[:-1], True)
    cuts = np.flatnonzero(last_of_tie & (kept >= min_kept))
    p_values = binom.cdf(disagreements[cuts], kept[cuts], alpha)
    failing = np.flatnonzero(p_values > delta)
    passing = int(failing[0]) if failing.size else int(cuts.size)
    tested = passing + 1 if failing.size else passing
    if passing == 0:
        first = int(cuts[0])
        m = int(kept[first])
        share = (m - int(disagreements[first])) / m
        return _result(
            target=target,
            delta=delta,
            min_kept=min_kept,
            n=n,
            tested=tested,
            reason=f"no threshold passes: at the highest one tested ({float(sorted_conf[first]):g}, keeping {m} "
            f"items with agreement {share:.3f}) the binomial p-value {float(p_values[0]):.3g} exceeds δ = {delta:g}",
        )
    chosen = int(cuts[passing - 1])
    m = int(kept[chosen])
    agreeing = m - int(disagreements[chosen])
    return {
        "threshold": defined(float(sorted_conf[chosen])),
        "coverage": defined(m / n),
        "kept": m,
        "empirical_agreement": defined(agreeing / m),
        "agreement_lower_bound": defined(agreement_lower_bound(m, agreeing, delta)),
        "p_value": defined(float(p_values[passing - 1])),
        "thresholds_tested": tested,
        "target": target,
        "delta": delta,
        "min_kept": min_kept,
        "n": n,
        "undefined": None,
    }


def modal_label(values: Sequence[float]) -> float | None:
    """The human label of an item: the most frequent of its ratings; None when it has none or two values tie."""
    counts: dict[float, int] = {}
    for value in values:
        counts[float(value)] = counts.get(float(value), 0) + 1
    if not counts:
        return None
    top = max(counts.values())
    modes = [value for value, count in counts.items() if count == top]
    return modes[0] if len(modes) == 1 else None


def confidence_from_probabilities(probabilities: Mapping[str, float], chosen: str | None = None) -> float:
    """The probability mass of the chosen score (by default the most probable one) in a score distribution,
    normalised over the scores it lists."""
    if not probabilities:
        raise ValueError("the score distribution is empty")
    masses = {key: float(value) for key, value in probabilities.items()}
    if any(not math.isfinite(value) or value < 0 for value in masses.values()):
        raise ValueError("probabilities must be finite and non-negative")
    total = sum(masses.values())
    if total <= 0:
        raise ValueError("the score distribution has no mass")
    key = max(masses, key=lambda k: masses[k]) if chosen is None else chosen
    if key not in masses:
        raise ValueError(f"the chosen score {key!r} is not in the distribution")
    return masses[key] / total


def confidence_from_logprobs(logprobs: Mapping[str, float], chosen: str | None = None) -> float:
    """The same from the log-probabilities of the score tokens (a softmax over the listed scores)."""
    if not logprobs:
        raise ValueError("no log-probabilities")
    values = {key: float(value) for key, value in logprobs.items()}
    if any(math.isnan(value) or value == math.inf for value in values.values()):
        raise ValueError("log-probabilities must be numbers below +inf")
    top = max(values.values())
    if top == -math.inf:
        raise ValueError("every score has probability 0")
    return confidence_from_probabilities({key: math.exp(value - top) for key, value in values.items()}, chosen)


def confidence_from_samples(samples: Sequence[float]) -> tuple[float, float]:
    """(mode, share of the k samples equal to it); among tied modes the smallest value is the mode."""
    if not samples:
        raise ValueError("no samples")
    counts: dict[float, int] = {}
    for value in samples:
        counts[float(value)] = counts.get(float(value), 0) + 1
    top = max(counts.values())
    mode = min(value for value, count in counts.items() if count == top)
    return mode, top / len(samples)

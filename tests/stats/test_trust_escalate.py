"""Trust or Escalate calibration: a worked example against the authors' formulation, and its guarantee by simulation."""

import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import binom

from judging.statistics.trust_escalate import (
    agreement_lower_bound,
    confidence_from_logprobs,
    confidence_from_probabilities,
    confidence_from_samples,
    minimum_items,
    trust_or_escalate,
)


def _authors_threshold(confidence, agreed, target, delta, min_kept):
    """The calibration as the authors' code states it (jaehunjung1/cascaded-selective-evaluation, util.py), written
    as plain loops: the Clopper-Pearson upper bound of the risk is found with brentq, thresholds are tested from the
    highest down, and testing stops at the first one whose bound exceeds alpha. Returns None where their code falls
    back to the highest threshold."""
    alpha = 1 - target
    candidates = sorted({c for c in confidence if sum(x >= c for x in confidence) >= min_kept}, reverse=True)
    chosen = None
    for lam in candidates:
        kept = [a for c, a in zip(confidence, agreed, strict=True) if c >= lam]
        wrong, size = sum(not a for a in kept), len(kept)
        upper = brentq(lambda r, k=wrong, m=size: binom.cdf(k, m, r) - delta, 0, 0.9999)
        if upper > alpha:
            break
        chosen = lam
    return chosen


def _worked_example():
    rng = np.random.default_rng(3)
    confidence = np.round(rng.uniform(0, 1, 120), 2)
    agreed = rng.uniform(0, 1, 120) < 0.55 + 0.45 * confidence
    return confidence.tolist(), agreed.tolist()


def test_threshold_matches_the_authors_formulation():
    confidence, agreed = _worked_example()
    result = trust_or_escalate(confidence, agreed, target=0.8, delta=0.1, min_kept=20)
    expected = _authors_threshold(confidence, agreed, 0.8, 0.1, 20)
    assert expected is not None
    assert result["threshold"]["value"] == expected
    kept = [a for c, a in zip(confidence, agreed, strict=True) if c >= expected]
    assert result["kept"] == len(kept)
    assert result["coverage"]["value"] == pytest.approx(len(kept) / 120)
    assert result["empirical_agreement"]["value"] == pytest.approx(sum(kept) / len(kept))
    assert result["p_value"]["value"] <= 0.1
    # The p-value at the threshold passes, so the Clopper-Pearson lower bound of agreement reaches the target.
    assert result["agreement_lower_bound"]["value"] >= 0.8
    assert result["n"] == 120
    assert result["undefined"] is None


def test_p_value_is_the_exact_binomial_tail():
    # 40 items, all kept at the lowest confidence; 3 disagree: P(Binomial(40, 0.2) <= 3), summed by hand.
    confidence = [0.5] * 40
    agreed = [False] * 3 + [True] * 37
    result = trust_or_escalate(confidence, agreed, target=0.8, delta=0.05, min_kept=30)
    by_hand = sum(math.comb(40, k) * 0.2**k * 0.8 ** (40 - k) for k in range(4))
    assert result["p_value"]["value"] == pytest.approx(by_hand, rel=1e-12)
    assert result["threshold"]["value"] == 0.5
    assert result["coverage"]["value"] == 1.0


def test_no_passing_threshold_is_undefined_with_the_reason():
    confidence = [i / 100 for i in range(100)]
    agreed = [i % 2 == 0 for i in range(100)]
    result = trust_or_escalate(confidence, agreed, target=0.9, delta=0.1)
    assert result["threshold"]["value"] is None
    assert result["coverage"]["value"] is None
    assert "no threshold passes" in result["undefined"]
    assert result["thresholds_tested"] == 1


def test_too_few_items_is_undefined():
    result = trust_or_escalate([0.9] * 20, [True] * 20, target=0.9, delta=0.1)
    assert "20 calibration items; at least 30" in result["undefined"]
    # Perfect agreement on m items passes only when 0.95^m <= 0.05, i.e. m >= 59.
    assert minimum_items(0.95, 0.05) == 59
    assert 0.95**59 <= 0.05 < 0.95**58
    assert "at least 59" in trust_or_escalate([0.9] * 40, [True] * 40, target=0.95, delta=0.05)["undefined"]


def test_ties_are_kept_together():
    confidence = [0.9] * 35 + [0.8] * 35
    agreed = [True] * 35 + [True] * 30 + [False] * 5
    result = trust_or_escalate(confidence, agreed, target=0.8, delta=0.1)
    assert result["kept"] in (35, 70)
    assert result["threshold"]["value"] == 0.8
    assert result["kept"] == 70


def test_agreement_lower_bound_is_clopper_pearson():
    # The one-sided Clopper-Pearson lower limit L for 45 agreements of 50 at confidence 0.9 is defined by
    # P(Binomial(50, L) >= 45) = 0.1 (Clopper and Pearson 1934); checked here by that defining equation.
    low = agreement_lower_bound(50, 45, 0.1)
    tail = sum(math.comb(50, k) * low**k * (1 - low) ** (50 - k) for k in range(45, 51))
    assert tail == pytest.approx(0.1, abs=1e-9)
    assert 0.8 < low < 0.9
    assert agreement_lower_bound(10, 0, 0.1) == 0.0


def test_bad_input_names_the_problem():
    with pytest.raises(ValueError, match="target"):
        trust_or_escalate([0.5], [True], target=1.0, delta=0.1)
    with pytest.raises(ValueError, match="one length"):
        trust_or_escalate([0.5, 0.6], [True], target=0.9, delta=0.1)
    with pytest.raises(ValueError, match="finite"):
        trust_or_escalate([math.nan], [True], target=0.9, delta=0.1)


def test_confidence_helpers():
    assert confidence_from_probabilities({"1": 0.1, "2": 0.6, "3": 0.3}) == pytest.approx(0.6)
    assert confidence_from_probabilities({"1": 1, "2": 3}, chosen="1") == pytest.approx(0.25)
    assert confidence_from_logprobs({"4": math.log(0.5), "5": math.log(0.25)}) == pytest.approx(2 / 3)
    assert confidence_from_logprobs({"4": -1000.0, "5": -1000.0 + math.log(3)}) == pytest.approx(0.75)
    assert confidence_from_samples([4, 5, 4, 3, 4]) == (4.0, 0.6)
    assert confidence_from_samples([2, 3]) == (2.0, 0.5)
    with pytest.raises(ValueError, match="not in the distribution"):
        confidence_from_probabilities({"1": 1.0}, chosen="2")


REPLICATIONS = 200
N_CALIBRATION = 1000


def _true_selective_agreement(threshold: float) -> float:
    """Confidence c ~ U(0, 1) and P(agree | c) = 0.5 + 0.5 c, so E[agree | c >= t] = 0.75 + 0.25 t."""
    return 0.75 + 0.25 * threshold


@pytest.mark.parametrize(("target", "delta", "seed"), [(0.9, 0.1, 1), (0.85, 0.05, 2)])
def test_simulated_guarantee(target, delta, seed):
    rng = np.random.default_rng(seed)
    held, coverages = 0, []
    for _ in range(REPLICATIONS):
        confidence = rng.uniform(0, 1, N_CALIBRATION)
        agreed = rng.uniform(0, 1, N_CALIBRATION) < 0.5 + 0.5 * confidence
        result = trust_or_escalate(confidence, agreed, target=target, delta=delta)
        threshold = result["threshold"]["value"]
        # No threshold keeps nothing, which cannot break the guarantee.
        held += threshold is None or _true_selective_agreement(threshold) >= target
        coverages.append(0.0 if threshold is None else result["coverage"]["value"])
    share = held / REPLICATIONS
    message = (
        f"target {target}, delta {delta}: agreement on kept items reached the target in {share:.3f} of "
        f"{REPLICATIONS} replications (needed {1 - delta}); mean coverage {np.mean(coverages):.3f} "
        f"(the best valid threshold keeps {1 - (target - 0.75) / 0.25:.3f})"
    )
    print(message)
    assert share >= 1 - delta, message
    # The guarantee must not come from refusing everything. Fixed-sequence testing over every distinct confidence
    # stops at the first noisy failure, so it keeps about half of what the best valid threshold would.
    assert np.mean(coverages) > 0.25 * (1 - (target - 0.75) / 0.25), message

"""Confidence sequences: each boundary against an independent computation from its paper, and the anytime guarantee
checked by seeded simulation against the fixed-n interval read at every look.

No reference package could be used: confseq 0.0.11 does not build here (its C++ extension needs Boost) and
expectation 0.6.1 needs Python 3.12, so the checks are hand-worked from the papers' definitions."""

import math

import numpy as np
import pytest

from judging.statistics.sequences import (
    BLOCK,
    GRID,
    betting_limits,
    confidence_sequence,
    difference_decision,
    fixed_sample_intervals,
    normal_mixture_boundary,
    paired_difference_sequence,
    stitching_boundary,
    width_decision,
    win_rate_sequence,
)
from tests.stats.reference import hedged_log_capital_by_hand

X = [0.2, 0.9, 0.4, 0.4, 0.7, 1.0, 0.0, 0.55, 0.35, 0.6, 0.8, 0.25, 0.5, 0.65, 0.45, 0.3, 0.75, 0.5, 0.6, 0.4]


def test_betting_limits_invert_the_hand_written_capital_process():
    """At every look the reported lower limit is a grid point the capital rejects (capital >= 1/α) and the next grid
    point up is accepted; the same for the upper limit; the capital is the plain loop of Waudby-Smith and Ramdas."""
    alpha = 0.05
    low, high = betting_limits(np.asarray(X), confidence=0.95)
    threshold = math.log(1 / alpha)
    step = 1.0 / GRID
    for t in range(len(X)):
        if low[t] > 0:
            assert hedged_log_capital_by_hand(X, low[t], alpha)[t] >= threshold
            assert hedged_log_capital_by_hand(X, low[t] + step, alpha)[t] < threshold
        if high[t] < 1:
            assert hedged_log_capital_by_hand(X, high[t], alpha)[t] >= threshold
            assert hedged_log_capital_by_hand(X, high[t] - step, alpha)[t] < threshold
    assert low[-1] > 0 and high[-1] < 1  # 20 values are enough to leave the trivial interval


def test_betting_limits_across_blocks_of_looks():
    """Long streams are processed in blocks of looks; the capital carries over from one block to the next."""
    alpha = 0.05
    x = np.random.default_rng(4).beta(2, 5, 600)
    low, high = betting_limits(x, confidence=0.95)
    threshold = math.log(1 / alpha)
    for t in (BLOCK - 1, BLOCK, BLOCK + 1, 599):
        capital = hedged_log_capital_by_hand(list(x[: t + 1]), low[t], alpha)[t]
        assert capital >= threshold
        assert hedged_log_capital_by_hand(list(x[: t + 1]), low[t] + 1.0 / GRID, alpha)[t] < threshold
        assert hedged_log_capital_by_hand(list(x[: t + 1]), high[t], alpha)[t] >= threshold
        assert hedged_log_capital_by_hand(list(x[: t + 1]), high[t] - 1.0 / GRID, alpha)[t] < threshold


def test_normal_mixture_boundary_is_where_the_mixture_reaches_one_over_alpha():
    """Howard et al.'s two-sided normal mixture: at s = u(v) the mixture ∫ exp(λ s − λ² v / 2) dN(0, 1/ρ)(λ) of the
    exponential supermartingales equals 1/α (scipy's quad, not the closed form)."""
    from scipy import integrate, stats

    alpha, v_opt = 0.05, 25.0
    log_inv = math.log(1 / alpha)
    rho = v_opt / (2 * log_inv + math.log(1 + 2 * log_inv))
    density = stats.norm(0.0, 1.0 / math.sqrt(rho)).pdf
    for v in (1.0, 10.0, 25.0, 400.0):
        s = float(normal_mixture_boundary(v, alpha, v_opt=v_opt))
        mixture = integrate.quad(lambda lam, s=s, v=v: math.exp(lam * s - lam * lam * v / 2) * density(lam), -50, 50)
        assert mixture[0] == pytest.approx(1 / alpha, rel=1e-6)


def test_stitching_boundary_hand_worked():
    """Theorem 1 of Howard et al. (2021) at s = 1.4, η = 2, m = 1, c = 1, α = 0.025 and v = 100, by hand:
    k1 = (2^¼ + 2^−¼)/√2 = 1.43550, k2 = (√2 + 1)/2 = 1.20711, ζ(1.4) = 3.10555,
    ℓ = 1.4 log log 200 + log(3.10555 / (0.025 · (log 2)^1.4)) = 2.33435 + 5.33519 = 7.66953,
    u = sqrt(1.43550² · 100 · 7.66953 + (1.20711 · 7.66953)²) + 1.20711 · 7.66953 = 40.8184 + 9.2579 = 50.0763."""
    assert float(stitching_boundary(100.0, 0.025)) == pytest.approx(50.0763, abs=2e-4)
    # Below m the boundary stays at its value at m.
    assert float(stitching_boundary(0.3, 0.025)) == float(stitching_boundary(1.0, 0.025))


def test_scaling_pairs_and_win_rates():
    a = [4, 5, 3, 4, 5, 2, 4, 5, 4, 3]
    b = [3, 4, 3, 2, 4, 2, 3, 4, 2, 3]
    paired = paired_difference_sequence(a, b, lower=1, upper=5)
    direct = confidence_sequence([x - y for x, y in zip(a, b, strict=True)], lower=-4, upper=4)
    assert paired == direct
    scaled = confidence_sequence([(x - 1) / 4 for x in a], lower=0, upper=1)
    for look, unit in zip(confidence_sequence(a, lower=1, upper=5), scaled, strict=True):
        assert look["interval"]["low"] == pytest.approx(1 + 4 * unit["interval"]["low"])
        assert look["estimate"]["value"] == pytest.approx(1 + 4 * unit["estimate"]["value"])
    wins = win_rate_sequence(["win", "tie", "loss", "win"])
    assert wins[-1]["estimate"]["value"] == pytest.approx(0.625)
    with pytest.raises(ValueError, match="win, tie or loss"):
        win_rate_sequence(["win", "draw"])
    with pytest.raises(ValueError, match="range"):
        confidence_sequence([0.5, 1.5], lower=0, upper=1)
    with pytest.raises(ValueError, match="method"):
        confidence_sequence([0.5], lower=0, upper=1, method="bootstrap")


def test_intervals_only_shrink_and_hold_the_running_mean():
    for method in ("betting", "empirical-bernstein", "normal-mixture"):
        looks = confidence_sequence(X, lower=0, upper=1, method=method)
        lows = [look["interval"]["low"] for look in looks]
        highs = [look["interval"]["high"] for look in looks]
        assert lows == sorted(lows) and highs == sorted(highs, reverse=True)
        assert lows[-1] <= np.mean(X) <= highs[-1]
        assert looks[-1]["n"] == len(X)


def test_an_empty_intersection_is_undefined_not_a_reversed_interval():
    # A stream whose mean jumps from 0 to 1 is not one fixed mean: the early and late intervals cannot overlap.
    looks = confidence_sequence([0.0] * 60 + [1.0] * 400, lower=0, upper=1, method="normal-mixture")
    assert looks[30]["interval"]["undefined"] is None
    assert "empty" in looks[-1]["interval"]["undefined"]
    assert difference_decision(looks)["undefined"] == looks[-1]["interval"]["undefined"]


def test_stopping_rules():
    rng = np.random.default_rng(2)
    a = np.clip(rng.normal(0.7, 0.1, 300), 0, 1)
    b = np.clip(rng.normal(0.5, 0.1, 300), 0, 1)
    looks = paired_difference_sequence(a, b, lower=0, upper=1)
    decision = difference_decision(looks, first="sys_a", second="sys_b")
    assert decision["met"] is True
    assert decision["decision"] == "sys_a beats sys_b"
    assert decision["evidence"]["low"] > 0 and decision["n"] == 300
    early = difference_decision(looks[:3], first="sys_a", second="sys_b")
    assert early["met"] is False and early["decision"].startswith("not yet") and early["n"] == 3
    reversed_looks = paired_difference_sequence(b, a, lower=0, upper=1)
    assert difference_decision(reversed_looks, first="sys_b", second="sys_a")["decision"] == "sys_a beats sys_b"
    nothing = difference_decision([])
    assert nothing["met"] is None and "no ratings" in nothing["undefined"]
    width = width_decision(confidence_sequence(a, lower=0, upper=1), 0.1)
    assert width["met"] is True and width["evidence"]["high"] - width["evidence"]["low"] <= 0.1
    assert width_decision(confidence_sequence(a[:5], lower=0, upper=1), 0.1)["met"] is False
    with pytest.raises(ValueError, match="width"):
        width_decision([], 0)


REPLICATIONS = 500
LOOKS = 200
FIRST_NAIVE_LOOK = 10


def test_simulated_sequences_cover_at_every_look_where_peeking_fails():
    """500 streams of 200 ratings on a 1–5 scale (true mean 3.6: probabilities .05, .1, .2, .4, .25), a look after
    every rating. A sequence misses a stream if any look's interval excludes the truth. The fixed-n 95% CLT interval,
    read at every look from the 10th, misses far more often than 5%."""
    rng = np.random.default_rng(20261129)
    probabilities = [0.05, 0.1, 0.2, 0.4, 0.25]
    truth = float(np.dot(probabilities, [1, 2, 3, 4, 5]))
    streams = rng.choice([1, 2, 3, 4, 5], size=(REPLICATIONS, LOOKS), p=probabilities).astype(float)
    held = {"betting": 0, "empirical-bernstein": 0, "normal-mixture": 0, "fixed-n": 0}
    final_width = {name: 0.0 for name in held}
    for stream in streams:
        for method in ("betting", "empirical-bernstein", "normal-mixture"):
            looks = confidence_sequence(stream, lower=1, upper=5, method=method)
            held[method] += all(look["interval"]["low"] <= truth <= look["interval"]["high"] for look in looks)
            final_width[method] += looks[-1]["interval"]["high"] - looks[-1]["interval"]["low"]
        naive = fixed_sample_intervals(stream)[FIRST_NAIVE_LOOK - 1 :]
        held["fixed-n"] += all(look["interval"]["low"] <= truth <= look["interval"]["high"] for look in naive)
        final_width["fixed-n"] += naive[-1]["interval"]["high"] - naive[-1]["interval"]["low"]
    report = ", ".join(
        f"{name} {held[name] / REPLICATIONS:.3f} (width at n = {LOOKS}: {final_width[name] / REPLICATIONS:.3f})"
        for name in held
    )
    print(f"covered at every look over {REPLICATIONS} streams: {report}")
    for method in ("betting", "empirical-bernstein", "normal-mixture"):
        assert held[method] / REPLICATIONS >= 0.95, report
    assert held["fixed-n"] / REPLICATIONS < 0.9, report

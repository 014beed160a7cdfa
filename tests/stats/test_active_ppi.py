"""Active (inverse-probability-weighted) and stratified PPI: hand-worked and ppi_py reference values, and their
guarantees checked by seeded simulation."""

import math

import numpy as np
import pytest

from judging.statistics.active_ppi import (
    active_ppi_mean,
    sampling_probabilities,
    uncertainty_from_distribution,
    uncertainty_from_samples,
)
from judging.statistics.ppi import ppi_mean
from judging.statistics.stratified_ppi import optimal_allocation, rectifier_deviation, stratified_ppi_mean

Y = [3, 4, 2, 5, 4, 3, 4, 5, 2, 3, 4, 4]
YHAT = [3.2, 3.9, 2.5, 4.6, 4.1, 2.8, 3.7, 4.8, 2.9, 3.1, 3.6, 4.4]
YU = [3.5, 4.2, 2.2, 4.9, 3.3, 2.7, 4.0, 4.5, 3.8, 2.4, 3.0, 4.7, 3.9, 2.6, 4.1, 3.4, 4.3, 2.9, 3.6, 4.8]


def _active_by_hand(human, judge, pi, lam):
    """Zrnic and Candès's estimator written as a plain loop over items: the mean of λ f + (Y − λ f) ξ / π, and the
    standard deviation (dividing by N) of those terms over sqrt(N)."""
    terms = []
    for y, f, p in zip(human, judge, pi, strict=True):
        rated = y is not None
        terms.append(lam * f + ((y - lam * f) / p if rated else 0.0))
    mean = sum(terms) / len(terms)
    sd = math.sqrt(sum((t - mean) ** 2 for t in terms) / len(terms))
    return mean, sd / math.sqrt(len(terms))


def _example():
    """The 12 rated and 20 judge-only items of test_ppi, with made-up sending probabilities: high where the judge
    was uncertain."""
    judge = YHAT + YU
    pi = [0.9, 0.4, 0.6, 0.5, 0.3, 0.8, 0.5, 0.35, 0.7, 0.45, 0.6, 0.3] + [0.2 + 0.02 * k for k in range(20)]
    human = [float(v) for v in Y] + [None] * len(YU)
    return human, judge, pi


def test_active_estimate_and_interval_match_the_plain_loop():
    human, judge, pi = _example()
    result = active_ppi_mean(human, judge, pi, tuning="ppi")
    centre, se = _active_by_hand(human, judge, pi, 1.0)
    assert result["active"]["estimate"]["value"] == pytest.approx(centre, abs=1e-12)
    assert result["active"]["standard_error"]["value"] == pytest.approx(se, abs=1e-12)
    assert result["active"]["interval"]["low"] == pytest.approx(centre - 1.959963984540054 * se, abs=1e-9)
    assert result["tuning_lambda"]["value"] == 1.0
    human_only = _active_by_hand(human, judge, pi, 0.0)
    assert result["human_only"]["estimate"]["value"] == pytest.approx(human_only[0], abs=1e-12)
    assert (result["n"], result["n_total"]) == (12, 32)


def test_power_tuning_minimises_the_estimated_variance():
    human, judge, pi = _example()
    result = active_ppi_mean(human, judge, pi)
    lam = result["tuning_lambda"]["value"]
    assert 0.0 <= lam <= 1.0
    se = result["active"]["standard_error"]["value"]
    assert se == pytest.approx(_active_by_hand(human, judge, pi, lam)[1], abs=1e-12)
    for other in (0.0, 0.25, 0.5, 0.75, 1.0):
        assert se <= _active_by_hand(human, judge, pi, other)[1] + 1e-12


def test_everyone_rated_with_certainty_is_the_plain_mean():
    result = active_ppi_mean([float(v) for v in Y], YHAT, [1.0] * len(Y))
    assert result["active"]["estimate"]["value"] == pytest.approx(np.mean(Y), abs=1e-12)
    assert result["active"]["standard_error"]["value"] == pytest.approx(np.std(Y) / math.sqrt(len(Y)), abs=1e-12)


def test_active_bad_input_and_too_little_data():
    human, judge, pi = _example()
    with pytest.raises(ValueError, match="probability"):
        active_ppi_mean(human, judge, [0.0, *pi[1:]])
    with pytest.raises(ValueError, match="one length"):
        active_ppi_mean(human, judge[:-1], pi)
    few = [*human[:9], *([None] * 23)]
    assert "at least 10" in active_ppi_mean(few, judge, pi)["undefined"]


def test_uncertainty_from_a_distribution_or_samples():
    # Scores 3 and 5 with masses 0.75 and 0.25 (listed as 0.6 and 0.2, normalised): mean 3.5, variance
    # 0.75 * 0.25 + 0.25 * 2.25 = 0.75.
    assert uncertainty_from_distribution({"3": 0.6, "5": 0.2}) == pytest.approx(math.sqrt(0.75))
    assert uncertainty_from_distribution({"4": 1.0}) == 0.0
    # Samples 2, 4, 4, 6: mean 4, variance (4 + 0 + 0 + 4) / 4 = 2.
    assert uncertainty_from_samples([2, 4, 4, 6]) == pytest.approx(math.sqrt(2.0))
    with pytest.raises(ValueError, match="not a number"):
        uncertainty_from_distribution({"good": 1.0})
    with pytest.raises(ValueError, match="no mass"):
        uncertainty_from_distribution({"1": 0.0})
    with pytest.raises(ValueError, match="no samples"):
        uncertainty_from_samples([])


def test_sampling_probabilities_follow_the_uncertainty_and_the_budget():
    pi = sampling_probabilities([0.0, 1.0, 2.0, 3.0, 100.0], 2.0, uniform_share=0.1)
    assert sum(pi) == pytest.approx(2.0)
    assert pi[4] == 1.0  # capped, the excess spread over the others
    assert pi[0] > 0.0  # the uniform share keeps every item possible
    assert pi[0] < pi[1] < pi[2] < pi[3]
    assert sampling_probabilities([0, 0, 0, 0], 1.0) == [0.25] * 4
    with pytest.raises(ValueError, match="budget"):
        sampling_probabilities([1.0, 2.0], 3.0)
    with pytest.raises(ValueError, match="could never be rated"):
        sampling_probabilities([0.0, 2.0], 1.0, uniform_share=0.0)


# ppi_py 0.2.3 (pip ppi-python) run on each stratum: ppi_mean_ci(Y, Yhat, Yu, alpha=0.05) and the PPI++ λ, the same
# figures test_ppi checks for one stratum. The stratified estimate combines them with weights N_k / N.
def test_each_stratum_matches_ppi_py_and_the_strata_combine_by_weight():
    from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

    rng = np.random.default_rng(5)
    strata = []
    for k, noise in enumerate((0.2, 0.6, 1.2)):
        y = rng.normal(3.0 + k * 0.3, 1.0, 60)
        f = 0.8 * y + 0.5 + rng.normal(0.0, noise, 60)
        strata.append(
            {"name": f"s{k}", "human": y[:20], "judge_labelled": f[:20], "judge_unlabelled": f[20 : 40 + k * 10]}
        )
    result = stratified_ppi_mean(strata)
    sizes = np.array([20 + 20 + k * 10 for k in range(3)], dtype=float)
    weights = sizes / sizes.sum()
    centre, variance = 0.0, 0.0
    for stratum, row, weight in zip(strata, result["strata"], weights, strict=True):
        y, f, f_u = stratum["human"], stratum["judge_labelled"], stratum["judge_unlabelled"]
        low, high = ppi_mean_ci(y, f, f_u, alpha=0.05)
        estimate = float(ppi_mean_pointestimate(y, f, f_u)[0])
        assert row["estimate"]["value"] == pytest.approx(estimate, abs=1e-10)
        se = (float(high[0]) - float(low[0])) / (2 * 1.959963984540054)
        assert row["standard_error"]["value"] == pytest.approx(se, abs=1e-10)
        assert row["weight"] == pytest.approx(weight)
        centre += weight * estimate
        variance += weight * weight * se * se
    assert result["stratified"]["estimate"]["value"] == pytest.approx(centre, abs=1e-10)
    assert result["stratified"]["standard_error"]["value"] == pytest.approx(math.sqrt(variance), abs=1e-10)
    one = ppi_mean(strata[0]["human"], strata[0]["judge_labelled"], strata[0]["judge_unlabelled"])
    assert result["strata"][0]["estimate"]["value"] == pytest.approx(one["ppi"]["estimate"]["value"], abs=1e-12)


def test_stratified_too_little_data_names_the_stratum():
    strata = [
        {"name": "sure", "human": [1.0] * 12, "judge_labelled": [1.0] * 12, "judge_unlabelled": [1.0]},
        {"name": "unsure", "human": [2.0], "judge_labelled": [2.0], "judge_unlabelled": [2.0, 3.0]},
    ]
    result = stratified_ppi_mean(strata)
    assert "'unsure'" in result["undefined"]
    assert result["stratified"]["estimate"]["value"] is None


def test_neyman_allocation():
    # n_k ∝ N_k σ_k: 100·1 : 100·3 : 200·1 = 1 : 3 : 2 of 60 ratings.
    assert optimal_allocation([100, 100, 200], [1.0, 3.0, 1.0], 60) == [10, 30, 20]
    assert optimal_allocation([5, 100], [10.0, 0.1], 20, minimum=2) == [5, 15]  # capped at the stratum's size
    assert optimal_allocation([50, 50], [0.0, 1.0], 20, minimum=2) == [2, 18]  # the minimum per stratum
    assert optimal_allocation([50, 50], [0.0, 1.0], 30) == [10, 20]  # the default minimum of 10
    assert sum(optimal_allocation([33, 71, 18], [0.7, 1.3, 2.9], 41)) == 41
    with pytest.raises(ValueError, match="budget"):
        optimal_allocation([3, 3], [1.0, 1.0], 7)


REPLICATIONS = 500
N_ITEMS = 2000
BUDGET = 200
TRUE_MEAN = 3.0


def test_simulated_active_ppi_covers_and_beats_uniform_sampling():
    """500 studies of 2000 items, Y ~ N(3, 1) and a judge f = Y + 0.3 + noise whose standard deviation u_i is 0.1 on
    four items in five and 2 on the others, and is known to the judge (its uncertainty). Humans get each item with
    π ∝ u mixed 10% with uniform, 200 ratings expected; the uniform design sends every item with π = 0.1.

    With 3,000 replications (seed 99) the active interval covers 93.7%: inverse-probability weights make the terms
    heavy-tailed, so the CLT interval runs a little under 95% at 200 ratings."""
    rng = np.random.default_rng(20261129)
    covered = 0
    active_widths, uniform_widths, uniform_covered = [], [], 0
    counterfactual_widths, saved = [], []
    for _ in range(REPLICATIONS):
        y = rng.normal(TRUE_MEAN, 1.0, N_ITEMS)
        u = np.where(rng.random(N_ITEMS) < 0.8, 0.1, 2.0)
        f = y + 0.3 + rng.normal(0.0, 1.0, N_ITEMS) * u
        pi = np.asarray(sampling_probabilities(u, BUDGET))
        sent = rng.random(N_ITEMS) < pi
        result = active_ppi_mean(np.where(sent, y, np.nan), f, pi)
        low, high = result["active"]["interval"]["low"], result["active"]["interval"]["high"]
        covered += low <= TRUE_MEAN <= high
        active_widths.append(high - low)
        counterfactual_widths.append(result["uniform"]["interval"]["high"] - result["uniform"]["interval"]["low"])
        saved.append(result["ratings_saved"]["value"])
        flat = np.full(N_ITEMS, BUDGET / N_ITEMS)
        sent_u = rng.random(N_ITEMS) < flat
        uniform = active_ppi_mean(np.where(sent_u, y, np.nan), f, flat)["active"]["interval"]
        uniform_covered += uniform["low"] <= TRUE_MEAN <= uniform["high"]
        uniform_widths.append(uniform["high"] - uniform["low"])
    coverage = covered / REPLICATIONS
    message = (
        f"active PPI++ coverage {coverage:.3f} (uniform {uniform_covered / REPLICATIONS:.3f}) over {REPLICATIONS} "
        f"replications; mean width {np.mean(active_widths):.4f} vs uniform {np.mean(uniform_widths):.4f}; the "
        f"uniform width estimated from the active ratings {np.mean(counterfactual_widths):.4f}; ratings saved "
        f"{np.mean(saved):.0f} on average"
    )
    print(message)
    assert 0.93 <= coverage <= 0.97, message
    assert np.mean(active_widths) < 0.9 * np.mean(uniform_widths), message
    # The progress page's "uniform sampling would give" is estimated from the active ratings alone; on average it is
    # the width uniform sampling actually gives.
    assert np.mean(counterfactual_widths) == pytest.approx(np.mean(uniform_widths), rel=0.05), message
    assert min(saved) > 0, message


def test_simulated_stratified_ppi_covers_and_beats_proportional_allocation():
    """500 studies of four confidence bins of 1000 items whose judge noise is 0.1, 0.2, 2 and 3; 200 ratings
    allocated by Neyman's rule on the rectifier deviations of a pilot of 40 rated items per bin, against 50 per bin."""
    rng = np.random.default_rng(7)
    noise = np.array([0.1, 0.2, 2.0, 3.0])
    sizes = [1000] * 4
    deviations = []
    for k in range(4):
        y = rng.normal(TRUE_MEAN, 1.0, 1000)
        f = y - 0.2 + rng.normal(0.0, noise[k], 1000)
        deviations.append(rectifier_deviation(y[:40], f[:40], f[40:]))
    neyman = optimal_allocation(sizes, deviations, BUDGET)
    proportional = [BUDGET // 4] * 4
    covered, widths, proportional_widths = 0, [], []
    for _ in range(REPLICATIONS):
        designs = {}
        for name, allocation in (("neyman", neyman), ("proportional", proportional)):
            strata = []
            for k, (size, n_k) in enumerate(zip(sizes, allocation, strict=True)):
                y = rng.normal(TRUE_MEAN, 1.0, size)
                f = y - 0.2 + rng.normal(0.0, noise[k], size)
                strata.append(
                    {"name": str(k), "human": y[:n_k], "judge_labelled": f[:n_k], "judge_unlabelled": f[n_k:]}
                )
            designs[name] = stratified_ppi_mean(strata)["stratified"]["interval"]
        covered += designs["neyman"]["low"] <= TRUE_MEAN <= designs["neyman"]["high"]
        widths.append(designs["neyman"]["high"] - designs["neyman"]["low"])
        proportional_widths.append(designs["proportional"]["high"] - designs["proportional"]["low"])
    coverage = covered / REPLICATIONS
    message = (
        f"StratPPI (pilot deviations {np.round(deviations, 3).tolist()}, allocation {neyman}) coverage "
        f"{coverage:.3f} over {REPLICATIONS} replications; mean width "
        f"{np.mean(widths):.4f} vs proportional {np.mean(proportional_widths):.4f}"
    )
    print(message)
    assert 0.93 <= coverage <= 0.97, message
    assert np.mean(widths) < 0.9 * np.mean(proportional_widths), message

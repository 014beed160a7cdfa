"""Two judges against the same humans, analytic correlation intervals and study planning, each against the printed
values of its reference implementation (R's cocor and cor.test, statpsych, Krippendorff's table)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from judging.statistics.correlation import coefficients
from judging.statistics.intervals import analytic_interval, analytic_intervals
from judging.statistics.judge_comparison import (
    ComparisonError,
    compare_judges,
    holm_adjust,
    paired_bootstrap_difference,
    steiger_z,
    williams_t,
    zou_interval,
)
from judging.statistics.planning import (
    PlanningError,
    expected_width,
    items_for_power,
    items_for_width,
    krippendorff_minimum_units,
)

# ---------------------------------------------------------------- cocor (R package cocor 1.1-4, tests/testthat/tests.r)


def test_williams_t_matches_cocor_williams1959() -> None:
    # cocor.dep.groups.overlap(.3, .4, .5, 100, test="williams1959"): statistic -1.0767, p.value 0.2843
    # (cocor's test cites DEPCOR, Silver, Hittner & May 2006).
    result = williams_t(0.3, 0.4, 0.5, 100)
    assert round(result["t"]["value"], 4) == -1.0767
    assert round(result["p_two_sided"]["value"], 4) == 0.2843
    assert result["df"] == 97
    # One-sided H1: r1 > r2; here r1 < r2, so the one-sided p is the upper tail, 1 - p/2.
    assert result["p_one_sided"]["value"] == pytest.approx(1 - 0.2843 / 2, abs=1e-4)


def test_steiger_z_matches_cocor_steiger1980() -> None:
    # cocor.dep.groups.overlap(r.jk=.4, r.jh=.5, r.kh=.1, n=103, test="steiger1980"): -0.8887185 (Steiger 1980, case A)
    assert round(steiger_z(0.4, 0.5, 0.1, 103)["z"]["value"], 7) == -0.8887185
    # cocor.dep.groups.overlap(.3, .4, .5, 100, test="steiger1980"): statistic -1.0718, p.value 0.2838 (DEPCOR)
    result = steiger_z(0.3, 0.4, 0.5, 100)
    assert round(result["z"]["value"], 4) == -1.0718
    assert round(result["p_two_sided"]["value"], 4) == 0.2838


def test_zou_interval_matches_cocor_zou2007() -> None:
    # cocor.dep.groups.overlap(.396, .179, .088, 66, test="zou2007"): conf.int c(-.093, .517) (Zou 2007, p. 409)
    result = zou_interval(0.396, 0.179, 0.088, 66)
    assert (round(result["low"], 3), round(result["high"], 3)) == (-0.093, 0.517)


def test_holm_adjust_is_step_down_and_monotone() -> None:
    # Holm (1979): sorted p (0.01, 0.02, 0.04) times (3, 2, 1) = (0.03, 0.04, 0.04), monotone.
    assert holm_adjust([0.04, 0.01, None, 0.02]) == pytest.approx([0.04, 0.03, None, 0.04])  # type: ignore[arg-type]
    assert holm_adjust([0.5, 0.9]) == [1.0, 1.0]


def _three_variables(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    human = rng.normal(size=n)
    judge1 = human + rng.normal(scale=0.8, size=n)
    judge2 = human + rng.normal(scale=1.5, size=n)
    return human, judge1, judge2


def test_compare_judges_pearson_uses_the_three_sample_correlations() -> None:
    human, judge1, judge2 = _three_variables(200, 1)
    result = compare_judges(human, judge1, judge2, coefficient="pearson")
    r1 = stats.pearsonr(human, judge1).statistic
    r2 = stats.pearsonr(human, judge2).statistic
    r12 = stats.pearsonr(judge1, judge2).statistic
    assert result["n"] == 200
    assert result["difference"]["value"] == pytest.approx(r1 - r2, abs=1e-12)
    assert result["r_between"]["value"] == pytest.approx(r12, abs=1e-12)
    assert result["williams"] == williams_t(r1, r2, r12, 200)
    assert result["difference_ci95"] == zou_interval(r1, r2, r12, 200)
    # Judge 1 has less noise: it tracks the humans better and the one-sided test says so.
    assert result["williams"]["p_one_sided"]["value"] < 0.01


def test_compare_judges_rank_coefficients_use_a_seeded_paired_bootstrap() -> None:
    human, judge1, judge2 = _three_variables(60, 2)
    result = compare_judges(human, judge1, judge2, coefficient="kendall", n_resamples=300, seed=5)
    assert result["difference_ci95"] == paired_bootstrap_difference(
        human, judge1, judge2, "kendall", n_resamples=300, seed=5
    )
    assert "300 resamples, seed 5" in result["difference_ci95_method"]
    assert result["williams"]["t"]["undefined"].startswith("Williams's t and Steiger's z are stated for Pearson")
    # The bootstrap resamples units with their three scores together: the same loop on materialised draws.
    rng = np.random.default_rng(5)
    draws = rng.integers(0, 60, size=(300, 60))
    by_hand = [
        stats.kendalltau(human[d], judge1[d]).statistic - stats.kendalltau(human[d], judge2[d]).statistic for d in draws
    ]
    assert result["difference_ci95"]["low"] == pytest.approx(np.quantile(by_hand, 0.025), abs=1e-12)
    assert result["difference_ci95"]["high"] == pytest.approx(np.quantile(by_hand, 0.975), abs=1e-12)


def test_compare_judges_spearman_bootstrap_equals_scipy_on_materialised_draws() -> None:
    human, judge1, judge2 = _three_variables(40, 3)
    result = paired_bootstrap_difference(human, judge1, judge2, "spearman", n_resamples=200, seed=9)
    draws = np.random.default_rng(9).integers(0, 40, size=(200, 40))
    by_hand = [
        stats.spearmanr(human[d], judge1[d]).statistic - stats.spearmanr(human[d], judge2[d]).statistic for d in draws
    ]
    assert result["low"] == pytest.approx(np.quantile(by_hand, 0.025), abs=1e-12)
    assert result["high"] == pytest.approx(np.quantile(by_hand, 0.975), abs=1e-12)


def test_compare_judges_refuses_too_few_units_and_constant_scores() -> None:
    with pytest.raises(ComparisonError, match="fewer than 4 answers"):
        compare_judges([1, 2, 3], [1, 2, 3], [3, 2, 1])
    with pytest.raises(ComparisonError, match="fewer than 4 answers"):
        compare_judges([1, 2, 3, np.nan], [1, 2, 3, 4], [3, 2, 1, 1])
    with pytest.raises(ComparisonError, match="judge 2's scores are constant"):
        compare_judges([1, 2, 3, 4, 5], [1, 2, 3, 5, 4], [3, 3, 3, 3, 3])
    with pytest.raises(ComparisonError, match="the human scores are constant"):
        compare_judges([2, 2, 2, 2], [1, 2, 3, 5], [3, 1, 3, 2])


def test_identical_judges_give_undefined_tests_not_nan() -> None:
    human, judge1, _ = _three_variables(30, 4)
    result = compare_judges(human, judge1, judge1.copy())
    assert result["difference"]["value"] == 0.0
    assert result["steiger"]["z"]["undefined"]
    assert result["williams"]["t"]["value"] == 0.0 or result["williams"]["t"]["undefined"]


# ---------------------------------------------------------------- analytic intervals


def test_pearson_interval_matches_r_cor_test_example() -> None:
    # R, ?cor.test example (Hollander & Wolfe 1973, p. 187f.): cor.test(x, y) prints
    # "95 percent confidence interval: -0.1497426  0.8955795", cor 0.5711816.
    x = np.array([44.4, 45.9, 41.9, 53.3, 44.7, 44.1, 50.7, 45.2, 60.1])
    y = np.array([2.6, 3.1, 2.5, 5.0, 3.6, 4.0, 5.2, 2.8, 3.8])
    values = coefficients(x, y)
    assert round(values["pearson"]["value"], 7) == 0.5711816
    result = analytic_intervals(values, 9)["pearson"]
    assert (round(result["low"], 7), round(result["high"], 7)) == (-0.1497426, 0.8955795)


def test_spearman_interval_matches_statpsych_ci_spear_example() -> None:
    # statpsych 2.0.0, man/ci.spear.Rd: Estimate 0.87, LL 0.5841, UL 0.9638.
    y = np.array([21, 4, 9, 12, 35, 18, 10, 22, 24, 1, 6, 8, 13, 16, 19], dtype=float)
    x = np.array([67, 28, 30, 28, 52, 40, 25, 37, 44, 10, 14, 20, 28, 40, 51], dtype=float)
    values = coefficients(y, x)
    assert round(values["spearman"]["value"], 2) == 0.87
    result = analytic_intervals(values, 15)["spearman"]
    assert (round(result["low"], 4), round(result["high"], 4)) == (0.5841, 0.9638)


def test_kendall_interval_matches_statpsych_ci_kendalltau_example() -> None:
    # statpsych 2.0.0, man/ci.kendalltau.Rd: ci.kendalltau(.05, .734, 40) gives LL 0.6178, UL 0.8188.
    result = analytic_interval("kendall", 0.734, 40)
    assert (round(result["low"], 4), round(result["high"], 4)) == (0.6178, 0.8188)


def test_kendall_interval_is_undefined_at_four_pairs_with_the_reason() -> None:
    assert analytic_interval("kendall", 0.5, 4) == {
        "low": None,
        "high": None,
        "undefined": "Bonett and Wright's Kendall interval needs more than 4 pairs",
    }
    assert analytic_interval("pearson", 0.5, 4)["low"] is not None
    assert analytic_interval("pearson", 1.0, 10)["undefined"]


# ---------------------------------------------------------------- planning (statpsych 2.0.0 man/*.Rd examples)


def test_items_for_width_match_statpsych_examples() -> None:
    assert items_for_width("pearson", 0.3, 0.2) == 320  # size.ci.cor(.05, .3, 0, .2) -> 320
    assert items_for_width("spearman", 0.362, 0.25) == 200  # size.ci.spear(.05, .362, .25) -> 200
    assert items_for_width("kendall", 0.3, 0.2) == 143  # size.ci.kendalltau(.05, .3, .2) -> 143
    assert items_for_width("icc", 0.7, 0.2, raters=3) == 68  # size.ci.icc(.05, .70, 3, .2) -> 68


def test_items_for_power_matches_statpsych_size_test_cor() -> None:
    assert items_for_power(-0.5, 0.95, 0.0, significance=0.05) == 47  # size.test.cor(.05, .95, -.50, 0, 0) -> 47
    # size.test.cor(.05, .90, .4, 2, 0) -> 64 with s = 2 control variables, which add 2 to n: 62 without them.
    assert items_for_power(0.4, 0.90, 0.0, significance=0.05) == 64 - 2


def test_krippendorff_minimum_units_matches_his_table() -> None:
    # Krippendorff's table of minimum values for two coders (as reproduced in the ATLAS.ti manual, "Sample Size
    # and Decision Rules"): p_c = 0.25, alpha_min 0.800 at significance 0.05 -> 139; alpha_min 0.667 -> 81.
    assert krippendorff_minimum_units(0.8, 0.25, significance=0.05) == 139
    assert krippendorff_minimum_units(0.667, 0.25, significance=0.05) == 81


def test_expected_width_inverts_items_for_width() -> None:
    for statistic, expected, raters in (("pearson", 0.6, None), ("spearman", 0.5, None), ("icc", 0.7, 3)):
        items = items_for_width(statistic, expected, 0.1, raters=raters)
        assert expected_width(statistic, expected, items, raters=raters) <= 0.1 + 1e-3
        assert expected_width(statistic, expected, items // 2, raters=raters) > 0.1


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: items_for_width("pearson", 1.0, 0.2), "expected correlation must lie strictly between -1 and 1"),
        (lambda: items_for_width("pearson", -1.2, 0.2), "expected correlation must lie strictly between -1 and 1"),
        (lambda: items_for_width("pearson", 0.3, 2.0), "width must lie strictly between 0 and 2"),
        (lambda: items_for_width("icc", 0.3, 0.2), "number of raters"),
        (lambda: items_for_width("icc", 1.0, 0.2, raters=3), "expected ICC must lie strictly between 0 and 1"),
        (lambda: items_for_power(0.3, 0.8, 0.3), "equals the null value"),
        (lambda: items_for_power(0.3, 0.8, 1.0), "null correlation must lie strictly between -1 and 1"),
        (lambda: krippendorff_minimum_units(0.8, 0.7), "rarest category's share"),
        (lambda: krippendorff_minimum_units(1.0, 0.2), "smallest acceptable alpha"),
    ],
)
def test_planning_refuses_values_out_of_range(call: object, message: str) -> None:
    with pytest.raises(PlanningError, match=message):
        call()  # type: ignore[operator]

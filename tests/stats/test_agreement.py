"""Agreement statistics against krippendorff, statsmodels, pingouin and hand computations."""

from __future__ import annotations

import itertools
import json
import math

import krippendorff
import numpy as np
import pandas as pd
import pingouin
import pytest
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from judging.statistics import agreement
from judging.statistics.agreement import (
    LEVELS,
    agreement_summary,
    alpha_bootstrap_ci,
    fleiss_kappa,
    gwet_ac1,
    intraclass_correlations,
    krippendorff_alpha,
    percent_agreement,
    rater_statistics,
    ratings_from_long,
    ratings_from_matrix,
)
from tests.stats.reference import AGREEMENT_SUMMARY_KEYS, ac1_by_hand

TOLERANCE = 1e-9

# pingouin 0.7 calls a pandas argument that pandas 3.1 deprecates.
pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword")


def random_matrix(rng: np.random.Generator, units: int, raters: int, missing: float, scale: int = 5) -> np.ndarray:
    matrix = rng.integers(1, scale + 1, size=(units, raters)).astype(float)
    matrix[rng.random((units, raters)) < missing] = np.nan
    return matrix


# Krippendorff (2011), "Computing Krippendorff's alpha-reliability": 4 coders, 12 units, gaps.
KRIPPENDORFF_2011 = np.array(
    [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, np.nan, np.nan, np.nan],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, np.nan, 3],
        [np.nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, np.nan],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, np.nan],
    ]
).T


def test_alpha_matches_published_example() -> None:
    ratings = ratings_from_matrix(KRIPPENDORFF_2011)
    assert krippendorff_alpha(ratings, "nominal")["value"] == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha(ratings, "interval")["value"] == pytest.approx(0.849, abs=5e-4)
    for level in LEVELS:
        expected = krippendorff.alpha(reliability_data=KRIPPENDORFF_2011.T, level_of_measurement=level)
        assert krippendorff_alpha(ratings, level)["value"] == pytest.approx(expected, abs=TOLERANCE)


@pytest.mark.parametrize("seed", range(12))
def test_alpha_matches_krippendorff_library_on_random_data(seed: int) -> None:
    rng = np.random.default_rng(seed)
    raters = [1, 2, 3, 5, 17, 120][seed % 6]
    units = int(rng.integers(3, 300))
    matrix = random_matrix(rng, units, raters, missing=[0.0, 0.2, 0.6][seed % 3], scale=int(rng.integers(2, 8)))
    ratings = ratings_from_matrix(matrix)
    for level in LEVELS:
        ours = krippendorff_alpha(ratings, level)
        if raters == 1:
            assert ours == {"value": None, "undefined": "no answer has two or more ratings"}
            continue
        expected = krippendorff.alpha(reliability_data=matrix.T, level_of_measurement=level)
        assert ours["value"] == pytest.approx(expected, abs=TOLERANCE), level


def test_alpha_with_continuous_values_and_varying_rater_counts() -> None:
    rng = np.random.default_rng(7)
    matrix = np.round(rng.normal(3, 1, size=(80, 9)), 2)
    matrix[rng.random(matrix.shape) < 0.5] = np.nan
    ratings = ratings_from_matrix(matrix)
    for level in LEVELS:
        expected = krippendorff.alpha(reliability_data=matrix.T, level_of_measurement=level)
        assert krippendorff_alpha(ratings, level)["value"] == pytest.approx(expected, abs=TOLERANCE)


def test_alpha_ignores_rater_identity() -> None:
    rng = np.random.default_rng(3)
    matrix = random_matrix(rng, 50, 4, missing=0.2)
    shuffled = np.array([rng.permutation(row) for row in matrix])
    for level in LEVELS:
        assert krippendorff_alpha(ratings_from_matrix(matrix), level)["value"] == pytest.approx(
            krippendorff_alpha(ratings_from_matrix(shuffled), level)["value"], abs=1e-12
        )


def test_alpha_undefined_cases() -> None:
    constant = ratings_from_matrix(np.full((10, 3), 4.0))
    assert krippendorff_alpha(constant, "ordinal") == {"value": None, "undefined": "every rating has the same value"}
    single = ratings_from_matrix(np.array([[1.0], [2.0], [3.0]]))
    assert krippendorff_alpha(single, "nominal")["undefined"] == "no answer has two or more ratings"
    empty = ratings_from_long([], [], [])
    assert krippendorff_alpha(empty, "interval")["value"] is None
    assert alpha_bootstrap_ci(constant, "nominal") == {
        "low": None,
        "high": None,
        "undefined": "every rating has the same value",
    }


@pytest.mark.parametrize("level", LEVELS)
def test_bootstrap_resamples_equal_library_alpha_on_materialised_resamples(level: str) -> None:
    rng = np.random.default_rng(11)
    matrix = random_matrix(rng, 200, 3, missing=0.25)
    ratings = ratings_from_matrix(matrix)
    counts = agreement._unit_counts(ratings, min_ratings=2)
    patterns = agreement._compress(counts)
    assert patterns.multiplicity.size < counts.per_unit.size
    pairable_rows = np.flatnonzero(np.sum(~np.isnan(matrix), axis=1) >= 2)
    representative = pairable_rows[
        [int(np.flatnonzero(patterns.of_unit == p)[0]) for p in range(patterns.multiplicity.size)]
    ]
    weights = agreement._bootstrap_weights(np.random.default_rng(5), 20, patterns)
    assert np.all(weights.sum(axis=1) == pairable_rows.size)
    batch = agreement._alpha_batch(patterns.counts, weights, level)  # type: ignore[arg-type]
    for row in range(weights.shape[0]):
        resample = np.repeat(matrix[representative], weights[row].astype(int), axis=0)
        expected = krippendorff.alpha(reliability_data=resample.T, level_of_measurement=level)
        assert batch[row] == pytest.approx(expected, abs=TOLERANCE)


def test_bootstrap_ci_is_seeded_and_brackets_estimate() -> None:
    rng = np.random.default_rng(2)
    truth = rng.integers(1, 6, size=300)
    matrix = np.clip(truth[:, None] + rng.integers(-1, 2, size=(300, 3)), 1, 5).astype(float)
    ratings = ratings_from_matrix(matrix)
    first = alpha_bootstrap_ci(ratings, "ordinal", n_resamples=300, seed=4)
    second = alpha_bootstrap_ci(ratings, "ordinal", n_resamples=300, seed=4)
    other_seed = alpha_bootstrap_ci(ratings, "ordinal", n_resamples=300, seed=5)
    assert first == second
    assert first != other_seed
    estimate = krippendorff_alpha(ratings, "ordinal")["value"]
    assert first["low"] is not None and first["high"] is not None and estimate is not None
    assert first["low"] < estimate < first["high"]


@pytest.mark.parametrize("raters", [2, 3, 6, 101])
def test_fleiss_matches_statsmodels(raters: int) -> None:
    rng = np.random.default_rng(raters)
    matrix = random_matrix(rng, 60, raters, missing=0.0, scale=4)
    table, _ = aggregate_raters(matrix.astype(int))
    expected = sm_fleiss_kappa(table, method="fleiss")
    assert fleiss_kappa(ratings_from_matrix(matrix))["value"] == pytest.approx(expected, abs=TOLERANCE)


def test_fleiss_undefined_cases() -> None:
    matrix = np.array([[1, 2, 2], [1, 1, np.nan], [3, 3, 3]], dtype=float)
    assert fleiss_kappa(ratings_from_matrix(matrix)) == {
        "value": None,
        "undefined": "unequal numbers of ratings per answer (2 to 3)",
    }
    assert fleiss_kappa(ratings_from_matrix(np.ones((5, 3))))["undefined"] == "every rating has the same value"
    assert fleiss_kappa(ratings_from_matrix(np.array([[1.0], [2.0]])))["undefined"] == "one rating per answer"


def test_ac1_small_hand_case() -> None:
    # pa = 3/4; pi = (0.625, 0.375); pe = 2 * 0.625 * 0.375 = 0.46875; AC1 = 0.28125 / 0.53125 = 9/17.
    matrix = np.array([[1, 1], [1, 1], [1, 2], [2, 2]], dtype=float)
    assert gwet_ac1(ratings_from_matrix(matrix))["value"] == pytest.approx(9 / 17, abs=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_ac1_matches_hand_formula_with_missing(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    matrix = random_matrix(rng, 70, [2, 3, 8, 104][seed % 4], missing=0.3, scale=[2, 3, 5][seed % 3])
    assert gwet_ac1(ratings_from_matrix(matrix))["value"] == pytest.approx(ac1_by_hand(matrix), abs=TOLERANCE)


def test_ac1_kappa_paradox() -> None:
    # High agreement on a skewed binary scale: kappa collapses, AC1 stays high.
    matrix = np.array([[1, 1]] * 18 + [[1, 2], [2, 1]], dtype=float)
    ratings = ratings_from_matrix(matrix)
    kappa = fleiss_kappa(ratings)["value"]
    ac1 = gwet_ac1(ratings)["value"]
    assert kappa is not None and ac1 is not None
    assert kappa < 0 < 0.85 < ac1


def test_ac1_is_one_for_a_single_category_as_in_irrcac() -> None:
    # irrCAC's gwet() sets pe = 1 - 1e-15 when q < 2, so (pa - pe) / (1 - pe) = 1 with pa = 1.
    assert gwet_ac1(ratings_from_matrix(np.full((4, 3), 2.0))) == {"value": 1.0, "undefined": None}
    single_rating_each = np.array([[2.0, np.nan, np.nan]] * 4)
    assert gwet_ac1(ratings_from_matrix(single_rating_each))["undefined"] == "no answer has two or more ratings"


def pingouin_iccs(matrix: np.ndarray) -> dict[str, float]:
    units, raters = matrix.shape
    frame = pd.DataFrame(
        {
            "target": np.repeat(np.arange(units), raters),
            "rater": np.tile(np.arange(raters), units),
            "score": matrix.ravel(),
        }
    )
    table = pingouin.intraclass_corr(data=frame, targets="target", raters="rater", ratings="score")
    # pingouin 0.7 names them McGraw & Wong style; older releases used ICC1..ICC3k directly.
    names = {"ICC(1,1)": "ICC1", "ICC(A,1)": "ICC2", "ICC(C,1)": "ICC3", "ICC(1,k)": "ICC1k", "ICC(A,k)": "ICC2k"}
    names["ICC(C,k)"] = "ICC3k"
    return {names.get(kind, kind): value for kind, value in zip(table["Type"], table["ICC"], strict=True)}


@pytest.mark.parametrize("raters", [2, 3, 7, 100])
def test_icc_matches_pingouin_on_complete_data(raters: int) -> None:
    rng = np.random.default_rng(raters + 50)
    truth = rng.normal(0, 1, size=(40, 1))
    matrix = np.round(truth + rng.normal(0, 0.7, size=(40, raters)) + rng.normal(0, 0.3, size=(1, raters)), 3)
    expected = pingouin_iccs(matrix)
    ours = intraclass_correlations(ratings_from_matrix(matrix))
    assert set(ours) == {"ICC1", "ICC1k", "ICC2", "ICC2k", "ICC3", "ICC3k"}
    for name, value in expected.items():
        assert ours[name]["value"] == pytest.approx(value, abs=TOLERANCE), name


def test_icc_two_way_only_for_consistent_raters_and_complete_cases() -> None:
    rng = np.random.default_rng(9)
    matrix = random_matrix(rng, 30, 3, missing=0.0)
    positional = ratings_from_matrix(matrix, raters_consistent=False)
    assert set(intraclass_correlations(positional)) == {"ICC1", "ICC1k"}
    with_gaps = matrix.copy()
    with_gaps[:5, 0] = np.nan
    complete_rows = matrix[5:]
    expected = pingouin_iccs(complete_rows)
    ours = intraclass_correlations(ratings_from_matrix(with_gaps))
    assert ours["ICC3k"]["value"] == pytest.approx(expected["ICC3k"], abs=TOLERANCE)
    crossed_nowhere = np.array([[1, np.nan], [np.nan, 2], [3, np.nan]], dtype=float)
    assert intraclass_correlations(ratings_from_matrix(crossed_nowhere))["ICC2"]["undefined"] == (
        "fewer than two answers were rated by all 2 raters"
    )


def test_unbalanced_one_way_icc_follows_anova_with_k0() -> None:
    rows = [[1, 2, 2], [4, 5], [3, 3, 4, 2], [5, 5], [1, 1, 2]]
    units = [i for i, row in enumerate(rows) for _ in row]
    values = [v for row in rows for v in row]
    ratings = ratings_from_long(units, list(range(len(values))), values, raters_consistent=False)
    grand = np.mean(values)
    n, total = len(rows), len(values)
    ss_between = sum(len(row) * (np.mean(row) - grand) ** 2 for row in rows)
    ss_within = sum((v - np.mean(row)) ** 2 for row in rows for v in row)
    msb, msw = ss_between / (n - 1), ss_within / (total - n)
    k0 = (total - sum(len(row) ** 2 for row in rows) / total) / (n - 1)
    ours = intraclass_correlations(ratings)
    assert ours["ICC1"]["value"] == pytest.approx((msb - msw) / (msb + (k0 - 1) * msw), abs=1e-12)
    assert ours["ICC1k"]["value"] == pytest.approx((msb - msw) / msb, abs=1e-12)


def test_percent_agreement_pairwise_by_hand() -> None:
    rng = np.random.default_rng(21)
    matrix = random_matrix(rng, 50, 5, missing=0.3)
    exact, within = [], []
    for row in matrix:
        values = [v for v in row if not math.isnan(v)]
        if len(values) < 2:
            continue
        pairs = list(itertools.permutations(values, 2))
        exact.append(sum(a == b for a, b in pairs) / len(pairs))
        within.append(sum(abs(a - b) <= 1 for a, b in pairs) / len(pairs))
    ours = percent_agreement(ratings_from_matrix(matrix))
    assert ours["exact"]["value"] == pytest.approx(np.mean(exact), abs=1e-12)
    assert ours["within_1"]["value"] == pytest.approx(np.mean(within), abs=1e-12)


def test_rater_statistics_by_hand_and_outlier_rule() -> None:
    rng = np.random.default_rng(5)
    truth = rng.integers(1, 6, size=60).astype(float)
    matrix = np.column_stack([truth, np.clip(truth + rng.integers(-1, 2, 60), 1, 5), rng.integers(1, 6, 60)])
    matrix[::7, 1] = np.nan
    rows = {row["rater"]: row for row in rater_statistics(ratings_from_matrix(matrix, rater_labels=["a", "b", "c"]))}
    for column, label in enumerate("abc"):
        own, others = [], []
        for unit in matrix:
            if math.isnan(unit[column]):
                continue
            rest = [v for i, v in enumerate(unit) if i != column and not math.isnan(v)]
            if rest:
                own.append(unit[column])
                others.append(np.mean(rest))
        assert rows[label]["count"] == int(np.sum(~np.isnan(matrix[:, column])))
        assert rows[label]["mean"] == pytest.approx(np.nanmean(matrix[:, column]), abs=1e-12)
        assert rows[label]["correlation_with_others"]["value"] == pytest.approx(
            float(np.corrcoef(own, others)[0, 1]), abs=TOLERANCE
        )
    assert rows["c"]["outlier"] is True
    assert "low_correlation" in rows["c"]["flags"]
    assert rows["a"]["outlier"] is False


def test_summary_shape_is_json_and_has_no_nan() -> None:
    rng = np.random.default_rng(8)
    matrix = random_matrix(rng, 100, 3, missing=0.1)
    summary = agreement_summary(ratings_from_matrix(matrix), "ordinal", n_resamples=200)
    text = json.dumps(summary, allow_nan=False)
    assert set(summary) == AGREEMENT_SUMMARY_KEYS
    assert set(summary["alpha"]) == set(LEVELS)
    assert summary["n_ratings"] == int(np.sum(~np.isnan(matrix)))
    assert summary["fleiss_kappa"]["undefined"].startswith("unequal numbers of ratings")
    assert "NaN" not in text


def test_ratings_from_long_drops_missing_and_keeps_unit_count() -> None:
    ratings = ratings_from_long(["u1", "u1", "u2", "u3"], ["x", "y", "x", "x"], [1, None, float("nan"), 4])
    assert ratings.n_ratings == 2
    assert ratings.n_units == 3
    assert ratings.rater_labels == ("x",)


@pytest.mark.parametrize("level", LEVELS)
def test_bootstrap_ci_drawn_chunk_by_chunk_equals_one_draw_of_every_resample(
    level: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(4)
    ratings = ratings_from_matrix(random_matrix(rng, 300, 4, missing=0.3))
    patterns = agreement._compress(agreement._unit_counts(ratings, min_ratings=2))
    weights = agreement._bootstrap_weights(np.random.default_rng(9), 1000, patterns)
    # Chunks of 7 resamples (the last one shorter): 143 draws from the same generator.
    alphas = np.concatenate(
        [
            agreement._alpha_batch(patterns.counts, weights[start : start + 7], level)  # type: ignore[arg-type]
            for start in range(0, 1000, 7)
        ]
    )
    low, high = np.quantile(alphas[np.isfinite(alphas)], [0.025, 0.975])
    monkeypatch.setattr(agreement, "_BOOTSTRAP_CELLS_PER_CHUNK", 7 * patterns.multiplicity.size)
    chunked = agreement.alpha_bootstrap_ci(ratings, level, n_resamples=1000, seed=9)  # type: ignore[arg-type]
    # Equal up to the last bit: BLAS may sum a product in another order when a chunk sits at another address.
    assert (chunked["low"], chunked["high"]) == (pytest.approx(low, rel=1e-13), pytest.approx(high, rel=1e-13))
    assert low < high

"""The per-unit value counts behind alpha, Fleiss' kappa and Gwet's AC1 are a dense array for ordinary data and a
scipy sparse matrix for many distinct continuous values; both forms give the same statistics on the same ratings,
and the published example's values hold on the sparse form too."""

from __future__ import annotations

import numpy as np
import pytest

from judging.statistics import agreement
from judging.statistics.agreement import agreement_summary, krippendorff_alpha, ratings_from_matrix
from tests.stats.test_agreement import KRIPPENDORFF_2011, random_matrix


def summaries(matrix: np.ndarray, monkeypatch: pytest.MonkeyPatch, level: str) -> tuple[dict, dict]:
    ratings = ratings_from_matrix(matrix)
    dense = agreement_summary(ratings, level, n_resamples=200, seed=3)
    with monkeypatch.context() as patch:
        patch.setattr(agreement, "_DENSE_COUNT_CELLS", 0)
        assert not isinstance(agreement._unit_counts(ratings, min_ratings=1).counts, np.ndarray)
        sparse = agreement_summary(ratings, level, n_resamples=200, seed=3)
    assert isinstance(agreement._unit_counts(ratings, min_ratings=1).counts, np.ndarray)
    return dense, sparse


def assert_same(dense: object, sparse: object) -> None:
    if isinstance(dense, dict):
        assert isinstance(sparse, dict) and dense.keys() == sparse.keys()
        for key in dense:
            assert_same(dense[key], sparse[key])
    elif isinstance(dense, list):
        assert isinstance(sparse, list) and len(dense) == len(sparse)
        for left, right in zip(dense, sparse, strict=True):
            assert_same(left, right)
    elif isinstance(dense, float):
        assert sparse == pytest.approx(dense, rel=1e-12, abs=1e-12)
    else:
        assert dense == sparse


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_dense_and_sparse_counts_give_the_same_summary(level: str, monkeypatch: pytest.MonkeyPatch) -> None:
    matrix = random_matrix(np.random.default_rng(7), 150, 4, missing=0.3)
    dense, sparse = summaries(matrix, monkeypatch, level)
    assert dense["alpha"][level]["value"] is not None and dense["gwet_ac1"]["value"] is not None
    assert_same(dense, sparse)


def test_equal_rater_counts_give_fleiss_kappa_on_both_forms(monkeypatch: pytest.MonkeyPatch) -> None:
    matrix = random_matrix(np.random.default_rng(8), 120, 3, missing=0.0)
    dense, sparse = summaries(matrix, monkeypatch, "ordinal")
    assert dense["fleiss_kappa"]["value"] is not None
    assert_same(dense, sparse)


def test_continuous_values_on_both_forms(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(9)
    truth = rng.normal(size=200)
    matrix = truth[:, None] + rng.normal(scale=0.5, size=(200, 3))
    dense, sparse = summaries(matrix, monkeypatch, "interval")
    assert dense["alpha"]["interval"]["value"] is not None
    assert_same(dense, sparse)


def test_published_example_on_the_sparse_form(monkeypatch: pytest.MonkeyPatch) -> None:
    # Krippendorff (2011), "Computing Krippendorff's alpha-reliability": nominal 0.743, interval 0.849.
    monkeypatch.setattr(agreement, "_DENSE_COUNT_CELLS", 0)
    ratings = ratings_from_matrix(KRIPPENDORFF_2011)
    assert krippendorff_alpha(ratings, "nominal")["value"] == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha(ratings, "interval")["value"] == pytest.approx(0.849, abs=5e-4)

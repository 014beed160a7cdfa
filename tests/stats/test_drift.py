"""The drift check's paired test against published values."""

import math
from typing import Any

import pytest

from judging.statistics.drift import drift_decision, signed_rank_p

# Hollander & Wolfe (1973, p. 29), the example of R's ?wilcox.test: Hamilton depression scale before (x) and after
# (y) a tranquilizer, nine patients. R 4.x: wilcox.test(x, y, paired = TRUE) gives V = 40, p-value = 0.03906 (exact,
# two-sided); with alternative = "greater", p = 0.01953.
BEFORE = [1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30]
AFTER = [0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.06, 3.14, 1.29]


def test_signed_rank_matches_r_on_the_depression_example() -> None:
    # The test takes current − certified: after − before gives the smaller rank sum, 45 − 40 = 5.
    row = signed_rank_p(BEFORE, AFTER)
    assert row["n"] == 9 and row["n_nonzero"] == 9
    assert row["statistic"] == pytest.approx(5.0)
    assert row["p_value"] == pytest.approx(0.0390625, abs=1e-7)  # exact: 2 × 10 / 2^9


def test_no_difference_at_all_is_p_one_and_no_pair_is_undefined() -> None:
    row = signed_rank_p([3, 4, 5], [3, 4, 5])
    assert row["p_value"] == 1.0 and row["n_nonzero"] == 0 and row["mean_difference"] == 0.0
    empty = signed_rank_p([math.nan], [4.0])
    assert empty["p_value"] is None and "no answer" in empty["undefined"]
    with pytest.raises(ValueError, match="pair up"):
        signed_rank_p([1, 2], [1])


def test_every_answer_one_point_lower_uses_the_tie_corrected_normal_approximation() -> None:
    # Twenty differences of −1, all tied (mid-rank 10.5 each): the normal approximation with tie correction, no
    # continuity correction (Hollander & Wolfe's eq. 3.13). T+ = 0, mean n(n+1)/4 = 105, variance
    # n(n+1)(2n+1)/24 − Σ(t³ − t)/48 = 717.5 − 7980/48 = 551.25, z = −105 / 23.479 = −4.4721, two-sided
    # p = 2Φ(−4.4721) = 7.744e-6; R's wilcox.test(rep(-1, 20), exact = FALSE, correct = FALSE) gives the same.
    row = signed_rank_p([4.0] * 20, [3.0] * 20)
    z = 105 / math.sqrt(551.25)
    assert row["p_value"] == pytest.approx(math.erfc(z / math.sqrt(2)), rel=1e-6)


def test_bonferroni_over_the_aspects_tested() -> None:
    rows: dict[str, dict[str, Any]] = {
        "a": {"p_value": 0.02},
        "b": {"p_value": 0.3},
        "c": {"p_value": None},
    }
    decision = drift_decision(rows, alpha=0.05)
    assert decision["aspects_tested"] == 2 and decision["threshold"] == pytest.approx(0.025)
    assert decision["moved"] == ["a"] and decision["drifted"]
    assert not drift_decision({"a": {"p_value": 0.03}, "b": {"p_value": 0.9}}, alpha=0.05)["drifted"]
    assert drift_decision({"a": {"p_value": None}})["drifted"] is False
    with pytest.raises(ValueError, match="alpha"):
        drift_decision(rows, alpha=1.0)

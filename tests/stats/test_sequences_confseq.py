"""The confidence sequences against confseq 0.0.11 (Waudby-Smith, Howard and Ramdas's own package) on the same data:
the betting CS against ``confseq.betting.betting_cs``, the polynomial stitching and normal-mixture boundaries of
Howard et al. (2021) against ``confseq.boundaries``."""

import numpy as np
import pytest

from judging.statistics.sequences import betting_limits, normal_mixture_boundary, stitching_boundary

# confseq 0.0.11 still uses np.float_, which NumPy 2 removed; the alias is restored before importing it so that the
# reference loads (it is the same type, float64).
np.float_ = np.float64  # type: ignore[attr-defined]
from confseq.betting import betting_cs  # noqa: E402
from confseq.boundaries import normal_mixture_bound, poly_stitching_bound  # noqa: E402

CONFSEQ_BREAKS = 1000


@pytest.mark.parametrize("seed", [7, 37])
def test_betting_limits_match_confseq_betting_cs_to_its_grid(seed: int) -> None:
    """Same bets (predictable plug-in, truncated at 1/(2m)), same hedging (max of the two halves), both running
    intersections; the two differ only by their grids of candidate means (confseq 1,000 points, ours 2,000), so
    each limit agrees to within one confseq grid step."""
    rng = np.random.default_rng(seed)
    x = rng.beta(2, 3, size=300)
    low, high = betting_limits(x, confidence=0.95)
    ref_low, ref_high = betting_cs(x, alpha=0.05, breaks=CONFSEQ_BREAKS, running_intersection=True)
    ours_low, ours_high = np.maximum.accumulate(low), np.minimum.accumulate(high)
    tolerance = 1.0 / CONFSEQ_BREAKS
    assert np.max(np.abs(ours_low - ref_low)) <= tolerance
    assert np.max(np.abs(ours_high - ref_high)) <= tolerance
    # The intervals really narrow over the stream, so the comparison is not between two constant [0, 1] bands.
    assert ours_high[-1] - ours_low[-1] < 0.2 < ours_high[9] - ours_low[9]


def test_stitching_boundary_matches_confseq_poly_stitching_bound() -> None:
    """Theorem 1 with s = 1.4, η = 2, m = 1 and scale c = 1, at α = 0.025 (one side of a two-sided 95% sequence)."""
    v = np.array([0.5, 1.0, 5.0, 10.0, 100.0, 1000.0, 1e5])
    expected = poly_stitching_bound(v, 0.025, 1.0, 1.0, 1.4, 2.0)
    assert stitching_boundary(v, 0.025) == pytest.approx(expected, rel=1e-12)


def test_normal_mixture_boundary_matches_confseq_two_sided_normal_mixture_bound() -> None:
    """The two-sided normal mixture tuned to be tightest at v* = 25 (100 bounded ratings, variance process t/4)."""
    v = np.array([1.0, 5.0, 10.0, 25.0, 100.0, 1000.0, 1e5])
    expected = normal_mixture_bound(v, 0.05, 25.0, 0.05, False)
    assert normal_mixture_boundary(v, 0.05, v_opt=25.0) == pytest.approx(expected, rel=1e-12)

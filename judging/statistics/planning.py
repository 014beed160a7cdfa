"""How many items a study needs, before it runs (Bonett's methods, as in R's ``statpsych``).

Widths are full widths (upper limit - lower limit) of a two-sided interval, as statpsych's ``w``; "+-0.05" is a
width of 0.10.

- Pearson (``size.ci.cor``, s = 0): Fisher's z, first n0 = ceil(4 (1 - r^2)^2 (z / w)^2 + 3), then one refinement
  with the width the back-transformed interval has at n0.
- Spearman (``size.ci.spear``): Bonett & Wright (2000), variance of atanh(r) (1 + r^2 / 2) / (n - 3), same steps.
- Kendall (``size.ci.kendalltau``): Bonett & Wright (2000), variance 0.437 / (n - 4). Their formula is stated for
  tau-a; for tau-b, which evalsite reports, it is an approximation.
- ICC for k raters (``size.ci.icc``): Bonett (2002), n0 = ceil(8 z^2 (1 - rho)^2 (1 + (k - 1) rho)^2 /
  (k (k - 1) w^2)) + 1, then one refinement with the exact F-based interval at n0.
- The reported n is the smallest n whose interval is at most w wide, found by bisection from the value above: the
  one refinement agrees with it on statpsych's examples and within one item almost everywhere, but far from its
  first guess (very high |r|, small n) it can ask more items for a wider interval, which a plan must never do.
- Power (``size.test.cor``, s = 0): n = ceil((z_(1-a/2) + z_power)^2 / (atanh(r) - atanh(r0))^2 + 3) for a
  two-sided test of H0: rho = r0.
- Krippendorff (2004): the minimum number of values two coders must code so that alpha can exceed alpha_min at a
  significance level, given the share p of the rarest category (Bloch & Kraemer 1989, eq. 3.7, as Krippendorff's
  table uses it): N = ceil(2 z^2 ((1 + a)(3 - a) / (4 (1 - a) p (1 - p)) - a)), z the one-sided normal quantile.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from statistics import NormalDist

from judging.statistics.intervals import KENDALL_VARIANCE, normal_quantile

WIDTH_STATISTICS = ("pearson", "spearman", "kendall", "icc")
# The narrowest interval planned: +-0.0005 already takes about 15 million items at r = 0, and narrower widths
# drive the formulas into floating-point underflow and overflow.
MIN_WIDTH = 0.001
# More items than this is no study plan, and beyond it the formulas lose the precision to count them.
MAX_ITEMS = 1_000_000_000


class PlanningError(ValueError):
    """A planning value is out of its range; the message names it."""


def _check_open(name: str, value: float, low: float, high: float) -> None:
    if not (math.isfinite(value) and low < value < high):
        raise PlanningError(f"{name} must lie strictly between {low:g} and {high:g}, not {value:g}")


def _check_width_inputs(statistic: str, expected: float, width: float, raters: int | None, confidence: float) -> None:
    if statistic not in WIDTH_STATISTICS:
        raise PlanningError(f"statistic must be one of {', '.join(WIDTH_STATISTICS)}, not {statistic!r}")
    if statistic == "icc":
        _check_open("the expected ICC", expected, 0.0, 1.0)
        if raters is None or raters < 2:
            raise PlanningError("an ICC needs the number of raters per item, at least 2")
    else:
        _check_open("the expected correlation", expected, -1.0, 1.0)
    if not (math.isfinite(width) and 0.0 < width < 2.0):
        raise PlanningError(f"the interval width must lie strictly between 0 and 2, not {width:g}")
    if width < MIN_WIDTH:
        raise PlanningError(f"the interval width must be at least {MIN_WIDTH:g}, not {width:g}")
    _check_open("the confidence level", confidence, 0.0, 1.0)


def _counted_items(value: float) -> int:
    """A computed number of items as an int, refused when it is beyond any study (or not a number at all)."""
    if not (math.isfinite(value) and value <= MAX_ITEMS):
        raise PlanningError(
            f"the plan needs more than {MAX_ITEMS:,} items; ask for a wider interval or a larger effect"
        )
    return max(math.ceil(value), 1)


def _smallest_items(first_guess: int, fewest: int, wide_enough: Callable[[int], bool]) -> int:
    """The smallest n >= fewest with wide_enough(n) (the interval at n is narrow enough), by bisection from a guess;
    the width falls as n grows, so this is monotone in the target width."""
    low, high = fewest - 1, max(first_guess, fewest)  # wide_enough(low) is taken as false, checked for high
    while not wide_enough(high):
        low, high = high, high * 2
        if high > MAX_ITEMS:
            _counted_items(float(high))
    while high - low > 1:
        middle = (low + high) // 2
        if wide_enough(middle):
            high = middle
        else:
            low = middle
    return high


def _z_variance_factor(statistic: str, r: float) -> tuple[float, int]:
    """(numerator of the variance of atanh(r), the number subtracted from n) for each correlation."""
    if statistic == "pearson":
        return 1.0, 3
    if statistic == "spearman":
        return 1.0 + r * r / 2.0, 3
    return KENDALL_VARIANCE, 4


def _correlation_width(statistic: str, r: float, n: int, z: float) -> float:
    factor, offset = _z_variance_factor(statistic, r)
    half = z * math.sqrt(factor / (n - offset))
    return math.tanh(math.atanh(r) + half) - math.tanh(math.atanh(r) - half)


def _icc_width(icc: float, raters: int, n: int, confidence: float) -> float:
    """Width of Bonett's (2002) F-based interval for an ICC of k raters from n items."""
    from scipy import stats  # noqa: PLC0415 -- heavy import, only when planning runs

    tail = (1.0 - confidence) / 2.0
    cronbach = raters * icc / (1.0 + (raters - 1.0) * icc)
    f = 1.0 / (1.0 - cronbach)
    df1 = n - 1.0
    df2 = (n - 1.0) * (raters - 1.0)
    f_low = f / float(stats.f.ppf(1.0 - tail, df1, df2))
    f_high = f * float(stats.f.ppf(1.0 - tail, df2, df1))
    return (f_high - 1.0) / (f_high + raters - 1.0) - (f_low - 1.0) / (f_low + raters - 1.0)


def items_for_width(
    statistic: str, expected: float, width: float, *, raters: int | None = None, confidence: float = 0.95
) -> int:
    """Items needed so that the interval of ``statistic`` around ``expected`` is ``width`` wide."""
    _check_width_inputs(statistic, expected, width, raters, confidence)
    z = normal_quantile(confidence)
    if statistic == "icc":
        k = int(raters)  # type: ignore[arg-type]
        n0 = (
            _counted_items(8.0 * z * z * (1 - expected) ** 2 * (1 + (k - 1) * expected) ** 2 / (k * (k - 1) * width**2))
            + 1
        )
        n0 = max(n0, 2)
        w0 = _icc_width(expected, k, n0, confidence)
        guess = _counted_items((n0 - 1) * (w0 / width) ** 2 + 1)
        return _smallest_items(guess, 2, lambda n: _icc_width(expected, k, n, confidence) <= width)
    factor, offset = _z_variance_factor(statistic, expected)
    n0 = _counted_items(4.0 * factor * (1.0 - expected**2) ** 2 * (z / width) ** 2 + offset)
    n0 = max(n0, offset + 1)
    w0 = _correlation_width(statistic, expected, n0, z)
    guess = _counted_items((n0 - offset) * (w0 / width) ** 2 + offset)
    return _smallest_items(guess, offset + 1, lambda n: _correlation_width(statistic, expected, n, z) <= width)


def expected_width(
    statistic: str, expected: float, items: int, *, raters: int | None = None, confidence: float = 0.95
) -> float:
    """The width the interval of ``statistic`` has around ``expected`` with ``items`` items (what a size buys)."""
    _check_width_inputs(statistic, expected, 1.0, raters, confidence)
    if statistic == "icc":
        if items < 2:
            raise PlanningError("an ICC interval needs at least 2 items")
        return _icc_width(expected, int(raters), items, confidence)  # type: ignore[arg-type]
    _, offset = _z_variance_factor(statistic, expected)
    if items <= offset:
        raise PlanningError(f"a {statistic} interval needs more than {offset} items")
    return _correlation_width(statistic, expected, items, normal_quantile(confidence))


def items_for_power(expected: float, power: float, null: float, *, significance: float = 0.05) -> int:
    """Items for a two-sided test of H0: rho = ``null`` to reach ``power`` when rho = ``expected`` (Fisher's z)."""
    _check_open("the expected correlation", expected, -1.0, 1.0)
    _check_open("the null correlation", null, -1.0, 1.0)
    _check_open("the power", power, 0.0, 1.0)
    _check_open("the significance level", significance, 0.0, 1.0)
    effect = math.atanh(expected) - math.atanh(null)
    if effect == 0.0:
        raise PlanningError("the expected correlation equals the null value, so no sample size gives power")
    z = NormalDist().inv_cdf(1.0 - significance / 2.0) + NormalDist().inv_cdf(power)
    return _counted_items((z / effect) * (z / effect) + 3)


def krippendorff_minimum_units(
    alpha_min: float, smallest_category: float, *, significance: float = 0.05, coders: int = 2
) -> int:
    """Krippendorff's (2004) minimum number of values to code for alpha to exceed ``alpha_min`` at
    ``significance`` (one-sided) when the rarest category has probability ``smallest_category``."""
    _check_open("the smallest acceptable alpha", alpha_min, 0.0, 1.0)
    if not (math.isfinite(smallest_category) and 0.0 < smallest_category <= 0.5):
        raise PlanningError(f"the rarest category's share must lie above 0 and at most 0.5, not {smallest_category:g}")
    _check_open("the significance level", significance, 0.0, 1.0)
    if coders < 2:
        raise PlanningError("Krippendorff's alpha needs at least 2 coders")
    z = NormalDist().inv_cdf(1.0 - significance)
    a, p = alpha_min, smallest_category
    spread = 4 * (1 - a) * p * (1 - p)
    if spread == 0.0:  # the rarest share is below what a float can multiply
        _counted_items(math.inf)
    return _counted_items(coders * z * z * ((1 + a) * (3 - a) / spread - a))

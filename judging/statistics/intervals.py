"""Analytic 95% intervals for one correlation, beside the bootstrap ones.

- Pearson: Fisher's z, atanh(r) +- z_(1-a/2) / sqrt(n - 3), without the bias adjustment r / (2(n - 1)) that some
  texts subtract; these are the limits R's ``cor.test`` prints.
- Spearman: Bonett & Wright (2000), atanh(r) +- z_(1-a/2) sqrt((1 + r^2 / 2) / (n - 3)) (statpsych ``ci.spear``).
- Kendall: Bonett & Wright (2000), atanh(tau) +- z_(1-a/2) sqrt(0.437 / (n - 4)) (statpsych ``ci.kendalltau``). The
  variance is stated for tau-a; applied to tau-b it is an approximation. Undefined at n <= 4.
"""

from __future__ import annotations

import math
from statistics import NormalDist

from judging.statistics.results import Interval, Stat, interval, undefined_interval

# Fieller, Hartley & Pearson's variance constant for Fisher's z of Kendall's tau, used by Bonett & Wright (2000).
KENDALL_VARIANCE = 0.437


def normal_quantile(confidence: float) -> float:
    """Two-sided critical value z_(1 - (1 - confidence) / 2)."""
    return NormalDist().inv_cdf(1.0 - (1.0 - confidence) / 2.0)


def fisher_z_standard_error(coefficient: str, r: float, n: int) -> float | str:
    """The standard error of atanh(r), or the reason it is undefined at this n."""
    if coefficient == "pearson":
        return 1.0 / math.sqrt(n - 3) if n > 3 else "Fisher's z interval needs more than 3 pairs"
    if coefficient == "spearman":
        if n <= 3:
            return "Bonett and Wright's Spearman interval needs more than 3 pairs"
        return math.sqrt((1.0 + r * r / 2.0) / (n - 3))
    if coefficient == "kendall":
        if n <= 4:
            return "Bonett and Wright's Kendall interval needs more than 4 pairs"
        return math.sqrt(KENDALL_VARIANCE / (n - 4))
    raise ValueError(f"unknown coefficient {coefficient!r}")


def analytic_interval(coefficient: str, r: float, n: int, confidence: float = 0.95) -> Interval:
    """The analytic interval of ``coefficient`` at estimate ``r`` from ``n`` pairs."""
    se = fisher_z_standard_error(coefficient, r, n)
    if isinstance(se, str):
        return undefined_interval(se)
    if not -1.0 < r < 1.0:
        return undefined_interval("the correlation is +-1, where Fisher's z is infinite")
    centre = math.atanh(r)
    half = normal_quantile(confidence) * se
    return interval(math.tanh(centre - half), math.tanh(centre + half))


def analytic_intervals(values: dict[str, Stat], n: int, confidence: float = 0.95) -> dict[str, Interval]:
    """One analytic interval per coefficient of ``values`` ({"pearson": Stat, ...})."""
    result: dict[str, Interval] = {}
    for name, stat in values.items():
        value = stat["value"]
        result[name] = (
            undefined_interval(stat["undefined"] or "undefined")
            if value is None
            else analytic_interval(name, value, n, confidence)
        )
    return result

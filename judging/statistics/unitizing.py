"""Krippendorff's alpha for unitizing (u-alpha): agreement on where units lie in a continuum and what they are.

Definitions follow Krippendorff, *Content Analysis* (2nd ed., 2004), section 11.6: the continuum is split, for each
category and each rater, into that rater's units of the category and the gaps between them; the observed disagreement
sums squared distances between overlapping segments of different raters; the expected disagreement is that of all
positions of the same units and gaps in the continuum. Each answer is one stretch of the continuum: answers are laid
end to end, in the order given, with their code-point lengths. Empty spans (points) occupy no length and are left out.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict

from annotations.spans.error_spans import Span
from judging.statistics.results import Interval, Stat, defined, interval, undefined, undefined_interval

WHOLE = "error"


@dataclass(frozen=True)
class UnitizedItem:
    """One answer: its length in code points and each rater's spans (an empty list for a rater who marked none)."""

    text_length: int
    spans_by_rater: Mapping[str, Sequence[Span]]


class CategoryAlpha(TypedDict):
    alpha: Stat
    observed: float
    expected: float


class UnitizingAlpha(TypedDict):
    alpha: Stat
    categories: dict[str, CategoryAlpha]
    raters: int
    length: int


# A segment of one rater's continuum for one category: start, length, and whether it is a unit (else a gap).
Segment = tuple[int, int, bool]


def unitizing_alpha(items: Sequence[UnitizedItem], *, with_category: bool = True) -> UnitizingAlpha:
    """u-alpha over all categories, and per category; without ``with_category`` every span is one category."""
    raters = sorted({rater for item in items for rater in item.spans_by_rater})
    result: UnitizingAlpha = {"alpha": undefined(""), "categories": {}, "raters": len(raters), "length": 0}
    if len(raters) < 2:
        result["alpha"] = undefined("fewer than two raters")
        return result
    units: dict[str, dict[str, list[tuple[int, int]]]] = {}
    offset = 0
    for index, item in enumerate(items):
        for rater in raters:
            if rater not in item.spans_by_rater:
                result["alpha"] = undefined(f"rater {rater} did not annotate answer {index + 1}")
                return result
            for span in item.spans_by_rater[rater]:
                span.check_within(item.text_length)
                if span.start is None or span.end is None or span.start == span.end:
                    continue
                category = span.category if with_category else WHOLE
                units.setdefault(category, {r: [] for r in raters})[rater].append(
                    (offset + span.start, span.end - span.start)
                )
        offset += item.text_length
    length = offset
    result["length"] = length
    if length == 0:
        result["alpha"] = undefined("the answers have no characters")
        return result
    if not units:
        result["alpha"] = undefined("no rater marked any span")
        return result
    observed_total = expected_total = 0.0
    for category in sorted(units):
        by_rater = units[category]
        for rater, marked in by_rater.items():
            marked.sort()
            for (start, size), (next_start, _) in itertools.pairwise(marked):
                if next_start < start + size:
                    result["alpha"] = undefined(
                        f"rater {rater} marked overlapping spans of category {category}; u-alpha needs units of one "
                        "category by one rater to be disjoint"
                    )
                    return result
        segments = {rater: _segments(marked, length) for rater, marked in by_rater.items()}
        observed = _observed(segments, len(raters), length)
        expected = _expected(segments, len(raters), length)
        observed_total += observed
        expected_total += expected
        result["categories"][category] = {
            "alpha": defined(1.0 - observed / expected) if expected > 0 else undefined("no expected disagreement"),
            "observed": observed,
            "expected": expected,
        }
    result["alpha"] = (
        defined(1.0 - observed_total / expected_total) if expected_total > 0 else undefined("no expected disagreement")
    )
    return result


def _segments(units: list[tuple[int, int]], length: int) -> list[Segment]:
    segments: list[Segment] = []
    position = 0
    for start, size in units:
        if start > position:
            segments.append((position, start - position, False))
        segments.append((start, size, True))
        position = start + size
    if position < length:
        segments.append((position, length - position, False))
    return segments


def _distance(g: Segment, h: Segment) -> int:
    (bg, lg, unit_g), (bh, lh, unit_h) = g, h
    if unit_g and unit_h:
        if -lg < bg - bh < lh:
            return (bg - bh) ** 2 + (bg + lg - bh - lh) ** 2
        return 0
    if unit_g and not unit_h and bh <= bg and bg + lg <= bh + lh:
        return lg**2
    if unit_h and not unit_g and bg <= bh and bh + lh <= bg + lg:
        return lh**2
    return 0


def _observed(segments: Mapping[str, list[Segment]], raters: int, length: int) -> float:
    total = 0
    names = sorted(segments)
    for a_index, a in enumerate(names):
        for b in names[a_index + 1 :]:
            total += _pair_distance(segments[a], segments[b])
    # Every unordered pair of raters stands for two ordered pairs, and the distance is symmetric.
    return 2 * total / (raters * (raters - 1) * length**2)


def _pair_distance(first: list[Segment], second: list[Segment]) -> int:
    # Both lists tile the continuum, so walking them together meets each overlapping pair once; only overlapping
    # segments can be at a distance.
    total = i = j = 0
    while i < len(first) and j < len(second):
        if first[i][2] or second[j][2]:  # two gaps are never at a distance
            total += _distance(first[i], second[j])
        end_i = first[i][0] + first[i][1]
        end_j = second[j][0] + second[j][1]
        if end_i <= end_j:
            i += 1
        if end_j <= end_i:
            j += 1
    return total


def _expected(segments: Mapping[str, list[Segment]], raters: int, length: int) -> float:
    units = [size for rater_segments in segments.values() for _, size, unit in rater_segments if unit]
    gaps = [size for rater_segments in segments.values() for _, size, unit in rater_segments if not unit]
    count = len(units)
    # Σ over gaps γ with l_γ ≥ l of (l_γ − l + 1) = (sum of those gaps) − (their number)(l − 1): with the gaps sorted
    # and their suffix sums, one binary search per unit instead of a pass over every gap (the same integers).
    gaps.sort()
    suffix = [0] * (len(gaps) + 1)
    for index in range(len(gaps) - 1, -1, -1):
        suffix[index] = suffix[index + 1] + gaps[index]
    numerator = 0.0
    for size in units:
        numerator += (count - 1) / 3 * (2 * size**3 - 3 * size**2 + size)
        first = bisect.bisect_left(gaps, size)
        numerator += size**2 * (suffix[first] - (len(gaps) - first) * (size - 1))
    denominator = raters * length * (raters * length - 1) - sum(size * (size - 1) for size in units)
    if denominator <= 0:
        return 0.0
    return 2 / length * numerator / denominator


def unitizing_alpha_bootstrap_ci(
    items: Sequence[UnitizedItem],
    *,
    with_category: bool = True,
    n_resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> Interval:
    """Percentile bootstrap interval of the overall u-alpha, resampling answers with replacement.

    Resample r lays out the answers ``rng.integers(0, n, n)`` (numpy's default generator seeded with ``seed``, one
    draw per resample in order), repeats included. Resamples whose u-alpha is undefined are left out.
    """
    import numpy as np  # noqa: PLC0415 - numpy is heavy; only the statistics that need it load it

    point = unitizing_alpha(items, with_category=with_category)["alpha"]
    if point["value"] is None:
        return undefined_interval(point["undefined"] or "u-alpha is undefined")
    if len(items) < 2:
        return undefined_interval("fewer than two answers to resample")
    rng = np.random.default_rng(seed)
    alphas = []
    for _ in range(n_resamples):
        drawn = rng.integers(0, len(items), len(items))
        value = unitizing_alpha([items[int(i)] for i in drawn], with_category=with_category)["alpha"]["value"]
        if value is not None:
            alphas.append(value)
    if not alphas:
        return undefined_interval("no bootstrap resample had a defined u-alpha")
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(np.asarray(alphas), [tail, 1.0 - tail])
    return interval(low, high)

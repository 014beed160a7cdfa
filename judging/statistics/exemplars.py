"""Few-shot exemplars for a judge, drawn from human-rated answers of one aspect.

The rule, per aspect:

- an answer qualifies when at least ``MIN_RATERS`` raters scored it (agreement needs two voices);
- its label is the raters' consensus: the median of their scores, rounded to the nearest level of the scale
  (a median halfway between two levels goes to the lower one, so the rule never invents a better score);
- answers are ranked by agreement: unanimous first, then by the spread of the scores (largest minus smallest),
  then by more raters; the remaining ties are broken by a random order drawn from the stated seed;
- up to ``k`` answers are taken per level, so the exemplars are balanced across the scale. A level no qualifying
  answer has as its consensus gets none and is named in ``missing_levels``: the judge sees fewer examples rather than
  an answer relabelled to fill the gap.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

MIN_RATERS = 2


class ExemplarError(ValueError):
    """The ratings cannot give exemplars; the message names the problem."""


@dataclass(frozen=True)
class Chosen:
    response_id: int
    label: float
    n_raters: int
    spread: float
    unanimous: bool


@dataclass
class Selection:
    chosen: list[Chosen] = field(default_factory=list)
    missing_levels: list[float] = field(default_factory=list)
    candidates: int = 0


def consensus_label(values: Sequence[float], levels: Sequence[float]) -> float:
    """The median of the raters' scores, moved to the nearest level; exactly halfway goes to the lower level."""
    median = float(np.median(np.asarray(values, dtype=np.float64)))
    ordered = sorted(levels)
    return min(ordered, key=lambda level: (abs(level - median), level))


def select_exemplars(
    ratings: Mapping[int, Sequence[float]], *, levels: Sequence[float], k: int, seed: int
) -> Selection:
    """Up to ``k`` exemplars per level from ``ratings`` (answer id → its raters' scores), as the module states."""
    if k < 1:
        raise ExemplarError(f"k must be at least 1 exemplar per level, not {k}")
    if not levels:
        raise ExemplarError("the scale has no levels")
    rng = np.random.default_rng(seed)
    answer_ids = sorted(ratings)
    tie_breaks = dict(zip(answer_ids, rng.permutation(len(answer_ids)).tolist(), strict=True))
    by_level: dict[float, list[tuple[tuple[int, float, int, int], Chosen]]] = {level: [] for level in levels}
    candidates = 0
    for response_id in answer_ids:
        values = [float(v) for v in ratings[response_id] if v is not None and math.isfinite(float(v))]
        if len(values) < MIN_RATERS:
            continue
        candidates += 1
        spread = max(values) - min(values)
        chosen = Chosen(
            response_id=response_id,
            label=consensus_label(values, levels),
            n_raters=len(values),
            spread=spread,
            unanimous=spread == 0.0,
        )
        rank = (0 if chosen.unanimous else 1, spread, -len(values), tie_breaks[response_id])
        by_level[chosen.label].append((rank, chosen))
    selection = Selection(candidates=candidates)
    for level in sorted(levels):
        ranked = sorted(by_level[level], key=lambda pair: pair[0])
        if not ranked:
            selection.missing_levels.append(level)
        selection.chosen.extend(chosen for _, chosen in ranked[:k])
    return selection

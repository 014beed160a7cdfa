"""When raters' error spans on one answer disagree: plain Python, no ORM.

Two raters' spans on an answer agree by the span-level F1 of docs/statistics.md ("Span-level precision, recall, F1"),
with overlap matching and categories: a span of one rater is matched when some span of the other overlaps it by at
least one character and has the same category; precision is the share of the first rater's spans matched, recall
the share of the second's, F1 their harmonic mean. Only spans with offsets count. Unlike the statistic, which is
undefined then, two raters who both marked nothing agree fully (F1 1), and one who marked nothing against one who
marked something do not agree at all (F1 0): an adjudicator must settle the latter.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

from annotations.spans.error_spans import Span


def _overlap_same_category(a: Span, b: Span) -> bool:
    assert a.start is not None and a.end is not None and b.start is not None and b.end is not None
    return a.category == b.category and a.start < b.end and b.start < a.end


def pair_span_f1(first: Sequence[Span], second: Sequence[Span]) -> float:
    a = [span for span in first if span.located]
    b = [span for span in second if span.located]
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    precision = sum(any(_overlap_same_category(x, y) for y in b) for x in a) / len(a)
    recall = sum(any(_overlap_same_category(x, y) for x in a) for y in b) / len(b)
    if precision + recall == 0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


def lowest_pair_span_f1(answers: Sequence[Sequence[Span]]) -> float | None:
    """The lowest F1 over every pair of raters' span sets on one answer; None with fewer than two raters."""
    if len(answers) < 2:
        return None
    return min(pair_span_f1(x, y) for x, y in combinations(answers, 2))

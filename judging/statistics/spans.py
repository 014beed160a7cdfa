"""MQM scores and span agreement between two sets of error spans (a rater and another rater, or gold).

Spans are `annotations.error_spans.Span` values: code-point offsets into the exact stored text. Agreement looks only at
located spans; errors with no offsets count in MQM scores and nowhere else.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, TypedDict

from annotations.error_spans import MqmWeights, Span, mqm_penalty
from judging.statistics.results import Stat, defined, undefined

Normalisation = Literal["answer", "100 words", "100 characters"]
Matching = Literal["exact", "overlap"]


def mqm_score(spans: Iterable[Span], text: str, weights: MqmWeights, per: Normalisation = "answer") -> Stat:
    """The MQM penalty of one answer (higher is worse), per answer or per 100 words or characters of its text.

    Words are runs of non-whitespace (`str.split()`), which says nothing in Japanese or Chinese: use characters
    there. Characters are code points.
    """
    penalty = mqm_penalty(spans, weights)
    if per == "answer":
        return defined(penalty)
    size = len(text.split()) if per == "100 words" else len(text)
    if size == 0:
        return undefined(f"the text has no {'words' if per == '100 words' else 'characters'} to normalise by")
    return defined(100.0 * penalty / size)


@dataclass(frozen=True)
class SpanPair:
    """One item's spans by two sources; ``reference`` is the gold or the second rater."""

    text_length: int
    candidate: Sequence[Span]
    reference: Sequence[Span]


class PrecisionRecall(TypedDict):
    precision: Stat
    recall: Stat
    f1: Stat
    candidate_units: int
    reference_units: int


def _located(spans: Iterable[Span], text_length: int) -> list[Span]:
    located = [span for span in spans if span.located]
    for span in located:
        span.check_within(text_length)
    return located


def _ratio(numerator: int, denominator: int, what: str) -> Stat:
    if denominator == 0:
        return undefined(f"no {what}")
    return defined(numerator / denominator)


def _f1(precision: Stat, recall: Stat) -> Stat:
    p, r = precision["value"], recall["value"]
    if p is None or r is None:
        return undefined("precision or recall is undefined")
    if p + r == 0:
        return defined(0.0)
    return defined(2 * p * r / (p + r))


def _precision_recall(
    candidate_matched: int, candidate_total: int, reference_matched: int, reference_total: int, units: str
) -> PrecisionRecall:
    precision = _ratio(candidate_matched, candidate_total, f"{units} marked by the candidate")
    recall = _ratio(reference_matched, reference_total, f"{units} marked by the reference")
    return {
        "precision": precision,
        "recall": recall,
        "f1": _f1(precision, recall),
        "candidate_units": candidate_total,
        "reference_units": reference_total,
    }


def character_agreement(items: Sequence[SpanPair], *, with_category: bool = False) -> PrecisionRecall:
    """Character-level precision, recall and F1, pooled over items (micro-averaged).

    A character counts once per category however many spans of the candidate cover it; with ``with_category`` a
    character agrees only where both sides mark it with the same category. Precision is the share of the
    candidate's marked characters the reference also marks; recall the share of the reference's the candidate marks.
    """
    matched = candidate_total = reference_total = 0
    for item in items:
        candidate = _characters(_located(item.candidate, item.text_length), with_category)
        reference = _characters(_located(item.reference, item.text_length), with_category)
        matched += len(candidate & reference)
        candidate_total += len(candidate)
        reference_total += len(reference)
    return _precision_recall(matched, candidate_total, matched, reference_total, "characters")


def _characters(spans: Iterable[Span], with_category: bool) -> set[tuple[int, str]]:
    marked: set[tuple[int, str]] = set()
    for span in spans:
        assert span.start is not None and span.end is not None  # located spans only
        label = span.category if with_category else ""
        marked.update((position, label) for position in range(span.start, span.end))
    return marked


def _matches(a: Span, b: Span, matching: Matching, with_category: bool) -> bool:
    if with_category and a.category != b.category:
        return False
    if matching == "exact" or a.start == a.end or b.start == b.end:
        # An empty span (a point, such as where an omission belongs) covers no character, so it matches only the
        # same point.
        return (a.start, a.end) == (b.start, b.end)
    assert a.start is not None and a.end is not None and b.start is not None and b.end is not None
    return a.start < b.end and b.start < a.end


def span_agreement(
    items: Sequence[SpanPair], *, matching: Matching = "overlap", with_category: bool = False
) -> PrecisionRecall:
    """Span-level precision, recall and F1, pooled over items.

    Precision is the share of candidate spans that match at least one reference span in the same item; recall the
    share of reference spans matched by at least one candidate span; F1 their harmonic mean. Spans match exactly
    (same offsets) or by overlap (at least one character in common), and with ``with_category`` only if their
    categories are equal too. Matching is not one-to-one: one long span overlapping two short ones matches both.
    Severity is never compared.
    """
    candidate_matched = reference_matched = candidate_total = reference_total = 0
    for item in items:
        candidate = _located(item.candidate, item.text_length)
        reference = _located(item.reference, item.text_length)
        candidate_total += len(candidate)
        reference_total += len(reference)
        candidate_matched += sum(any(_matches(c, r, matching, with_category) for r in reference) for c in candidate)
        reference_matched += sum(any(_matches(c, r, matching, with_category) for c in candidate) for r in reference)
    return _precision_recall(candidate_matched, candidate_total, reference_matched, reference_total, "spans")


def majority_spans(annotations: Sequence[Sequence[Span]], text_length: int) -> list[Span]:
    """The characters more than half of the annotators marked (category and severity ignored), as maximal runs.

    Majority voting over characters, the usual aggregation of several annotators' spans into one reference; the
    runs carry no category (category "") and severity "neutral", so they serve category-blind agreement only. With
    two annotators a character needs both.
    """
    if not annotations:
        return []
    votes = [0] * text_length
    for spans in annotations:
        for position, _label in _characters(_located(spans, text_length), with_category=False):
            votes[position] += 1
    needed = len(annotations) // 2 + 1
    runs: list[Span] = []
    start: int | None = None
    for position in range(text_length + 1):
        marked = position < text_length and votes[position] >= needed
        if marked and start is None:
            start = position
        elif not marked and start is not None:
            runs.append(Span(start, position, "", "neutral"))
            start = None
    return runs

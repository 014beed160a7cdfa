"""MQM scores and span agreement between two sets of error spans (a rater and another rater, or gold).

Spans are `annotations.spans.error_spans.Span` values: code-point offsets into the exact stored text. Agreement
looks only at located spans; errors with no offsets count in MQM scores and nowhere else.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, TypedDict

from annotations.spans.error_spans import MqmWeights, Span, category_within, mqm_penalty
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


def character_agreement(
    items: Sequence[SpanPair], *, with_category: bool = False, nested: bool = False
) -> PrecisionRecall:
    """Character-level precision, recall and F1, pooled over items (micro-averaged).

    A character counts once per category however many spans of the candidate cover it; with ``with_category`` a
    character agrees only where both sides mark it with the same category (with ``nested``, a reference category
    also holds the candidate categories under it: see `category_within`). Precision is the share of the candidate's
    marked characters the reference also marks; recall the share of the reference's the candidate marks.
    """
    candidate_matched = reference_matched = candidate_total = reference_total = 0
    for item in items:
        candidate = _characters(_located(item.candidate, item.text_length), with_category)
        reference = _characters(_located(item.reference, item.text_length), with_category)
        if nested and with_category:
            reference_at: dict[int, list[str]] = {}
            candidate_at: dict[int, list[str]] = {}
            for position, label in reference:
                reference_at.setdefault(position, []).append(label)
            for position, label in candidate:
                candidate_at.setdefault(position, []).append(label)
            candidate_matched += sum(
                any(category_within(r, c) for r in reference_at.get(position, ())) for position, c in candidate
            )
            reference_matched += sum(
                any(category_within(r, c) for c in candidate_at.get(position, ())) for position, r in reference
            )
        else:
            common = len(candidate & reference)
            candidate_matched += common
            reference_matched += common
        candidate_total += len(candidate)
        reference_total += len(reference)
    return _precision_recall(candidate_matched, candidate_total, reference_matched, reference_total, "characters")


def _characters(spans: Iterable[Span], with_category: bool) -> set[tuple[int, str]]:
    marked: set[tuple[int, str]] = set()
    for span in spans:
        assert span.start is not None and span.end is not None  # located spans only
        label = span.category if with_category else ""
        marked.update((position, label) for position in range(span.start, span.end))
    return marked


def _matches(a: Span, b: Span, matching: Matching, with_category: bool, nested: bool = False) -> bool:
    """Whether candidate span ``a`` matches reference span ``b``."""
    if with_category and not (category_within(b.category, a.category) if nested else a.category == b.category):
        return False
    if matching == "exact" or a.start == a.end or b.start == b.end:
        # An empty span (a point, such as where an omission belongs) covers no character, so it matches only the
        # same point.
        return (a.start, a.end) == (b.start, b.end)
    assert a.start is not None and a.end is not None and b.start is not None and b.end is not None
    return a.start < b.end and b.start < a.end


def span_agreement(
    items: Sequence[SpanPair], *, matching: Matching = "overlap", with_category: bool = False, nested: bool = False
) -> PrecisionRecall:
    """Span-level precision, recall and F1, pooled over items.

    Precision is the share of candidate spans that match at least one reference span in the same item; recall the
    share of reference spans matched by at least one candidate span; F1 their harmonic mean. Spans match exactly
    (same offsets) or by overlap (at least one character in common), and with ``with_category`` only if their
    categories are equal too (with ``nested``, or if the candidate's lies under the reference's: `category_within`).
    Matching is not one-to-one: one long span overlapping two short ones matches both.
    Severity is never compared.
    """
    candidate_matched = reference_matched = candidate_total = reference_total = 0
    for item in items:
        candidate = _located(item.candidate, item.text_length)
        reference = _located(item.reference, item.text_length)
        candidate_total += len(candidate)
        reference_total += len(reference)
        candidate_matched += sum(
            any(_matches(c, r, matching, with_category, nested) for r in reference) for c in candidate
        )
        reference_matched += sum(
            any(_matches(c, r, matching, with_category, nested) for c in candidate) for r in reference
        )
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


class RatedText(Protocol):
    """One answer as several raters marked it: its length and each rater's spans (``UnitizedItem`` has this shape)."""

    @property
    def text_length(self) -> int: ...

    @property
    def spans_by_rater(self) -> Mapping[str, Sequence[Span]]: ...


class PairFigures(TypedDict):
    first: str
    second: str
    answers: int
    figures: PrecisionRecall


class PairwiseAgreement(TypedDict):
    mean_f1: Stat
    pairs: int  # rater pairs that share at least one answer
    counted_pairs: int  # of those, the pairs with a defined F1 (anything marked by either)
    answers: int  # answers with two or more raters
    by_pair: list[PairFigures]


def pair_f1(figures: PrecisionRecall) -> Stat:
    """F1 of one pair, 0 where one side marked something and the other nothing (the limit of 2TP / (2TP + FP + FN)
    with TP = 0), undefined where neither marked anything: there was nothing to agree or disagree on."""
    if figures["candidate_units"] == 0 and figures["reference_units"] == 0:
        return undefined("neither rater marked anything")
    if figures["candidate_units"] == 0 or figures["reference_units"] == 0:
        return defined(0.0)
    return figures["f1"]


def pairwise_agreement(
    items: Sequence[RatedText],
    *,
    level: Literal["character", "span"],
    matching: Matching = "overlap",
    with_category: bool = False,
) -> PairwiseAgreement:
    """Agreement between every two raters who marked the same answers, averaged over the pairs (macro-averaged).

    For each unordered pair of raters, the answers both marked are pooled and compared as in
    `character_agreement` or `span_agreement`, the rater whose name sorts first as candidate and the other as
    reference. Precision of one order is recall of the other, so precision and recall are given per pair only; F1
    is symmetric and is averaged over the pairs with a defined F1 (see `pair_f1`), each pair weighing the same
    whatever the number of answers it shares.
    """
    shared: dict[tuple[str, str], list[SpanPair]] = {}
    answers = 0
    for item in items:
        raters = sorted(item.spans_by_rater)
        if len(raters) >= 2:
            answers += 1
        for first_index, first in enumerate(raters):
            for second in raters[first_index + 1 :]:
                shared.setdefault((first, second), []).append(
                    SpanPair(item.text_length, item.spans_by_rater[first], item.spans_by_rater[second])
                )
    by_pair: list[PairFigures] = []
    f1s: list[float] = []
    for (first, second), pairs in sorted(shared.items()):
        if level == "character":
            figures = character_agreement(pairs, with_category=with_category)
        else:
            figures = span_agreement(pairs, matching=matching, with_category=with_category)
        figures["f1"] = pair_f1(figures)
        if figures["f1"]["value"] is not None:
            f1s.append(figures["f1"]["value"])
        by_pair.append({"first": first, "second": second, "answers": len(pairs), "figures": figures})
    if not shared:
        mean = undefined("no answer was marked by two raters")
    elif not f1s:
        mean = undefined("no pair of raters marked anything on the answers they share")
    else:
        mean = defined(sum(f1s) / len(f1s))
    return {"mean_f1": mean, "pairs": len(shared), "counted_pairs": len(f1s), "answers": answers, "by_pair": by_pair}


NO_GOLD_ANSWER = "the rater answered no gold item that expects spans"
RATER_MARKED_NOTHING = "the rater marked nothing on their gold answers"
GOLD_EXPECTS_NOTHING = "the gold expects no error on the rater's gold answers"
NOTHING_ON_EITHER_SIDE = "neither the rater nor the gold marks anything"


def gold_agreement(
    pairs: Sequence[SpanPair], *, level: Literal["character", "span"], with_category: bool
) -> PrecisionRecall:
    """One rater against gold: each pair is one gold answer of theirs, the rater's spans the candidate and the gold's
    expected spans the reference. Pooled over the answers (micro-averaged: matched, marked and expected units are
    summed over the answers before dividing), spans matched by overlap, and with ``with_category`` a gold category
    holds the rater's categories under it (`category_within`, the rule gold on spans passes by). F1 is 0 where one
    side marks something and the other nothing, undefined where neither does (`pair_f1`); everything is undefined
    when the rater answered no gold."""
    if not pairs:
        return {
            "precision": undefined(NO_GOLD_ANSWER),
            "recall": undefined(NO_GOLD_ANSWER),
            "f1": undefined(NO_GOLD_ANSWER),
            "candidate_units": 0,
            "reference_units": 0,
        }
    if level == "character":
        figures = character_agreement(pairs, with_category=with_category, nested=True)
    else:
        figures = span_agreement(pairs, matching="overlap", with_category=with_category, nested=True)
    if figures["candidate_units"] == 0:
        figures["precision"] = undefined(RATER_MARKED_NOTHING)
    if figures["reference_units"] == 0:
        figures["recall"] = undefined(GOLD_EXPECTS_NOTHING)
    if figures["candidate_units"] == 0 and figures["reference_units"] == 0:
        figures["f1"] = undefined(NOTHING_ON_EITHER_SIDE)
    else:
        figures["f1"] = pair_f1(figures)
    return figures


def merge_overlapping(spans: Iterable[Span], *, with_category: bool) -> list[Span]:
    """One rater's located spans with overlapping ones (of the same category, if ``with_category``) merged into
    their union, keeping the first one's category and severity; spans that only touch stay apart. Unitizing alpha
    needs one rater's units of a category to be disjoint, and a rater may mark overlapping errors."""
    groups: dict[str, list[Span]] = {}
    for span in spans:
        if span.start is None or span.end is None or span.start == span.end:
            continue
        groups.setdefault(span.category if with_category else "", []).append(span)
    merged: list[Span] = []
    for group in groups.values():
        group.sort(key=lambda span: (span.start, span.end))
        current = group[0]
        for span in group[1:]:
            assert current.end is not None and span.start is not None and span.end is not None
            if span.start < current.end:
                current = Span(current.start, max(current.end, span.end), current.category, current.severity)
            else:
                merged.append(current)
                current = span
        merged.append(current)
    return sorted(merged, key=lambda span: (span.start or 0, span.end or 0, span.category))

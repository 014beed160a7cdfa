"""MQM scores and span precision, recall and F1 (judging.statistics.spans)."""

import random
from dataclasses import dataclass

import numpy as np
import pytest
from sklearn.metrics import precision_recall_fscore_support

from annotations.spans.error_spans import MQM_CORE, WMT2020, Span, category_within
from judging.statistics.spans import (
    SpanPair,
    character_agreement,
    gold_agreement,
    majority_spans,
    mqm_score,
    span_agreement,
)


def _span(start, end, category="Accuracy/Mistranslation", severity="minor"):
    return Span(start, end, category, severity)


def test_mqm_score_follows_the_wmt_2020_weights_and_normalises():
    spans = [
        _span(0, 3, severity="major"),
        _span(4, 5, "Fluency/Punctuation", "minor"),
        _span(6, 8, "Fluency/Punctuation", "major"),
        _span(None, None, "Non-translation", "major"),
        _span(9, 10, "Style/Awkward", "neutral"),
        _span(10, 12, "Style/Awkward", "minor"),
    ]
    text = "eins zwei drei vier"  # 4 words, 19 characters
    assert mqm_score(spans, text, WMT2020)["value"] == pytest.approx(5 + 0.1 + 5 + 25 + 0 + 1)
    assert mqm_score(spans, text, WMT2020, per="100 words")["value"] == pytest.approx(100 * 36.1 / 4)
    assert mqm_score(spans, text, WMT2020, per="100 characters")["value"] == pytest.approx(100 * 36.1 / 19)
    assert mqm_score([], text, WMT2020) == {"value": 0.0, "undefined": None}
    assert mqm_score([_span(0, 1, severity="critical")], "x", MQM_CORE)["value"] == 10.0
    # Minor punctuation keeps the full minor weight in the core scheme.
    assert mqm_score([_span(0, 1, "Fluency/Punctuation")], "x", MQM_CORE)["value"] == 1.0


def test_mqm_score_per_word_of_an_empty_text_is_undefined():
    result = mqm_score([], "   ", WMT2020, per="100 words")
    assert result["value"] is None and "no words" in result["undefined"]
    assert mqm_score([], "", WMT2020, per="100 characters")["undefined"] == "the text has no characters to normalise by"


def test_spans_refuse_impossible_offsets_and_severities():
    for bad in [(-1, 2), (3, 2), (1, None), (True, 2)]:
        with pytest.raises(ValueError):
            Span(bad[0], bad[1], "Other", "minor")
    with pytest.raises(ValueError, match="unknown severity"):
        Span(0, 1, "Other", "Major")
    with pytest.raises(ValueError, match="runs past the end"):
        character_agreement([SpanPair(3, [_span(0, 4)], [])])


def test_character_agreement_matches_scikit_learn_on_pooled_characters():
    # Reference: scikit-learn 1.9.1 precision_recall_fscore_support (binary, and micro over categories) on the same
    # characters laid end to end. Seeded random spans; each side's spans of one category are disjoint so a
    # character has one label per side.
    rng = random.Random(38)
    categories = ["Accuracy", "Fluency", "Style"]
    items = []
    for _ in range(40):
        length = rng.randint(0, 30)
        sides = []
        for _side in range(2):
            spans = []
            position = 0
            while position < length:
                start = rng.randint(position, length)
                end = rng.randint(start, min(length, start + 6))
                if end > start and rng.random() < 0.6:
                    spans.append(_span(start, end, rng.choice(categories)))
                position = end + 1
            sides.append(spans)
        items.append(SpanPair(length, sides[0], sides[1]))
    candidate, reference, candidate_label, reference_label = [], [], [], []
    for item in items:
        for side, flags, labels in (
            (item.candidate, candidate, candidate_label),
            (item.reference, reference, reference_label),
        ):
            marks = [""] * item.text_length
            for span in side:
                for position in range(span.start, span.end):
                    marks[position] = span.category
            flags.extend(1 if mark else 0 for mark in marks)
            labels.extend(mark or "none" for mark in marks)
    # scikit-learn takes the truth first, so its precision is over the candidate's marks.
    p, r, f, _ = precision_recall_fscore_support(reference, candidate, average="binary", zero_division=np.nan)
    ours = character_agreement(items)
    assert (ours["precision"]["value"], ours["recall"]["value"], ours["f1"]["value"]) == pytest.approx((p, r, f))
    p, r, f, _ = precision_recall_fscore_support(
        reference_label, candidate_label, labels=categories, average="micro", zero_division=np.nan
    )
    ours = character_agreement(items, with_category=True)
    assert (ours["precision"]["value"], ours["recall"]["value"], ours["f1"]["value"]) == pytest.approx((p, r, f))


def test_character_agreement_counts_a_character_once_and_is_undefined_without_marks():
    # Two overlapping candidate spans cover characters 0-5; the reference marks 3-8.
    pair = SpanPair(10, [_span(0, 4), _span(2, 6)], [_span(3, 9)])
    result = character_agreement([pair])
    assert result["precision"]["value"] == pytest.approx(3 / 6)
    assert result["recall"]["value"] == pytest.approx(3 / 6)
    empty = character_agreement([SpanPair(5, [], [_span(0, 2)])])
    assert empty["precision"]["undefined"] == "no characters marked by the candidate"
    assert empty["recall"]["value"] == 0.0
    assert empty["f1"]["undefined"] == "precision or recall is undefined"


def test_span_agreement_exact_and_overlap_with_and_without_category():
    # Worked by hand. Item 1: candidate A=[0,4) Acc, B=[10,12) Flu, C=[20,20) point; reference X=[0,4) Flu,
    # Y=[11,15) Flu, Z=[20,20) point Acc. Item 2: candidate D=[0,2) Acc; reference none.
    items = [
        SpanPair(
            30,
            [_span(0, 4, "Acc"), _span(10, 12, "Flu"), _span(20, 20, "Acc")],
            [_span(0, 4, "Flu"), _span(11, 15, "Flu"), _span(20, 20, "Acc")],
        ),
        SpanPair(5, [_span(0, 2, "Acc")], []),
    ]
    exact = span_agreement(items, matching="exact")  # A-X, C-Z match: 2 of 4 candidate, 2 of 3 reference
    assert exact["precision"]["value"] == pytest.approx(2 / 4)
    assert exact["recall"]["value"] == pytest.approx(2 / 3)
    assert exact["f1"]["value"] == pytest.approx(2 * (1 / 2) * (2 / 3) / (1 / 2 + 2 / 3))
    overlap = span_agreement(items, matching="overlap")  # A-X, B-Y, C-Z
    assert overlap["precision"]["value"] == pytest.approx(3 / 4)
    assert overlap["recall"]["value"] == pytest.approx(3 / 3)
    typed = span_agreement(items, matching="overlap", with_category=True)  # B-Y, C-Z
    assert typed["precision"]["value"] == pytest.approx(2 / 4)
    assert typed["recall"]["value"] == pytest.approx(2 / 3)
    typed_exact = span_agreement(items, matching="exact", with_category=True)  # C-Z
    assert typed_exact["precision"]["value"] == pytest.approx(1 / 4)
    assert typed_exact["recall"]["value"] == pytest.approx(1 / 3)


def test_span_agreement_ignores_unlocated_errors_and_touching_spans_do_not_overlap():
    items = [SpanPair(10, [_span(0, 3), _span(None, None, "Non-translation", "major")], [_span(3, 6)])]
    result = span_agreement(items)
    assert result["candidate_units"] == 1
    assert result["precision"]["value"] == 0.0 and result["f1"]["value"] == 0.0
    assert span_agreement([SpanPair(4, [], [])])["f1"]["undefined"] == "precision or recall is undefined"


def test_majority_spans_keep_the_characters_most_annotators_marked() -> None:
    # Worked by hand on a 10-character text: annotator A marks 0..4 and 6..8, B marks 2..6, C marks 3..4 and 7..9.
    # Votes per character: 1 1 2 3 1 1 1 2 1 0; a majority of three is two, so 2..4 and 7..8 stand.
    a = [Span(0, 4, "Accuracy", "major"), Span(6, 8, "Fluency", "minor")]
    b = [Span(2, 6, "Accuracy", "minor")]
    c = [Span(3, 4, "Fluency", "minor"), Span(7, 9, "Style", "minor"), Span(None, None, "Omission", "major")]
    assert majority_spans([a, b, c], 10) == [Span(2, 4, "", "neutral"), Span(7, 8, "", "neutral")]
    # Two annotators: a character needs both.
    assert majority_spans([a, b], 10) == [Span(2, 4, "", "neutral")]
    assert majority_spans([], 10) == []


# --- between raters: pairwise_agreement and merge_overlapping ---------------------------------------------------


def test_pairwise_agreement_hand_worked():
    # One answer of 10 characters. a marks 0..4, b marks 2..6 (same category), c marks nothing.
    # Characters: a={0,1,2,3}, b={2,3,4,5}, 2 in common: F1(a,b) = 2*2/(4+4) = 0.5; c marked nothing while a and b
    # did, so F1(a,c) = F1(b,c) = 0 (2TP / (2TP + FP + FN) with TP = 0). Mean over the 3 pairs = 0.5/3 = 1/6.
    # Spans by overlap: a's span meets b's, so P = R = 1 for (a,b): mean = 1/3. Exact offsets: none equal: mean 0.
    from judging.statistics.spans import pairwise_agreement

    item = UnitizedItemLike(10, {"a": [Span(0, 4, "X", "minor")], "b": [Span(2, 6, "X", "minor")], "c": []})
    characters = pairwise_agreement([item], level="character")
    assert characters["mean_f1"]["value"] == pytest.approx(1 / 6)
    assert (characters["pairs"], characters["counted_pairs"], characters["answers"]) == (3, 3, 1)
    first = characters["by_pair"][0]
    assert (first["first"], first["second"]) == ("a", "b")
    assert first["figures"]["precision"]["value"] == pytest.approx(0.5)
    assert first["figures"]["recall"]["value"] == pytest.approx(0.5)
    assert characters["by_pair"][1]["figures"]["recall"]["value"] is None  # c marked nothing: no recall of c
    assert characters["by_pair"][1]["figures"]["f1"]["value"] == 0.0
    assert pairwise_agreement([item], level="span")["mean_f1"]["value"] == pytest.approx(1 / 3)
    assert pairwise_agreement([item], level="span", matching="exact")["mean_f1"]["value"] == 0.0


def test_pairwise_agreement_undefined_with_reasons():
    from judging.statistics.spans import pairwise_agreement

    alone = pairwise_agreement([UnitizedItemLike(5, {"a": [Span(0, 2, "X", "minor")]})], level="character")
    assert alone["mean_f1"] == {"value": None, "undefined": "no answer was marked by two raters"}
    nothing = pairwise_agreement([UnitizedItemLike(5, {"a": [], "b": []})], level="span")
    assert nothing["mean_f1"]["undefined"] == "no pair of raters marked anything on the answers they share"
    assert nothing["by_pair"][0]["figures"]["f1"]["undefined"] == "neither rater marked anything"


def test_merge_overlapping_keeps_touching_spans_apart():
    from judging.statistics.spans import merge_overlapping

    spans = [
        Span(0, 4, "X", "minor"),
        Span(2, 6, "Y", "major"),
        Span(6, 8, "X", "minor"),
        Span(None, None, "X", "minor"),
    ]
    assert merge_overlapping(spans, with_category=False) == [Span(0, 6, "X", "minor"), Span(6, 8, "X", "minor")]
    assert merge_overlapping(spans, with_category=True) == [
        Span(0, 4, "X", "minor"),
        Span(2, 6, "Y", "major"),
        Span(6, 8, "X", "minor"),
    ]


@dataclass(frozen=True)
class UnitizedItemLike:
    text_length: int
    spans_by_rater: dict[str, list[Span]]


# --- a rater against gold spans -------------------------------------------------------------------------------------


def _figures(result):
    return tuple(result[key]["value"] for key in ("precision", "recall", "f1"))


GOLD_ANSWERS = [
    # Answer 1 (20 characters): gold expects "Fluency" on 2..6 and "Accuracy/Mistranslation" on 10..14; the rater
    # marks "Fluency/Grammar" on 4..8 and "Fluency/Spelling" on 12..16.
    SpanPair(
        20,
        [_span(4, 8, "Fluency/Grammar"), _span(12, 16, "Fluency/Spelling")],
        [_span(2, 6, "Fluency", "neutral"), _span(10, 14, "Accuracy/Mistranslation", "neutral")],
    ),
    # Answer 2 (10 characters): gold expects no error; the rater marks "Fluency/Grammar" on 0..2.
    SpanPair(10, [_span(0, 2, "Fluency/Grammar")], []),
]


def test_gold_agreement_hand_worked_with_nested_categories():
    # Hand-worked, micro-averaged (matched, marked and expected units summed over both answers before dividing).
    # Characters, category-blind: the rater marks {4..7, 12..15} + {0, 1} = 10, the gold {2..5, 10..13} = 8, both
    # {4, 5, 12, 13} = 4. P = 4/10, R = 4/8, F1 = 2 * 0.4 * 0.5 / 0.9 = 4/9.
    assert _figures(gold_agreement(GOLD_ANSWERS, level="character", with_category=False)) == pytest.approx(
        (0.4, 0.5, 4 / 9)
    )
    # The same characters on scikit-learn 1.9.1 (binary, the gold as truth), answers laid end to end.
    truth = [1 if 2 <= i < 6 or 10 <= i < 14 else 0 for i in range(20)] + [0] * 10
    marked = [1 if 4 <= i < 8 or 12 <= i < 16 else 0 for i in range(20)] + [1, 1] + [0] * 8
    p, r, f, _ = precision_recall_fscore_support(truth, marked, average="binary")
    assert (p, r, f) == pytest.approx((0.4, 0.5, 4 / 9))
    # Characters, with the category: gold "Fluency" holds "Fluency/Grammar", so 4 and 5 agree on both sides;
    # "Fluency/Spelling" is not under "Accuracy/Mistranslation". P = 2/10, R = 2/8, F1 = 2 * 0.2 * 0.25 / 0.45 = 2/9.
    assert _figures(gold_agreement(GOLD_ANSWERS, level="character", with_category=True)) == pytest.approx(
        (0.2, 0.25, 2 / 9)
    )
    # Equal categories only (the raters' convention) would find nothing in common here.
    assert character_agreement(GOLD_ANSWERS, with_category=True)["precision"]["value"] == 0.0
    # Spans by overlap, category-blind: the rater's 4..8 and 12..16 meet gold spans, 0..2 meets none: P = 2/3; both
    # gold spans are met: R = 1; F1 = 2 * (2/3) / (5/3) = 4/5.
    assert _figures(gold_agreement(GOLD_ANSWERS, level="span", with_category=False)) == pytest.approx((2 / 3, 1.0, 0.8))
    # With the category: only 4..8 "Fluency/Grammar" against "Fluency": P = 1/3, R = 1/2, F1 = (1/3) / (5/6) = 2/5.
    assert _figures(gold_agreement(GOLD_ANSWERS, level="span", with_category=True)) == pytest.approx((1 / 3, 0.5, 0.4))
    counted = gold_agreement(GOLD_ANSWERS, level="span", with_category=True)
    assert (counted["candidate_units"], counted["reference_units"]) == (3, 2)


@pytest.mark.parametrize(
    ("expected", "given", "holds"),
    [
        ("Fluency", "Fluency/Grammar", True),
        ("Fluency", "Fluency", True),
        ("Fluency/Grammar", "Fluency", False),
        ("Fluency", "FluencyX/Grammar", False),
        ("Fluency/Grammar", "Fluency/Grammar/Agreement", True),
        ("Accuracy", "Fluency/Grammar", False),
    ],
)
def test_category_within_holds_the_category_and_those_nested_under_it(expected, given, holds):
    assert category_within(expected, given) is holds


def test_gold_agreement_undefined_with_reasons():
    none = gold_agreement([], level="character", with_category=False)
    assert {none[key]["undefined"] for key in ("precision", "recall", "f1")} == {
        "the rater answered no gold item that expects spans"
    }
    both_empty = gold_agreement([SpanPair(10, [], [])], level="span", with_category=True)
    assert both_empty["precision"]["undefined"] == "the rater marked nothing on their gold answers"
    assert both_empty["recall"]["undefined"] == "the gold expects no error on the rater's gold answers"
    assert both_empty["f1"]["undefined"] == "neither the rater nor the gold marks anything"
    # The gold expects an error the rater did not mark: precision undefined, recall 0, F1 0.
    missed = gold_agreement([SpanPair(10, [], [_span(0, 2)])], level="character", with_category=False)
    assert missed["precision"]["value"] is None and missed["recall"]["value"] == 0.0 and missed["f1"]["value"] == 0.0
    # The rater marks an error where the gold expects none: precision 0, recall undefined, F1 0.
    extra = gold_agreement([SpanPair(10, [_span(0, 2)], [])], level="span", with_category=False)
    assert extra["precision"]["value"] == 0.0 and extra["recall"]["value"] is None and extra["f1"]["value"] == 0.0

"""Span answers as the task form sends them: offsets converted explicitly from the browser's UTF-16 units to the
code points the site stores, and every span checked against the exact stored text and the aspect's scheme."""

import pytest

from annotations.spans.answers import (
    SpanAnswerInvalid,
    code_points_to_utf16,
    parse_span_answer,
    utf16_to_code_points,
)
from annotations.spans.schemes import SpanScheme

SCHEME = SpanScheme(
    categories=("Accuracy/Mistranslation", "Fluency/Grammar"),
    severities={"minor": 1, "major": 5},
    no_error_confirmation=True,
)


def _answer(text: str, spans: list[dict], offsets: str = "utf16", no_error: bool = False):  # type: ignore[no-untyped-def]
    return parse_span_answer({"offsets": offsets, "spans": spans, "no_error": no_error}, text=text, scheme=SCHEME)


def _span(start: int, end: int, severity: str = "minor") -> dict:
    return {"start": start, "end": end, "category": "Fluency/Grammar", "severity": severity}


def test_japanese_without_spaces_is_addressed_by_character() -> None:
    text = "猫が魚を食べた。"
    answer = _answer(text, [_span(2, 3)])
    marked = answer.spans[0].span
    assert text[marked.start : marked.end] == "魚"  # type: ignore[misc]


def test_an_emoji_is_two_browser_units_and_one_stored_character() -> None:
    text = "I 😀 love 🍣 sushi"
    # In the browser "love" starts at unit 5 ("I ", two units of 😀, " "); in Python at index 4.
    answer = _answer(text, [_span(5, 9)])
    marked = answer.spans[0].span
    assert (marked.start, marked.end) == (4, 8)
    assert text[4:8] == "love"
    assert code_points_to_utf16(text, 8) == 9
    # "🍣" itself: units 10..12 in the browser, index 9..10 here.
    assert text[utf16_to_code_points(text, 10) : utf16_to_code_points(text, 12)] == "🍣"


def test_an_offset_between_the_halves_of_a_surrogate_pair_is_refused() -> None:
    with pytest.raises(SpanAnswerInvalid, match="falls inside the character at position 2"):
        _answer("I 😀 x", [_span(3, 5)])


def test_combining_marks_count_as_characters_of_their_own() -> None:
    text = "cafe\u0301 noir"  # "café" written with a combining acute accent: five code points, five UTF-16 units
    answer = _answer(text, [_span(0, 5)])
    marked = answer.spans[0].span
    assert text[marked.start : marked.end] == "cafe\u0301"  # type: ignore[misc]
    assert answer.token()["spans"][0] == {"start": 0, "end": 5, "category": "Fluency/Grammar", "severity": "minor"}


def test_code_point_offsets_are_taken_as_they_are() -> None:
    text = "😀😀 ab"
    answer = _answer(text, [_span(3, 5)], offsets="codepoints")
    assert text[3:5] == "ab"
    assert answer.spans[0].span.start == 3


@pytest.mark.parametrize(
    ("spans", "no_error", "message"),
    [
        ([_span(0, 40)], False, "lies past the end"),
        ([_span(2, 2)], False, "marks no text"),
        ([{**_span(0, 1), "category": "Style"}], False, "unknown error category 'Style'"),
        ([_span(0, 1, severity="critical")], False, "unknown severity 'critical'"),
        ([_span(0, 1)], True, "cannot both have errors and be confirmed free"),
        ([], False, "confirm that it has none"),
        ([{"start": -1, "end": 2, "category": "Fluency/Grammar", "severity": "minor"}], False, "at least 0"),
    ],
)
def test_bad_spans_are_refused_with_the_reason(spans: list[dict], no_error: bool, message: str) -> None:
    with pytest.raises(SpanAnswerInvalid, match=message):
        _answer("short text", spans, no_error=no_error)


def test_unreadable_values_are_refused() -> None:
    for value in ("{not json", '{"spans": 3}', '{"offsets": "bytes", "spans": []}'):
        with pytest.raises(SpanAnswerInvalid):
            parse_span_answer(value, text="x", scheme=SCHEME)


def test_the_score_is_the_weighted_error_count() -> None:
    answer = _answer("a b c", [_span(0, 1, "major"), _span(0, 3, "minor")])
    assert answer.score(SCHEME, "a b c") == 6
    assert _answer("a b c", [], no_error=True).score(SCHEME, "a b c") == 0

"""A span judge's quotes mapped back to offsets in the answer (judging.methods.quotes)."""

import unicodedata

import pytest

from judging.methods.quotes import locate_quote


def _found(text, quote):
    match = locate_quote(text, quote)
    assert match.status == "found", match
    return text[match.start : match.end]


def test_a_quote_found_once_gets_offsets_into_the_stored_text():
    text = "The cat sat on the mat."
    match = locate_quote(text, "sat on")
    assert (match.start, match.end, match.occurrences, match.reason) == (8, 14, 1, None)


def test_missing_empty_and_repeated_quotes_get_no_offsets():
    text = "the cat and the hat"
    assert locate_quote(text, "dog").reason == "not found"
    assert locate_quote(text, "  \n").reason == "empty quote"
    repeated = locate_quote(text, "the")
    assert (repeated.start, repeated.end, repeated.reason) == (None, None, "ambiguous (2 occurrences)")
    # Overlapping occurrences count too.
    assert locate_quote("aaa", "aa").reason == "ambiguous (2 occurrences)"


def test_japanese_without_word_spaces():
    text = "東京は日本の首都です。東京タワーは赤い。"
    assert _found(text, "日本の首都") == "日本の首都"
    assert locate_quote(text, "東京").reason == "ambiguous (2 occurrences)"
    match = locate_quote(text, "タワー")
    assert (match.start, match.end) == (13, 16)


def test_emoji_outside_the_basic_plane_are_one_code_point():
    text = "Great 👍 job 🎉 team"
    match = locate_quote(text, "job 🎉")
    assert (match.start, match.end) == (8, 13)
    assert text[match.start : match.end] == "job 🎉"


def test_whitespace_runs_and_line_breaks_in_the_answer_match_a_single_space():
    text = "first line\n\n  second\tline"
    assert _found(text, "line second line") == "line\n\n  second\tline"
    assert _found(text, "  first   line ") == "first line"


def test_decomposed_answer_matches_a_composed_quote_and_offsets_cover_the_marks():
    text = "Le cafe\u0301 est bon"  # e + combining acute, as some editors store it
    assert _found(text, "café") == "cafe\u0301"
    assert _found(text, unicodedata.normalize("NFD", "café est")) == "cafe\u0301 est"


def test_a_match_never_splits_a_letter_from_its_combining_marks():
    # "q" + combining dot below has no composed form, so it stays two code points; a quote of "q" alone is not the
    # letter the answer shows.
    text = "aq\u0323a"
    assert locate_quote(text, "q").reason == "not found"
    assert _found(text, "q\u0323") == "q\u0323"
    # Korean typed as conjoining jamo is found by its composed syllables.
    jamo = "\u1112\u1161\u11ab\u1100\u116e\u11a8\u110b\u1165"
    assert _found(jamo, "한국") == jamo[:6]
    assert locate_quote(jamo, "하").reason == "not found"


@pytest.mark.parametrize("quote", ["ab", "b c", "c"])
def test_every_found_quote_reads_back_as_itself(quote):
    text = "ab  c"
    assert " ".join(_found(text, quote).split()) == quote


def test_text_that_composes_across_characters_is_compared_as_stored():
    # Oriya vowel signs U+0B47 and U+0B3E are separate characters that NFC composes into U+0B4B. Offsets cut at such
    # a place could fall inside the composed letter, so the answer is compared unnormalised: the stored sequence is
    # found, the composed one is reported missing rather than guessed.
    text = "ab\u0b47\u0b3ecd"
    match = locate_quote(text, "\u0b47\u0b3e")
    assert (match.start, match.end) == (2, 4)
    assert locate_quote(text, "\u0b4b").reason == "not found"
    assert _found(text, "cd") == "cd"

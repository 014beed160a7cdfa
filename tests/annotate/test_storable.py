"""What text a column can hold: the one rule every reader of outside text asks."""

import json

import pytest

from annotations.text.storable import NUL, is_storable, unstorable_character


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain ascii", None),
        ("日本語の回答 😀", None),  # a surrogate pair decodes to one character and is stored as it is
        (json.loads('"\\ud83d\\ude00"'), None),  # the same pair written as JSON escapes
        ("a\x00b", NUL),
        ("\x00" + json.loads('"\\ud800"'), NUL),  # a NUL is named before any surrogate
        ("x" + json.loads('"\\ud800"'), "the lone surrogate U+D800"),
        (json.loads('"ok \\udfff"'), "the lone surrogate U+DFFF"),
    ],
)
def test_unstorable_character_names_the_first_problem(text: str, expected: str | None) -> None:
    assert unstorable_character(text) == expected
    assert is_storable(text) is (expected is None)

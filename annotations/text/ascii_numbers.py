"""Numbers typed into a request, a form or a command line, read in ASCII digits only. Every reader of a number that
arrives as text asks here, so no view reads one on its own.

Python's int() and float() also read other scripts' digits ("３", "٣"), int() refuses superscripts that
str.isdigit() accepts ("²"), and int() refuses more than 4,300 digits with a ValueError; a bounded ASCII pattern
answers each of these with "not a number" instead. Plain Python with no imports beyond re, like
annotations.text.storable.
"""

import re

# A bigint column holds at most 19 digits; 18 keeps every parsed id inside it.
ID_MAX_DIGITS = 18
_ASCII_INTEGER = re.compile(r"-?[0-9]+")
_ASCII_DECIMAL = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")


def ascii_int(text: object, *, max_digits: int = ID_MAX_DIGITS, signed: bool = False) -> int | None:
    """The integer the text spells in ASCII digits (surrounding blanks ignored), or None when it spells none or
    has more than max_digits digits. Without signed, a leading minus is refused too."""
    if not isinstance(text, str):
        return None
    text = text.strip()
    if not _ASCII_INTEGER.fullmatch(text) or (text.startswith("-") and not signed):
        return None
    if len(text.lstrip("-")) > max_digits:
        return None
    return int(text)


def ascii_decimal(text: object, *, max_digits: int = 24) -> float | None:
    """The number the text spells as ASCII digits with an optional sign and decimal point ("12", "-0.5", ".5"), or
    None when it spells none or is longer than max_digits digits. No exponent, no "inf", no "nan"."""
    if not isinstance(text, str):
        return None
    text = text.strip()
    if not _ASCII_DECIMAL.fullmatch(text) or sum(ch.isdigit() for ch in text) > max_digits:
        return None
    return float(text)

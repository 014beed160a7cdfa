"""An annotator's error spans on one answer, as the task form sends them, checked against the exact stored text and
turned into the Rating token and the ErrorSpan rows they are stored as. Nothing here writes.

The form field of a span aspect holds a JSON object:

    {"offsets": "utf16" | "codepoints", "no_error": false,
     "spans": [{"start": 0, "end": 3, "category": "Accuracy/Mistranslation", "severity": "major", "note": ""}]}

A browser counts text in UTF-16 code units, where an emoji outside the Basic Multilingual Plane is two; the site
stores Python ``str`` indices (code points). The page says which unit it used and the offsets are converted here,
explicitly: an offset that falls between the two halves of a surrogate pair is refused, never rounded. The stored
token is the canonical form, always in code points, with no "offsets" key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.utils.translation import gettext as _

from annotations.spans.error_spans import Span
from annotations.spans.schemes import SpanScheme
from annotations.text.storable import is_storable

MAX_SPAN_VALUE_CHARS = 20_000
MAX_SPANS_PER_ANSWER = 200
MAX_NOTE_CHARS = 1_000
OFFSET_UNITS = ("utf16", "codepoints")


class SpanAnswerInvalid(ValueError):
    """What is wrong with a span answer, in words the annotator can act on."""


@dataclass(frozen=True)
class MarkedSpan:
    span: Span
    note: str = ""


@dataclass(frozen=True)
class SpanAnswer:
    spans: tuple[MarkedSpan, ...]
    no_error: bool

    def token(self) -> dict[str, Any]:
        """The Rating's raw token: the answer in code points, as stored and as the form is filled again."""
        spans = []
        for marked in self.spans:
            entry = marked.span.token()
            if marked.note:
                entry["note"] = marked.note
            spans.append(entry)
        return {"no_error": self.no_error, "spans": spans}

    def score(self, scheme: SpanScheme, text: str) -> float:
        return scheme.score((marked.span for marked in self.spans), text)


def is_span_value(text: str) -> bool:
    return text.lstrip().startswith("{")


def utf16_to_code_points(text: str, offset: int) -> int:
    """The code-point index of a UTF-16 offset into ``text``; SpanAnswerInvalid inside a surrogate pair or past the
    end."""
    units = 0
    for index, character in enumerate(text):
        if units == offset:
            return index
        units += 2 if ord(character) > 0xFFFF else 1
        if units > offset:
            raise SpanAnswerInvalid(f"offset {offset} falls inside the character at position {index}")
    if units == offset:
        return len(text)
    raise SpanAnswerInvalid(f"offset {offset} lies past the end of the answer ({units} UTF-16 units)")


def code_points_to_utf16(text: str, offset: int) -> int:
    return len(text[:offset].encode("utf-16-le")) // 2


def _offset(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SpanAnswerInvalid(f"a span's {name} must be a whole number of at least 0, found {value!r}")
    return value


def parse_span_answer(value: Any, *, text: str, scheme: SpanScheme, allow_empty: bool = False) -> SpanAnswer:
    """The span answer in a form value (a JSON string or an already parsed object), checked against the answer text
    and the aspect's scheme; SpanAnswerInvalid names the first problem. An annotator's span must mark some text;
    imported data may hold empty marks (``allow_empty``), kept as they are."""
    if isinstance(value, str):
        if len(value) > MAX_SPAN_VALUE_CHARS:
            raise SpanAnswerInvalid(_("too many spans or notes to save"))
        try:
            value = json.loads(value)
        except ValueError:
            raise SpanAnswerInvalid(_("the marked spans could not be read")) from None
    if not isinstance(value, dict) or not isinstance(value.get("spans", []), list):
        raise SpanAnswerInvalid(_("the marked spans could not be read"))
    unit = value.get("offsets", "codepoints")
    if unit not in OFFSET_UNITS:
        raise SpanAnswerInvalid(f"unknown offset unit {unit!r}")
    no_error = value.get("no_error", False)
    if not isinstance(no_error, bool):
        raise SpanAnswerInvalid("'no error' must be true or false")
    raw_spans = value.get("spans", [])
    if len(raw_spans) > MAX_SPANS_PER_ANSWER:
        raise SpanAnswerInvalid(_("mark at most %(n)s errors in one answer") % {"n": MAX_SPANS_PER_ANSWER})
    spans = []
    for number, raw in enumerate(raw_spans, start=1):
        if not isinstance(raw, dict):
            raise SpanAnswerInvalid(_("error %(number)s could not be read") % {"number": number})
        start, end = raw.get("start"), raw.get("end")
        try:
            if start is not None or end is not None:
                start, end = _offset(start, "start"), _offset(end, "end")
                if unit == "utf16":
                    start, end = utf16_to_code_points(text, start), utf16_to_code_points(text, end)
            span = Span(start, end, str(raw.get("category", "")), str(raw.get("severity", "")))
            span.check_within(len(text))
            if span.located and span.start == span.end and not allow_empty:
                raise SpanAnswerInvalid(_("it marks no text"))
            scheme.check_span(span)
        except ValueError as exc:
            raise SpanAnswerInvalid(_("error %(number)s: %(problem)s") % {"number": number, "problem": exc}) from None
        note = raw.get("note", "")
        if not isinstance(note, str) or len(note) > MAX_NOTE_CHARS or not is_storable(note):
            raise SpanAnswerInvalid(
                _("error %(number)s: the note must be text of at most %(n)s characters")
                % {"number": number, "n": MAX_NOTE_CHARS}
            )
        spans.append(MarkedSpan(span, note.strip()))
    if spans and no_error:
        raise SpanAnswerInvalid(_("the answer cannot both have errors and be confirmed free of errors"))
    if not spans and not no_error and scheme.no_error_confirmation:
        raise SpanAnswerInvalid(_("mark its errors, or confirm that it has none"))
    return SpanAnswer(spans=tuple(spans), no_error=no_error)


def token_spans(raw: Any) -> list[Span]:
    """The spans of a stored span token (a rating's or an adjudication's raw value). Tokens were checked when
    written; an entry that is no longer a span (hand-edited data) is left out rather than guessed."""
    if not isinstance(raw, dict):
        return []
    spans = []
    for entry in raw.get("spans") or []:
        if not isinstance(entry, dict):
            continue
        try:
            spans.append(
                Span(entry.get("start"), entry.get("end"), str(entry.get("category")), str(entry.get("severity")))
            )
        except ValueError:
            continue
    return spans

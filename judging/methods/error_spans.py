"""The error-span judge's pure half: the aspect's MQM scheme as the judge sees it, reading the judge's list of errors,
placing each quoted error in the answer, and the answer's MQM score from them.

The judge quotes each error instead of counting characters (models count characters badly); `quotes.locate_quote`
turns a quote into offsets only when it occurs exactly once. A quote that is not in the answer, or occurs more than
once, keeps no offsets and says why: it is never placed at a guessed occurrence. It still counts in the MQM score,
since the judge did report an error of that category and severity and the penalty does not depend on where the error
sits; it is left out of span agreement, which compares located spans only.

A reply that names a category or severity outside the scheme is unreadable as a whole rather than read in part: a
score built from the errors that happened to be spelled right would look like any other score.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from annotations.spans.error_spans import Span
from annotations.spans.schemes import SpanScheme
from judging.methods.parsing import MAX_PARSE_CHARS, json_objects
from judging.methods.quotes import locate_quote
from judging.records import record_fields


@dataclass(frozen=True)
class JudgedError:
    quote: str
    category: str
    severity: str
    status: str  # quotes.Status: found, not found, ambiguous, empty quote
    start: int | None = None
    end: int | None = None
    occurrences: int = 0

    @property
    def span(self) -> Span:
        return Span(self.start, self.end, self.category, self.severity)

    @property
    def located(self) -> bool:
        return self.status == "found"

    def stored(self) -> dict[str, Any]:
        return record_fields(self, "quote category severity status start end occurrences")

    @classmethod
    def from_stored(cls, data: dict[str, Any]) -> JudgedError:
        return cls(
            quote=str(data.get("quote", "")),
            category=str(data["category"]),
            severity=str(data["severity"]),
            status=str(data["status"]),
            start=data.get("start"),
            end=data.get("end"),
            occurrences=int(data.get("occurrences") or 0),
        )


@dataclass(frozen=True)
class SpanReply:
    ok: bool
    errors: tuple[JudgedError, ...] = ()
    reasoning: str = ""
    error_kind: str = ""
    error: str = ""


_ERRORS_KEY = "errors"


def _refused(kind: str, message: str) -> SpanReply:
    return SpanReply(ok=False, error_kind=kind, error=message)


def _read_item(number: int, item: Any, answer: str, scheme: SpanScheme) -> JudgedError | str:
    if not isinstance(item, dict):
        return f"error {number} is not an object with quote, category and severity"
    quote, category, severity = item.get("quote"), item.get("category"), item.get("severity")
    if not isinstance(quote, str):
        return f"error {number} has no quote string"
    if not isinstance(category, str) or category not in scheme.categories:
        return f"error {number} names category {category!r}, which the scheme does not have"
    if not isinstance(severity, str) or severity not in scheme.severities:
        return f"error {number} names severity {severity!r}; expected one of {', '.join(scheme.severities)}"
    match = locate_quote(answer, quote)
    return JudgedError(
        quote=quote,
        category=category,
        severity=severity,
        status=match.status,
        start=match.start,
        end=match.end,
        occurrences=match.occurrences,
    )


def parse_error_spans(text: str | None, answer: str, scheme: SpanScheme) -> SpanReply:
    """The last JSON object in the reply with an "errors" list, each error placed in the answer.

    Text before the object is kept as the judge's reasoning. An empty list is a reading: the judge found no error.
    """
    raw = (text or "")[:MAX_PARSE_CHARS]
    if not raw.strip():
        return _refused("empty", "the reply is empty")
    found = [(obj, start) for obj, start in json_objects(raw) if isinstance(obj.get(_ERRORS_KEY), list)]
    if not found:
        return _refused("no_errors_list", 'the reply has no JSON object with an "errors" list')
    obj, start = found[-1]
    errors: list[JudgedError] = []
    for number, item in enumerate(obj[_ERRORS_KEY], start=1):
        read = _read_item(number, item, answer, scheme)
        if isinstance(read, str):
            return _refused("bad_error", read)
        errors.append(read)
    return SpanReply(ok=True, errors=tuple(errors), reasoning=raw[:start].strip())


def answer_score(errors: Sequence[JudgedError], answer: str, scheme: SpanScheme) -> float:
    """The MQM score of the answer from every error the judge reported, located or not, by the rule the raters'
    scores follow (the aspect's scheme)."""
    return scheme.score([error.span for error in errors], answer)


def stored_spans(stored: Any) -> list[JudgedError]:
    """A judgment's stored errors; nothing for a judgment of another method."""
    if not isinstance(stored, list):
        return []
    return [JudgedError.from_stored(item) for item in stored if isinstance(item, dict)]


QUOTE_STATUSES = ("found", "not found", "ambiguous", "empty quote")


def quote_placement(stored_lists: Iterable[Any]) -> dict[str, int]:
    """How many of the reported errors' quotes were placed, not found, ambiguous or empty, over many judgments."""
    counts = dict.fromkeys(QUOTE_STATUSES, 0)
    for stored in stored_lists:
        for error in stored_spans(stored):
            counts[error.status] = counts.get(error.status, 0) + 1
    return counts


def _named(key: str, scheme: SpanScheme, language: str) -> str:
    """The name the judge must answer with, and the rubric's own wording of it in the prompt's language."""
    label = scheme.label(key, language)
    return key if label == key else f"{key} ({label})"


def categories_text(scheme: SpanScheme, language: str) -> str:
    return "\n".join(f"- {_named(category, scheme, language)}" for category in scheme.categories)


def severities_text(scheme: SpanScheme, language: str) -> str:
    word = "重み" if language == "ja" else "weight"
    return "\n".join(
        f"- {_named(severity, scheme, language)} ({word} {weight:g})" for severity, weight in scheme.severities.items()
    )

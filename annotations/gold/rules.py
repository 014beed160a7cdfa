"""What a valid gold field is, checked the same way for a JSONL line and for a researcher marking an item by hand,
and how a rater's error spans are judged against the spans a gold item expects.

A gold field: {"kind": "gold" | "attention", "expected": {"<system>": {"<aspect>": value}}, "tolerance": number >= 0,
"instruction": "..."}. kind and expected are required; expected names at least one of the item's systems and, for
each, at least one of the dataset's aspects with a number inside its range; tolerance defaults to 0; an attention
check needs an instruction, and a gold item takes none (it would single the task out).

On a span aspect the value may instead be the errors expected: {"spans": [{"start": 4, "end": 7, "category":
"Fluency/Grammar", "severity": "major"}]}, offsets in code points into the system's answer (``text[start:end]``, as
ErrorSpan stores them), the severity optional, a category either one of the scheme's or a level above some of them
("Fluency"). {"spans": []} expects the answer to have no error. Such an item has one turn, so each system has one
answer the offsets point into.

The span rule (``span_gold_verdict``): a rater passes when every expected span is matched by one of their spans that
overlaps it by at least one character, whose category is the expected one or lies under it (expected "Fluency"
accepts "Fluency/Grammar"; expected "Fluency/Grammar" accepts only itself) and, when the expected span names a
severity, has that severity. One rater span may match several expected spans. Extra rater spans, which match no
expected span, do not fail the answer (a gold item lists the errors it is sure of, not every possible one); they are
counted and shown. When no error is expected, the answer passes only if the rater marked none. A missing rating (not
answered, N/A) fails.
"""

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from annotations.rubrics.specs import format_number, is_json_number
from annotations.spans.error_spans import Span, category_within
from annotations.spans.schemes import SpanScheme

SPAN_GOLD_MAX = 200

GOLD_KEY = "gold"  # the item-level field of a JSONL line
GOLD_KEYS = ("kind", "expected", "tolerance", "instruction")
GOLD_KINDS = ("gold", "attention")
INSTRUCTION_MAX_CHARS = 2000


@dataclass(frozen=True)
class GoldProblem:
    field: str  # where, from the gold field down: "gold.expected.sys_a.factuality"
    expected: str
    found: str


@dataclass(frozen=True)
class GoldSpec:
    kind: str
    expected: dict[str, dict[str, Any]]
    tolerance: float
    instruction: str


def _found(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {format_number(value)}"
    if isinstance(value, str):
        return f"the string {value[:60]!r}"
    if isinstance(value, list):
        return "a list"
    return "an object"


@dataclass(frozen=True)
class GoldSpan:
    start: int
    end: int
    category: str
    severity: str | None = None


def _known_category(category: str, scheme: SpanScheme) -> bool:
    return any(category_within(category, known) for known in scheme.categories)


def _is_offset(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _span_expectation_problem(value: Any, *, here: str, scheme: SpanScheme, text: str | None) -> GoldProblem | None:
    if set(value) != {"spans"} or not isinstance(value["spans"], list):
        return GoldProblem(here, 'an object with only "spans", a list of the errors expected', _found(value))
    spans = value["spans"]
    if len(spans) > SPAN_GOLD_MAX:
        return GoldProblem(f"{here}.spans", f"at most {SPAN_GOLD_MAX} expected errors", f"{len(spans)}")
    if text is None:
        return GoldProblem(here, "an item with one turn, whose answers the offsets point into", "more turns")
    for index, span in enumerate(spans):
        at = f"{here}.spans[{index}]"
        if not isinstance(span, dict) or not {"start", "end", "category"} <= set(span) <= {
            "start",
            "end",
            "category",
            "severity",
        }:
            return GoldProblem(at, "an object with start, end, category and an optional severity", _found(span))
        start, end = span["start"], span["end"]
        if not _is_offset(start) or not _is_offset(end) or not start < end <= len(text):
            return GoldProblem(
                at,
                f"offsets with 0 <= start < end <= {len(text)}, the length of the answer in characters",
                f"{_found(start)} to {_found(end)}",
            )
        category = span["category"]
        if not isinstance(category, str) or not _known_category(category, scheme):
            return GoldProblem(
                f"{at}.category", f"a category of the aspect or a level above one ({', '.join(scheme.categories)})",
                _found(category),
            )  # fmt: skip
        severity = span.get("severity")
        if severity is not None and severity not in scheme.severities:
            return GoldProblem(
                f"{at}.severity", f"a severity of the aspect ({', '.join(scheme.severities)})", _found(severity)
            )
    return None


def gold_spans(value: Mapping[str, Any]) -> tuple[GoldSpan, ...]:
    """The expected spans of a span expectation that gold_problem accepted."""
    return tuple(
        GoldSpan(span["start"], span["end"], span["category"], span.get("severity")) for span in value["spans"]
    )


def is_span_expectation(value: Any) -> bool:
    return isinstance(value, dict) and "spans" in value


def expected_span_pairs(
    expected: Mapping[str, Any], *, systems: Collection[str], aspects: Collection[str]
) -> dict[tuple[str, str], tuple[GoldSpan, ...]]:
    """The (system, span aspect) pairs a gold field expects errors for, among the systems and aspects given."""
    return {
        (system, aspect): gold_spans(value)
        for system, by_aspect in expected.items()
        if system in systems and isinstance(by_aspect, dict)
        for aspect, value in by_aspect.items()
        if aspect in aspects and is_span_expectation(value)
    }


@dataclass(frozen=True)
class SpanGoldVerdict:
    passed: bool
    expected: int  # spans expected (0: no error expected)
    matched: int  # of those, matched by a rater span
    extra: int  # rater spans that match no expected span
    missing: tuple[GoldSpan, ...]  # expected spans no rater span matched
    answered: bool


def _matches(expected: GoldSpan, given: Span, *, with_severity: bool) -> bool:
    if given.start is None or given.end is None:
        return False
    overlap = min(expected.end, given.end) - max(expected.start, given.start)
    if overlap < 1 or not category_within(expected.category, given.category):
        return False
    return not with_severity or expected.severity is None or expected.severity == given.severity


def span_gold_verdict(expected: Sequence[GoldSpan], given: Sequence[Span] | None) -> SpanGoldVerdict:
    """A rater's spans (None: no answer) against a gold item's expected spans, by the rule in the module docstring."""
    if given is None:
        return SpanGoldVerdict(False, len(expected), 0, 0, tuple(expected), answered=False)
    if not expected:
        return SpanGoldVerdict(not given, 0, 0, len(given), (), answered=True)
    missing = tuple(e for e in expected if not any(_matches(e, g, with_severity=True) for g in given))
    extra = sum(1 for g in given if not any(_matches(e, g, with_severity=False) for e in expected))
    return SpanGoldVerdict(not missing, len(expected), len(expected) - len(missing), extra, missing, answered=True)


def gold_problem(
    gold: Any,
    *,
    systems: Collection[str],
    aspects: Mapping[str, tuple[float, float]],
    where: str = "gold",
    schemes: Mapping[str, SpanScheme] | None = None,
    texts: Mapping[str, str] | None = None,
) -> GoldProblem | None:
    """The first problem of a gold field for an item answered by `systems`, in a dataset whose aspects have the
    ranges given (name: (min, max)); None when it is valid. `schemes` names the span aspects, whose value may be the
    errors expected; `texts` gives each system's answer when the item has one turn (offsets point into it)."""
    if not isinstance(gold, dict):
        return GoldProblem(where, "an object with kind, expected, tolerance and instruction", _found(gold))
    for key in gold:
        if key not in GOLD_KEYS:
            return GoldProblem(f"{where}.{key}", f"only the keys {', '.join(GOLD_KEYS)}", f"the key {key!r}")
    kind = gold.get("kind")
    if kind not in GOLD_KINDS:
        return GoldProblem(f"{where}.kind", '"gold" or "attention"', _found(kind))
    expected = gold.get("expected")
    if not isinstance(expected, dict) or not expected:
        return GoldProblem(f"{where}.expected", "an object mapping system keys to expected values", _found(expected))
    for system, values in expected.items():
        here = f"{where}.expected.{system}"
        if system not in systems:
            known = ", ".join(sorted(systems)) or "none"
            return GoldProblem(here, f"a system that answered this item ({known})", f"the system {system!r}")
        if not isinstance(values, dict) or not values:
            return GoldProblem(here, "an object mapping aspect names to expected values", _found(values))
        for aspect, value in values.items():
            if aspect not in aspects:
                known = ", ".join(aspects) or "none"
                return GoldProblem(f"{here}.{aspect}", f"an aspect of the rubric ({known})", f"the aspect {aspect!r}")
            scheme = (schemes or {}).get(aspect)
            if scheme is not None and isinstance(value, dict):
                problem = _span_expectation_problem(
                    value, here=f"{here}.{aspect}", scheme=scheme, text=(texts or {}).get(system)
                )
                if problem is not None:
                    return problem
                continue
            low, high = aspects[aspect]
            if not is_json_number(value) or not low <= value <= high:
                span = f"a number from {format_number(low)} to {format_number(high)}"
                return GoldProblem(f"{here}.{aspect}", span, _found(value))
    tolerance = gold.get("tolerance", 0)
    if not is_json_number(tolerance) or tolerance < 0:
        return GoldProblem(f"{where}.tolerance", "a number of at least 0", _found(tolerance))
    instruction = gold.get("instruction", "")
    if not isinstance(instruction, str) or len(instruction) > INSTRUCTION_MAX_CHARS:
        return GoldProblem(
            f"{where}.instruction", f"a string of at most {INSTRUCTION_MAX_CHARS} characters", _found(instruction)
        )
    if kind == "attention" and not instruction.strip():
        return GoldProblem(f"{where}.instruction", "an instruction for an attention check", _found(instruction))
    if kind == "gold" and instruction:
        return GoldProblem(
            f"{where}.instruction",
            "no instruction on a gold item (only attention checks show one)",
            _found(instruction),
        )
    return None


def gold_spec(gold: dict[str, Any]) -> GoldSpec:
    """A gold field that gold_problem accepted, with its defaults filled in."""
    return GoldSpec(
        kind=gold["kind"],
        expected=gold["expected"],
        tolerance=float(gold.get("tolerance", 0)),
        instruction=gold.get("instruction", ""),
    )


def gold_field(*, kind: str, expected: dict[str, Any], tolerance: float, instruction: str) -> dict[str, Any]:
    """A stored gold item as the JSONL field: what importing gives back unchanged."""
    field: dict[str, Any] = {
        "kind": kind,
        "expected": expected,
        "tolerance": int(tolerance) if float(tolerance).is_integer() else tolerance,
    }
    if instruction:
        field["instruction"] = instruction
    return field

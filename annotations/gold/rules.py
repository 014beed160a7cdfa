"""What a valid gold field is, checked the same way for a JSONL line and for a researcher marking an item by hand.

A gold field: {"kind": "gold" | "attention", "expected": {"<system>": {"<aspect>": value}}, "tolerance": number >= 0,
"instruction": "..."}. kind and expected are required; expected names at least one of the item's systems and, for
each, at least one of the dataset's aspects with a number inside its range; tolerance defaults to 0; an attention
check needs an instruction, and a gold item takes none (it would single the task out).
"""

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from annotations.rubrics import format_number, is_json_number

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
    expected: dict[str, dict[str, float | int]]
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


def gold_problem(
    gold: Any, *, systems: Collection[str], aspects: Mapping[str, tuple[float, float]], where: str = "gold"
) -> GoldProblem | None:
    """The first problem of a gold field for an item answered by `systems`, in a dataset whose aspects have the
    ranges given (name: (min, max)); None when it is valid."""
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


# Ratings are stored as floats: a value the tolerance admits exactly must not fail on rounding (0.1 + 0.2).
_ROUNDING = 1e-9


def gold_value_passes(*, value: float | None, expected: float, tolerance: float) -> bool:
    """Whether one rating of a gold answer passes: within the tolerance of the expected value. A missing rating
    (N/A) never passes."""
    if value is None:
        return False
    return abs(value - expected) <= tolerance + _ROUNDING

"""Rubric files, the built-in presets and inference of a rubric from data."""

import json
import math
from dataclasses import dataclass, field
from typing import Any

from annotations.errors import RubricError
from annotations.models import MeasurementLevel

DEFAULT_MISSING: list[Any] = [None, "NA"]


@dataclass(frozen=True)
class AspectSpec:
    name: str
    min_value: float
    max_value: float
    ideal: float
    level: str = MeasurementLevel.ORDINAL
    label: str = ""
    description: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    missing: list[Any] = field(default_factory=lambda: list(DEFAULT_MISSING))

    def is_missing_token(self, token: Any) -> bool:
        return any(same_json_token(token, code) for code in self.missing)

    def describe_range(self) -> str:
        codes = ", ".join(json.dumps(code, ensure_ascii=False) for code in self.missing)
        scale = f"[{format_number(self.min_value)}, {format_number(self.max_value)}]"
        return f"a number in {scale} or a missing code ({codes})"


@dataclass(frozen=True)
class RubricSpec:
    aspects: list[AspectSpec]
    systems: dict[str, str]
    source: str

    def aspect(self, name: str) -> AspectSpec | None:
        for aspect in self.aspects:
            if aspect.name == name:
                return aspect
        return None


def same_json_token(a: Any, b: Any) -> bool:
    # 0 == False in Python; a missing code 0 must not swallow a JSON false, nor 1 a true.
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def format_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def is_json_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


LLM_HUMAN_EVAL_JP_SYSTEMS = {
    "llm_g": "meta-llama/Meta-Llama-3-8B-Instruct",
    "llm_j": "tokyotech-llm/Llama-3-Swallow-8B-Instruct-v0.1",
    "llm_f": "tokyotech-llm/Llama-3-Swallow-70B-Instruct-v0.1",
    "llm_i": "elyza/Llama-3-ELYZA-JP-8B",
    "llm_b": "llm-jp/llm-jp-13b-instruct-full-ac_001_16x-dolly-ichikara_004_001_single-oasst-oasst2-v2.0",
    "llm_e": "llm-jp/llm-jp-13b-instruct-full-dolly-ichikara_004_001_single-oasst-oasst2-v2.0",
    "llm_c": "cyberagent/calm3-22b-chat",
    "llm_a": "openai/gpt-35-turbo-1106",
    "llm_h": "openai/gpt-4-0613",
    "llm_d": "anthropic/anthropic.claude-3-5-sonnet-20240620-v1:0",
}

_JP_MISSING: list[Any] = [None, "NA", 0]


def _jp_aspect(name: str, label: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "description": description,
        "min": 1,
        "max": 5,
        "ideal": 5,
        "level": "ordinal",
        "labels": {"1": "very poor", "3": "acceptable", "5": "excellent"},
        "missing": _JP_MISSING,
    }


PRESETS: dict[str, dict[str, Any]] = {
    "llm-human-eval-jp": {
        "aspects": [
            _jp_aspect("detailedness", "Detailedness", "Does the answer give enough specific detail for the request?"),
            _jp_aspect("factuality", "Factuality", "Are the statements in the answer true and free of fabrication?"),
            _jp_aspect("fluency", "Fluency", "Is the Japanese natural, grammatical and easy to read?"),
            _jp_aspect("relevance", "Relevance", "Does the answer address what the prompt actually asks?"),
            _jp_aspect("overall", "Overall", "Taking everything into account, how good is the answer?"),
        ],
        "systems": LLM_HUMAN_EVAL_JP_SYSTEMS,
    },
    "lfqa-multiaspect": {
        "aspects": [
            {
                "name": "factuality",
                "label": "Factuality",
                "min": 0,
                "max": 3,
                "ideal": 3,
                "level": "ordinal",
                "description": "How accurate are the claims in the answer?",
                "labels": {"0": "mostly inaccurate", "1": "several errors", "2": "minor errors", "3": "accurate"},
            },
            {
                "name": "acceptability",
                "label": "Acceptability",
                "min": 0,
                "max": 3,
                "ideal": 3,
                "level": "ordinal",
                "description": "Overall, would you accept this answer as a reply to the question?",
                "labels": {"0": "unacceptable", "1": "poor", "2": "acceptable", "3": "excellent"},
            },
            {
                "name": "amount_info",
                "label": "Amount of information",
                "min": -1,
                "max": 1,
                "ideal": 0,
                "level": "ordinal",
                "description": "Is the amount of information too little, right, or too much?",
                "labels": {"-1": "too little", "0": "just right", "1": "too much"},
            },
            {
                "name": "formality",
                "label": "Formality",
                "min": -1,
                "max": 1,
                "ideal": 0,
                "level": "ordinal",
                "description": "Is the register too casual, appropriate, or too stiff?",
                "labels": {"-1": "too casual", "0": "appropriate", "1": "too stiff"},
            },
        ],
        "systems": {},
    },
}


def _require_number(raw: dict[str, Any], key: str, where: str) -> float:
    value = raw.get(key)
    if not is_json_number(value):
        raise RubricError(f"{where}: '{key}' must be a number, found {json.dumps(value, ensure_ascii=False)}")
    return float(value)  # type: ignore[arg-type]


RUBRIC_MAX_BYTES = 1024 * 1024
RUBRIC_MAX_DEPTH = 16


def _check_text(text: str, where: str) -> None:
    if "\x00" in text:
        raise RubricError(f"{where[:120]}: text contains a NUL character (U+0000)")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise RubricError(f"{where[:120]}: text contains an unpaired surrogate") from None


def _check_storable(data: Any) -> None:
    """NUL, unpaired surrogates and NaN/Infinity cannot be stored (Postgres text and jsonb refuse them); caught here
    they are a message, at write time they were a server error."""
    stack: list[tuple[Any, str, int]] = [(data, "rubric", 1)]
    while stack:
        node, where, depth = stack.pop()
        if depth > RUBRIC_MAX_DEPTH:
            raise RubricError(f"{where[:120]}: nested more than {RUBRIC_MAX_DEPTH} levels")
        if isinstance(node, str):
            _check_text(node, where)
        elif isinstance(node, float) and not math.isfinite(node):
            raise RubricError(f"{where[:120]}: {node} is not a finite number")
        elif isinstance(node, dict):
            for key, value in node.items():
                _check_text(str(key), where)
                stack.append((value, f"{where}.{key}", depth + 1))
        elif isinstance(node, list):
            stack.extend((value, f"{where}[{index}]", depth + 1) for index, value in enumerate(node))


def _reject_constant(token: str) -> Any:
    raise ValueError(f"{token} is not valid JSON")


def load_rubric_bytes(raw: bytes, *, origin: str = "rubric file") -> RubricSpec:
    """A rubric from an upload or a file, size-capped and without the ways json.loads can crash (deep nesting)."""
    if len(raw) > RUBRIC_MAX_BYTES:
        raise RubricError(f"{origin} is larger than {RUBRIC_MAX_BYTES} bytes")
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError included
        raise RubricError(f"{origin} is not UTF-8 JSON: {exc}") from None
    except RecursionError:
        raise RubricError(f"{origin} is nested too deeply") from None
    return parse_rubric(data, source="file")


def parse_rubric(data: Any, *, source: str) -> RubricSpec:
    if not isinstance(data, dict):
        raise RubricError("rubric: expected a JSON object with an 'aspects' list")
    _check_storable(data)
    raw_aspects = data.get("aspects")
    if not isinstance(raw_aspects, list) or not raw_aspects:
        raise RubricError("rubric: 'aspects' must be a non-empty list")
    aspects: list[AspectSpec] = []
    seen: set[str] = set()
    for index, raw in enumerate(raw_aspects):
        where = f"rubric aspects[{index}]"
        if not isinstance(raw, dict):
            raise RubricError(f"{where}: expected an object")
        name = raw.get("name")
        if not isinstance(name, str) or not name.strip():
            raise RubricError(f"{where}: 'name' must be a non-empty string")
        if name in seen:
            raise RubricError(f"{where}: aspect name {name!r} appears twice")
        seen.add(name)
        lo = _require_number(raw, "min", where)
        hi = _require_number(raw, "max", where)
        if lo >= hi:
            raise RubricError(f"{where}: 'min' ({format_number(lo)}) must be below 'max' ({format_number(hi)})")
        ideal = _require_number(raw, "ideal", where) if "ideal" in raw else hi
        if not lo <= ideal <= hi:
            raise RubricError(
                f"{where}: 'ideal' {format_number(ideal)} lies outside [{format_number(lo)}, {format_number(hi)}]"
            )
        level = raw.get("level", MeasurementLevel.ORDINAL)
        if level not in MeasurementLevel.values:
            raise RubricError(f"{where}: 'level' must be one of {', '.join(MeasurementLevel.values)}, found {level!r}")
        labels = raw.get("labels", {})
        if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
            raise RubricError(f"{where}: 'labels' must map values to strings")
        missing = raw.get("missing", list(DEFAULT_MISSING))
        if not isinstance(missing, list) or any(isinstance(code, (dict, list)) for code in missing):
            raise RubricError(f"{where}: 'missing' must be a list of scalar tokens")
        # A code that is also a valid score would silently turn every such score into a missing value.
        for code in missing:
            if is_json_number(code) and lo <= code <= hi:
                raise RubricError(
                    f"{where}: missing code {format_number(code)} lies inside the scale "
                    f"[{format_number(lo)}, {format_number(hi)}], so every {format_number(code)} would be read as "
                    'missing; use a code outside the scale, such as "NA" or null'
                )
        for text_key in ("label", "description"):
            if text_key in raw and not isinstance(raw[text_key], str):
                raise RubricError(f"{where}: '{text_key}' must be a string")
        aspects.append(
            AspectSpec(
                name=name,
                min_value=lo,
                max_value=hi,
                ideal=ideal,
                level=level,
                label=raw.get("label", ""),
                description=raw.get("description", ""),
                labels={str(k): v for k, v in labels.items()},
                missing=missing,
            )
        )
    systems = data.get("systems", {})
    if not isinstance(systems, dict) or not all(isinstance(v, str) for v in systems.values()):
        raise RubricError("rubric: 'systems' must map system keys to model names")
    return RubricSpec(aspects=aspects, systems=dict(systems), source=source)


def preset_rubric(name: str) -> RubricSpec:
    if name not in PRESETS:
        raise RubricError(f"unknown preset {name!r}; choose one of {', '.join(sorted(PRESETS))}")
    return parse_rubric(PRESETS[name], source=f"preset:{name}")


def load_rubric_file(path: str) -> RubricSpec:
    try:
        with open(path, "rb") as handle:
            raw = handle.read(RUBRIC_MAX_BYTES + 1)
    except OSError as exc:
        raise RubricError(f"rubric file {path}: {exc}") from None
    return load_rubric_bytes(raw, origin=f"rubric file {path}")


def infer_rubric(observed: dict[str, tuple[float, float]]) -> RubricSpec:
    """Aspects seen in the data become 1-5 ordinal scales, widened only when the data demands it."""
    aspects = []
    for name, (lo, hi) in observed.items():
        low = min(1.0, lo) if lo == lo else 1.0
        high = max(5.0, hi) if hi == hi else 5.0
        aspects.append(AspectSpec(name=name, min_value=low, max_value=high, ideal=high))
    return RubricSpec(aspects=aspects, systems={}, source="inferred")

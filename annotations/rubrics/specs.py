"""Rubric files, the built-in presets and inference of a rubric from data."""

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from annotations.errors import RubricError
from annotations.models import AspectKind, MeasurementLevel
from annotations.spans.schemes import DEFAULT_MAX_SCORE, SpanScheme, parse_span_scheme
from annotations.text.storable import NUL, unstorable_character

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
    # Other languages' texts: {"ja": {"label": ..., "description": ..., "labels": {value: text}}}.
    translations: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The scale's spacing when only some values of [min, max] are scores (1: whole numbers from min); None: any.
    step: float | None = None
    kind: str = AspectKind.SCALE
    # A span aspect's categories, severities and normalisation; its value is the MQM score they give, 0 the ideal.
    span_scheme: SpanScheme | None = None

    def is_missing_token(self, token: Any) -> bool:
        return any(same_json_token(token, code) for code in self.missing)

    def describe_range(self) -> str:
        codes = ", ".join(json.dumps(code, ensure_ascii=False) for code in self.missing)
        scale = f"[{format_number(self.min_value)}, {format_number(self.max_value)}]"
        if self.step is not None:
            scale += f" in steps of {format_number(self.step)} from {format_number(self.min_value)}"
        return f"a number in {scale} or a missing code ({codes})"

    def on_scale(self, value: float) -> bool:
        """Within [min, max] and, with a step, on one of its values."""
        if not self.min_value <= value <= self.max_value:
            return False
        if self.step is None:
            return True
        steps = (value - self.min_value) / self.step
        return abs(steps - round(steps)) <= 1e-9 * max(1.0, abs(steps))


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


def _both(en: str, ja: str) -> dict[str, str]:
    return {"en": en, "ja": ja}


def _jp_aspect(name: str, label: dict[str, str], description: dict[str, str]) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "description": description,
        "min": 1,
        "max": 5,
        "ideal": 5,
        "level": "ordinal",
        "labels": {
            "1": _both("very poor", "非常に悪い"),
            "3": _both("acceptable", "許容できる"),
            "5": _both("excellent", "非常に良い"),
        },
        "missing": _JP_MISSING,
    }


PRESETS: dict[str, dict[str, Any]] = {
    "llm-human-eval-jp": {
        "aspects": [
            _jp_aspect(
                "detailedness",
                _both("Detailedness", "詳細さ"),
                _both(
                    "Does the answer give enough specific detail for the request?",
                    "依頼に対して十分に具体的な内容が書かれているか。",
                ),
            ),
            _jp_aspect(
                "factuality",
                _both("Factuality", "正確さ"),
                _both(
                    "Are the statements in the answer true and free of fabrication?",
                    "回答の記述は正しく、捏造を含まないか。",
                ),
            ),
            _jp_aspect(
                "fluency",
                _both("Fluency", "流暢さ"),
                _both(
                    "Is the Japanese natural, grammatical and easy to read?",
                    "日本語が自然で、文法的に正しく、読みやすいか。",
                ),
            ),
            _jp_aspect(
                "relevance",
                _both("Relevance", "関連性"),
                _both(
                    "Does the answer address what the prompt actually asks?",
                    "プロンプトが実際に求めていることに答えているか。",
                ),
            ),
            _jp_aspect(
                "overall",
                _both("Overall", "総合評価"),
                _both(
                    "Taking everything into account, how good is the answer?",
                    "すべてを考慮して、回答はどの程度良いか。",
                ),
            ),
        ],
        "systems": LLM_HUMAN_EVAL_JP_SYSTEMS,
    },
    "lfqa-multiaspect": {
        "aspects": [
            {
                "name": "factuality",
                "label": _both("Factuality", "正確さ"),
                "min": 0,
                "max": 3,
                "ideal": 3,
                "level": "ordinal",
                "description": _both("How accurate are the claims in the answer?", "回答の主張はどの程度正確か。"),
                "labels": {
                    "0": _both("mostly inaccurate", "ほとんど不正確"),
                    "1": _both("several errors", "誤りが複数ある"),
                    "2": _both("minor errors", "小さな誤りがある"),
                    "3": _both("accurate", "正確"),
                },
            },
            {
                "name": "acceptability",
                "label": _both("Acceptability", "受容性"),
                "min": 0,
                "max": 3,
                "ideal": 3,
                "level": "ordinal",
                "description": _both(
                    "Overall, would you accept this answer as a reply to the question?",
                    "全体として、この回答を質問への返答として受け入れられるか。",
                ),
                "labels": {
                    "0": _both("unacceptable", "受け入れられない"),
                    "1": _both("poor", "不十分"),
                    "2": _both("acceptable", "受け入れられる"),
                    "3": _both("excellent", "非常に良い"),
                },
            },
            {
                "name": "amount_info",
                "label": _both("Amount of information", "情報量"),
                "min": -1,
                "max": 1,
                "ideal": 0,
                "level": "ordinal",
                "description": _both(
                    "Is the amount of information too little, right, or too much?",
                    "情報量は少なすぎるか、適切か、多すぎるか。",
                ),
                "labels": {
                    "-1": _both("too little", "少なすぎる"),
                    "0": _both("just right", "適切"),
                    "1": _both("too much", "多すぎる"),
                },
            },
            {
                "name": "formality",
                "label": _both("Formality", "文体の丁寧さ"),
                "min": -1,
                "max": 1,
                "ideal": 0,
                "level": "ordinal",
                "description": _both(
                    "Is the register too casual, appropriate, or too stiff?", "文体はくだけすぎか、適切か、堅すぎるか。"
                ),
                "labels": {
                    "-1": _both("too casual", "くだけすぎ"),
                    "0": _both("appropriate", "適切"),
                    "1": _both("too stiff", "堅すぎる"),
                },
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
    bad = unstorable_character(text)
    if bad == NUL:
        raise RubricError(f"{where[:120]}: text contains a NUL character (U+0000)")
    if bad:
        raise RubricError(f"{where[:120]}: text contains an unpaired surrogate")


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


LANGUAGE_TAG = re.compile(r"^[a-z]{2,3}(-[A-Za-z0-9]{2,8})?$")
DEFAULT_TEXT_LANGUAGE = "en"


@dataclass(frozen=True)
class AspectTexts:
    label: str
    description: str
    labels: dict[str, str]
    translations: dict[str, dict[str, Any]]


def _language_variants(value: Any, where: str) -> dict[str, str]:
    """A text as {language: text}: a plain string is the default language's; an object gives one per language."""
    if isinstance(value, str):
        return {"": value}
    if isinstance(value, dict) and value:
        for language, text in value.items():
            if not LANGUAGE_TAG.match(language):
                raise RubricError(f'{where}: {language!r} is not a language code such as "en" or "ja"')
            if not isinstance(text, str):
                raise RubricError(f"{where}: the {language!r} text must be a string")
        return dict(value)
    raise RubricError(
        f'{where}: expected a string or an object of texts per language, such as {{"en": ..., "ja": ...}}'
    )


def _aspect_texts(raw: dict[str, Any], labels: dict[Any, Any], where: str) -> AspectTexts:
    """Splits label, description and value labels into the default text and the other languages'.

    The default is the plain string, else the English text, else the first language given; every other language
    is kept under translations, so an export writes back exactly what was read."""
    variants = {
        "label": _language_variants(raw.get("label", ""), f"{where}: 'label'"),
        "description": _language_variants(raw.get("description", ""), f"{where}: 'description'"),
    }
    value_variants = {
        str(value): _language_variants(text, f"{where}: 'labels' {value!r}") for value, text in labels.items()
    }
    languages: list[str] = []
    for found in [*variants.values(), *value_variants.values()]:
        languages += [language for language in found if language and language not in languages]
    default = "" if not languages else (DEFAULT_TEXT_LANGUAGE if DEFAULT_TEXT_LANGUAGE in languages else languages[0])

    def default_text(found: dict[str, str]) -> str:
        return found.get(default, found.get("", ""))

    translations: dict[str, dict[str, Any]] = {}
    for language in languages:
        if language == default:
            continue
        entry: dict[str, Any] = {}
        for key in ("label", "description"):
            if language in variants[key]:
                entry[key] = variants[key][language]
        value_texts = {value: found[language] for value, found in value_variants.items() if language in found}
        if value_texts:
            entry["labels"] = value_texts
        translations[language] = entry
    if default:
        # Remembered so that the export writes the default text under its language again.
        translations.setdefault("_default", {"language": default})
    return AspectTexts(
        label=default_text(variants["label"]),
        description=default_text(variants["description"]),
        labels={value: default_text(found) for value, found in value_variants.items()},
        translations=translations,
    )


def aspect_rubric_texts(
    *, label: str, description: str, labels: dict[str, str], translations: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The rubric fields of an aspect as they were written: plain strings, or objects per language."""
    default = (translations.get("_default") or {}).get("language")
    others = {language: entry for language, entry in translations.items() if language != "_default"}
    if not default:
        return {"label": label, "description": description, "labels": dict(labels)}

    def variants(default_text: str, key: str) -> dict[str, str] | str:
        found = {default: default_text} if default_text else {}
        found.update({language: entry[key] for language, entry in others.items() if key in entry})
        return found or ""

    value_labels: dict[str, Any] = {}
    for value, text in labels.items():
        found = {default: text}
        found.update(
            {language: entry["labels"][value] for language, entry in others.items() if value in entry.get("labels", {})}
        )
        value_labels[value] = found
    return {
        "label": variants(label, "label"),
        "description": variants(description, "description"),
        "labels": value_labels,
    }


def _aspect_kind(raw: dict[str, Any], where: str) -> tuple[str, SpanScheme | None, dict[str, Any]]:
    """The aspect's kind, its span scheme, and its fields with a span aspect's scale filled in."""
    kind = raw.get("kind", AspectKind.SCALE)
    if kind not in AspectKind.values:
        raise RubricError(f"{where}: 'kind' must be one of {', '.join(AspectKind.values)}, found {kind!r}")
    if kind == AspectKind.SCALE:
        if "spans" in raw:
            raise RubricError(f'{where}: \'spans\' belongs to an aspect of kind "spans"; add "kind": "spans"')
        return kind, None, raw
    scheme = parse_span_scheme(raw.get("spans"), where=where)
    if raw.get("min", 0) != 0:
        raise RubricError(f"{where}: a span aspect's scores start at 0 (no error), found 'min' {raw['min']!r}")
    # A score is a weighted error count: 0 is no error and the best, whatever the rubric writes.
    return kind, scheme, {"min": 0, "max": DEFAULT_MAX_SCORE, "level": MeasurementLevel.RATIO, **raw, "ideal": 0}


def parse_rubric(data: Any, *, source: str) -> RubricSpec:
    if not isinstance(data, dict):
        raise RubricError("rubric: expected a JSON object with an 'aspects' list")
    _check_storable(data)
    raw_aspects = data.get("aspects")
    # An empty list is a rubric too: a dataset of preferences alone has no aspects, and its rubric file must import.
    if not isinstance(raw_aspects, list):
        raise RubricError("rubric: 'aspects' must be a list")
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
        kind, scheme, raw = _aspect_kind(raw, where)
        lo = _require_number(raw, "min", where)
        hi = _require_number(raw, "max", where)
        if lo >= hi:
            raise RubricError(f"{where}: 'min' ({format_number(lo)}) must be below 'max' ({format_number(hi)})")
        ideal = _require_number(raw, "ideal", where) if "ideal" in raw else hi
        if not lo <= ideal <= hi:
            raise RubricError(
                f"{where}: 'ideal' {format_number(ideal)} lies outside [{format_number(lo)}, {format_number(hi)}]"
            )
        step = _require_number(raw, "step", where) if "step" in raw else None
        if step is not None and (step <= 0 or not AspectSpec(name, lo, hi, hi, step=step).on_scale(hi)):
            raise RubricError(
                f"{where}: 'step' must be a positive number that divides the scale [{format_number(lo)}, "
                f"{format_number(hi)}] evenly, found {format_number(step)}"
            )
        level = raw.get("level", MeasurementLevel.ORDINAL)
        if level not in MeasurementLevel.values:
            raise RubricError(f"{where}: 'level' must be one of {', '.join(MeasurementLevel.values)}, found {level!r}")
        labels = raw.get("labels", {})
        if not isinstance(labels, dict):
            raise RubricError(f"{where}: 'labels' must map values to texts")
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
        texts = _aspect_texts(raw, labels, where)
        aspects.append(
            AspectSpec(
                name=name,
                min_value=lo,
                max_value=hi,
                ideal=ideal,
                level=level,
                label=texts.label,
                description=texts.description,
                labels=texts.labels,
                missing=missing,
                translations=texts.translations,
                step=step,
                kind=kind,
                span_scheme=scheme,
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

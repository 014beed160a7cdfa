"""The first pass of the JSONL import: reading the lines (one JSON value each, bounded in depth, with storable
text only) and checking every item against the rubric, without touching the database. An error names the line."""

import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from django.conf import settings

from annotations.datasets.exporting import RATER_EXCLUDED_KEY
from annotations.errors import DatasetImportError
from annotations.gold.rules import GOLD_KEY, gold_problem
from annotations.rubrics.specs import (
    DEFAULT_MISSING,
    AspectSpec,
    RubricSpec,
    is_json_number,
    same_json_token,
)
from annotations.spans.answers import SpanAnswerInvalid, parse_span_answer
from annotations.text.storable import NUL, unstorable_character

UTF8_BOM = b"\xef\xbb\xbf"
# The reason recorded on the exclusions an import makes from the file's marks; the file carries no reason.
IMPORTED_EXCLUSION_REASON = "Marked rater_excluded in the imported file."
NAME_MAX_CHARS = 200  # Aspect.name, Judge.name and JudgeScore.aspect_name columns


@dataclass
class ValidationState:
    rubric: RubricSpec | None
    seen_ids: set[str] = field(default_factory=set)
    # Named rater ids that look like positional ones ("#2"), and the widest rating list without a "raters" list.
    hash_rater_ids: set[str] = field(default_factory=set)
    positional_width: int = 0
    observed_ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    items: int = 0
    # (line, gold field, systems of the item) for every item with a gold field, checked once the rubric is known.
    # With each system's answer when the item has one turn: expected error spans point into it.
    gold_fields: list[tuple[int, Any, set[str], dict[str, str]]] = field(default_factory=list)
    # Each rater the file marks ("rater_excluded"), with the mark and the first line that gave it.
    exclusion_marks: dict[str, tuple[bool, int]] = field(default_factory=dict)
    scores: "ScoreClassifier" = field(default_factory=lambda: ScoreClassifier())

    def mark_excluded(self, line: int, where: str, rater: Any, excluded: bool) -> None:
        """One mark per rater: an exclusion holds for the whole dataset, so every line must agree."""
        key = str(rater)
        earlier = self.exclusion_marks.setdefault(key, (excluded, line))
        if earlier[0] != excluded:
            raise DatasetImportError(
                "rater marked both excluded and not excluded",
                line=line,
                field=where,
                expected=f"the same mark for rater {_show(key)} as on line {earlier[1]}",
                found=json.dumps(excluded),
            )
        if excluded and key.startswith("#"):
            self.hash_rater_ids.add(key)

    def excluded_raters(self) -> list[str]:
        return [rater for rater, (excluded, _line) in self.exclusion_marks.items() if excluded]


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {_show(value)}"
    if isinstance(value, str):
        return f"the string {_show(value)}"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _reject_constant(token: str) -> Any:
    raise ValueError(f"{token} is not valid JSON")


def _iter_raw_lines(stream: IO[bytes]) -> Iterator[tuple[int, bytes]]:
    limit = settings.IMPORT_MAX_LINE_BYTES
    line_no = 0
    while True:
        raw = stream.readline(limit + 1)
        if not raw:
            return
        line_no += 1
        if len(raw) > limit and not raw.endswith(b"\n"):
            raise DatasetImportError(
                "line too long", line=line_no, expected=f"at most {limit} bytes per line", found="a longer line"
            )
        if line_no == 1 and raw.startswith(UTF8_BOM):
            raw = raw[len(UTF8_BOM) :]
        yield line_no, raw


def _finite_float(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        # 1e400 parses to inf, which neither Postgres JSON nor a later export could represent.
        raise ValueError(f"{token} is not a finite number")
    return value


_CONTAINERS = (dict, list)
_CONTAINERS_AND_TEXT = (dict, list, str)


def _check_storable(text: str, what: str, expected: str, line_no: int) -> None:
    if (bad := unstorable_character(text)) is not None:
        raise DatasetImportError(
            f"NUL character in a {what}" if bad == NUL else f"unpaired surrogate in a {what}",
            line=line_no,
            expected=f"{expected} without U+0000 or unpaired surrogates",
            found=bad,
        )


def _check_depth_and_text(value: Any, line_no: int, max_depth: int, check_text: bool) -> None:
    """Depth limit, and (when the line has \\u escapes, the only way to write them) no NUL or lone surrogates,
    which Postgres text and UTF-8 output cannot hold. Only the nodes that can fail are visited: containers, and
    strings when the text is checked (json.loads gives exact dicts, lists and strs)."""
    walked = _CONTAINERS_AND_TEXT if check_text else _CONTAINERS
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            raise DatasetImportError(
                "JSON nested too deeply", line=line_no, expected=f"at most {max_depth} levels", found="more"
            )
        if isinstance(node, str):
            _check_storable(node, "string", "text", line_no)
        elif isinstance(node, dict):
            if check_text:
                for key in node:
                    _check_storable(key, "key", "keys", line_no)
            stack.extend((child, depth + 1) for child in node.values() if type(child) in walked)
        else:
            stack.extend((child, depth + 1) for child in node if type(child) in walked)


_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_INNERMOST_PAIR = re.compile(r"\[\]|\{\}")


def _within_depth(text: str, max_depth: int) -> bool:
    """Whether valid JSON text nests at most max_depth levels, from its brackets alone: each pass of the regular
    expression removes one level. A vote's line is a hundred small objects and lists, which the walk over every
    node visited one by one in Python; here the scanning runs inside the regular expression engine."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    for _ in range(max_depth):
        if not brackets:
            return True
        brackets = _INNERMOST_PAIR.sub("", brackets)
    return not brackets


def iter_items(stream: IO[bytes], *, checked: bool = False) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yields (line number, parsed object) for every non-blank line, with precise errors for unreadable lines.
    `checked`: the same bytes already passed this reading once (the import's second pass), so the walk over every
    value for depth and storable text is not repeated."""
    max_depth = settings.IMPORT_MAX_JSON_DEPTH
    for line_no, raw in _iter_raw_lines(stream):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DatasetImportError(
                "not valid UTF-8",
                line=line_no,
                expected="UTF-8 text",
                found=f"byte 0x{raw[exc.start]:02x} at column {exc.start + 1}",
            ) from None
        if not text.strip():
            continue
        try:
            obj = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
        except json.JSONDecodeError as exc:
            raise DatasetImportError(
                "invalid JSON",
                line=line_no,
                expected="one JSON object per line",
                found=f"{exc.msg} at column {exc.colno}",
            ) from None
        except ValueError as exc:
            raise DatasetImportError("invalid JSON", line=line_no, expected="finite numbers", found=str(exc)) from None
        except RecursionError:
            raise DatasetImportError(
                "JSON nested too deeply", line=line_no, expected=f"at most {max_depth} levels", found="more"
            ) from None
        if not isinstance(obj, dict):
            raise DatasetImportError("not an item", line=line_no, expected="a JSON object", found=_type_name(obj))
        if not checked:
            check_text = "\\u" in text
            # The walk finds the failing node; without text to check, the brackets tell first whether any fails.
            if check_text or not _within_depth(text, max_depth):
                _check_depth_and_text(obj, line_no, max_depth, check_text)
        yield line_no, obj


def _fail(line: int, where: str, expected: str, value: Any) -> DatasetImportError:
    return DatasetImportError("invalid value", line=line, field=where, expected=expected, found=_type_name(value))


def classify_score(token: Any, aspect: AspectSpec, text: str = "") -> tuple[float | None, bool] | None:
    """(value, is_missing) for an acceptable token, None when the token is not acceptable for the aspect. A span
    aspect's token is its error spans ({"no_error": ..., "spans": [...]}, code points into ``text``); its value is
    the MQM score the aspect's scheme gives them."""
    if aspect.is_missing_token(token):
        return None, True
    if aspect.span_scheme is not None:
        if not isinstance(token, dict):
            return None
        try:
            return parse_span_answer(token, text=text, scheme=aspect.span_scheme, allow_empty=True).score(
                aspect.span_scheme, text
            ), False
        except SpanAnswerInvalid:
            return None
    if is_json_number(token) and aspect.on_scale(token):
        return float(token), False
    return None


_MEMO_TYPES = (int, float, str, type(None))


class ScoreClassifier:
    """``classify_score`` remembered per aspect and token: a file repeats a handful of tokens a million times, and
    both passes of the import ask. Tokens of other types (lists, objects, booleans) are classified each time."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, type, Any], tuple[float | None, bool] | None] = {}

    def classify(self, token: Any, aspect: AspectSpec, text: str = "") -> tuple[float | None, bool] | None:
        """``text``, the answer, only matters to a span aspect's token, an object, which is never remembered."""
        kind = type(token)
        if kind not in _MEMO_TYPES:
            return classify_score(token, aspect, text)
        # The type is in the key: 1, 1.0 and True are equal as dictionary keys but not as JSON tokens.
        key = (aspect.name, kind, token)
        try:
            return self._known[key]
        except KeyError:
            result = self._known[key] = classify_score(token, aspect)
            return result


def _score_problem(token: Any, aspect: AspectSpec) -> str:
    if aspect.span_scheme is not None:
        return "invalid error spans (offsets, category or severity)"
    if not is_json_number(token):
        return "invalid score"
    if aspect.min_value <= token <= aspect.max_value:
        return "score between the scale's steps"
    return "score out of range"


def _validate_scores(
    line: int, where: str, human_evals: Any, raters: list[Any] | None, state: ValidationState, text: str = ""
) -> None:
    if not isinstance(human_evals, dict):
        raise _fail(line, where, "an object mapping aspect names to lists of scores", human_evals)
    for aspect_name, scores in human_evals.items():
        here = f"{where}.{aspect_name}"
        if not isinstance(scores, list):
            raise _fail(line, here, "a list with one score per rater", scores)
        if raters is not None and len(scores) != len(raters):
            raise DatasetImportError(
                "scores and raters differ in length",
                line=line,
                field=here,
                expected=f"{len(raters)} scores, one per entry of 'raters'",
                found=f"{len(scores)}",
            )
        if state.rubric is not None:
            aspect = state.rubric.aspect(aspect_name)
            if aspect is None:
                known = ", ".join(a.name for a in state.rubric.aspects)
                raise DatasetImportError(
                    "unknown aspect",
                    line=line,
                    field=here,
                    expected=f"one of the rubric's aspects ({known})" if known else "no ratings (the rubric has none)",
                    found=_show(aspect_name),
                )
            classify = state.scores.classify
            for index, token in enumerate(scores):
                if classify(token, aspect, text) is None:
                    raise DatasetImportError(
                        _score_problem(token, aspect),
                        line=line,
                        field=f"{here}[{index}]",
                        expected=aspect.describe_range(),
                        found=_show(token),
                    )
        else:
            if len(aspect_name) > NAME_MAX_CHARS:
                raise _fail(line, here, f"an aspect name of at most {NAME_MAX_CHARS} characters", aspect_name)
            lo, hi = state.observed_ranges.get(aspect_name, (math.inf, -math.inf))
            for index, token in enumerate(scores):
                if any(same_json_token(token, code) for code in DEFAULT_MISSING):
                    continue
                if not is_json_number(token):
                    raise DatasetImportError(
                        "invalid score",
                        line=line,
                        field=f"{here}[{index}]",
                        expected='a number, null or "NA" (declare other missing codes in a rubric)',
                        found=_show(token),
                    )
                lo, hi = min(lo, float(token)), max(hi, float(token))
            state.observed_ranges[aspect_name] = (lo, hi)


def _validate_auto_evals(line: int, where: str, auto_evals: Any) -> None:
    if not isinstance(auto_evals, dict):
        raise _fail(line, where, "an object keyed by judge name", auto_evals)
    for judge_name, by_aspect in auto_evals.items():
        if len(judge_name) > NAME_MAX_CHARS:
            raise _fail(line, where, f"judge names of at most {NAME_MAX_CHARS} characters", judge_name)
        if isinstance(by_aspect, dict):
            for aspect_name in by_aspect:
                if len(aspect_name) > NAME_MAX_CHARS:
                    raise _fail(
                        line,
                        f"{where}.{judge_name}",
                        f"aspect names of at most {NAME_MAX_CHARS} characters",
                        aspect_name,
                    )


def positional_prefix(state: ValidationState) -> str:
    """ "#" for positional rater ids ("#1", "#2", ...), lengthened when a named rater already uses such an id."""
    prefix = "#"
    while any(f"{prefix}{n}" in state.hash_rater_ids for n in range(1, state.positional_width + 1)):
        prefix += "#"
    return prefix


def check_rubric_fits(rubric: RubricSpec) -> None:
    for spec in rubric.aspects:
        if len(spec.name) > NAME_MAX_CHARS or len(spec.label) > NAME_MAX_CHARS:
            raise DatasetImportError(
                "rubric aspect name or label too long",
                field=f"aspects[{spec.name[:40]!r}]",
                expected=f"at most {NAME_MAX_CHARS} characters",
                found=f"{max(len(spec.name), len(spec.label))} characters",
            )
    for key, model_name in rubric.systems.items():
        if len(key) > 200 or len(model_name) > 300:
            raise DatasetImportError(
                "rubric system too long",
                field=f"systems[{key[:40]!r}]",
                expected="keys of at most 200 and model names of at most 300 characters",
                found=f"{len(key)} and {len(model_name)} characters",
            )


def validate_item(line: int, obj: dict[str, Any], state: ValidationState) -> None:
    item_id = obj.get("id")
    if "id" not in obj:
        raise DatasetImportError(
            "missing id", line=line, field="id", expected="a string or integer id", found="no 'id' field"
        )
    if isinstance(item_id, bool) or not isinstance(item_id, (str, int)) or (isinstance(item_id, str) and not item_id):
        raise _fail(line, "id", "a non-empty string or integer", item_id)
    key = str(item_id)
    if len(key) > 500:
        raise _fail(line, "id", "at most 500 characters", item_id)
    if key in state.seen_ids:
        raise DatasetImportError(
            "duplicate id", line=line, field="id", expected="an id not used on an earlier line", found=_show(item_id)
        )
    state.seen_ids.add(key)
    turns = obj.get("turns")
    if not isinstance(turns, list) or not turns:
        raise _fail(line, "turns", "a non-empty list of turns", turns)
    for t_index, turn in enumerate(turns):
        where = f"turns[{t_index}]"
        if not isinstance(turn, dict):
            raise _fail(line, where, "an object", turn)
        if not isinstance(turn.get("prompt"), str):
            raise _fail(line, f"{where}.prompt", "a string", turn.get("prompt"))
        if "reference" in turn and turn["reference"] is not None and not isinstance(turn["reference"], str):
            raise _fail(line, f"{where}.reference", "a string or null", turn["reference"])
        context = turn.get("context")
        if (
            context is not None
            and not isinstance(context, str)
            and not (isinstance(context, list) and all(isinstance(p, str) for p in context))
        ):
            raise _fail(line, f"{where}.context", "a string or a list of strings", context)
        responses = turn.get("responses", {})
        if not isinstance(responses, dict):
            raise _fail(line, f"{where}.responses", "an object keyed by system", responses)
        for system_key, answer in responses.items():
            _validate_answer(line, f"{where}.responses.{system_key}", system_key, answer, state)
        if "preferences" in turn:
            _validate_preferences(line, f"{where}.preferences", turn["preferences"], state)
    if GOLD_KEY in obj:
        systems = {key for turn in turns for key in turn.get("responses", {})}
        texts = (
            {key: answer["response"] for key, answer in turns[0].get("responses", {}).items()}
            if len(turns) == 1
            else {}
        )
        state.gold_fields.append((line, obj[GOLD_KEY], systems, texts))
    state.items += 1


def validate_gold_fields(state: ValidationState, rubric: RubricSpec) -> None:
    aspects = {spec.name: (spec.min_value, spec.max_value) for spec in rubric.aspects}
    schemes = {spec.name: spec.span_scheme for spec in rubric.aspects if spec.span_scheme is not None}
    for line, gold, systems, texts in state.gold_fields:
        problem = gold_problem(gold, systems=systems, aspects=aspects, where=GOLD_KEY, schemes=schemes, texts=texts)
        if problem is not None:
            raise DatasetImportError(
                "invalid gold field", line=line, field=problem.field, expected=problem.expected, found=problem.found
            )


# The export writes these under a turn's "preferences"; other keys of an entry are kept as they are.
PREFERENCE_FIELDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "rater": ("a rater id (string or integer) or null", lambda v: v is None or _is_id(v)),
    "campaign": ("a string or null", lambda v: v is None or isinstance(v, str)),
    "candidates": ("a list of system keys", lambda v: isinstance(v, list) and all(isinstance(k, str) for k in v)),
    "preferred": ("a system key or null", lambda v: v is None or isinstance(v, str)),
    "none_appropriate": ("true or false", lambda v: isinstance(v, bool)),
    "reason": ("a string", lambda v: isinstance(v, str)),
    "comment": ("a string", lambda v: isinstance(v, str)),
    RATER_EXCLUDED_KEY: ("true or false", lambda v: isinstance(v, bool)),
}


def _is_id(value: Any) -> bool:
    return isinstance(value, (str, int)) and not isinstance(value, bool)


_PLAIN_VOTE_KEYS = frozenset({"rater", "candidates", "preferred", "tie"})


def _plain_vote(entry: dict[str, Any]) -> bool:
    """The common vote (a named rater, two or more candidates, the preferred one or none, a tie mark), accepted with
    a few type tests inline: calling each field's check was a quarter of a votes file's first pass. Anything else
    goes through PREFERENCE_FIELDS, which also names the failing field."""
    if not _PLAIN_VOTE_KEYS.issuperset(entry):
        return False
    rater = entry.get("rater")
    candidates = entry.get("candidates")
    preferred = entry.get("preferred")
    return (
        (rater is None or type(rater) is str or type(rater) is int)
        and ((candidates is None and "candidates" not in entry) or type(candidates) is list)
        and all(type(key) is str for key in candidates or ())
        and (preferred is None or type(preferred) is str)
    )


def _validate_preferences(line: int, where: str, preferences: Any, state: ValidationState) -> None:
    if not isinstance(preferences, list):
        raise _fail(line, where, "a list of preferences (objects)", preferences)
    for index, entry in enumerate(preferences):
        if not isinstance(entry, dict):
            raise _fail(line, f"{where}[{index}]", "an object", entry)
        if not _plain_vote(entry):
            for key, (expected, accepts) in PREFERENCE_FIELDS.items():
                if key in entry and not accepts(entry[key]):
                    raise _fail(line, f"{where}[{index}].{key}", expected, entry[key])
        if RATER_EXCLUDED_KEY in entry:
            here = f"{where}[{index}].{RATER_EXCLUDED_KEY}"
            if entry.get("rater") is None or entry["rater"] == "":
                raise _fail(line, here, "a mark only on a preference that names its rater", entry[RATER_EXCLUDED_KEY])
            if len(str(entry["rater"])) > 200:
                raise _fail(line, f"{where}[{index}].rater", "a rater id of at most 200 characters", entry["rater"])
            state.mark_excluded(line, here, entry["rater"], entry[RATER_EXCLUDED_KEY])


def _validate_answer(line: int, here: str, system_key: str, answer: Any, state: ValidationState) -> None:
    if not system_key or len(system_key) > 200:
        raise _fail(line, here, "a system key of 1 to 200 characters", system_key)
    if not isinstance(answer, dict):
        raise _fail(line, here, "an object", answer)
    if not isinstance(answer.get("response"), str):
        raise _fail(line, f"{here}.response", "a string", answer.get("response"))
    raters = answer.get("raters")
    if "raters" in answer:
        if not isinstance(raters, list) or not all(
            isinstance(r, (str, int)) and not isinstance(r, bool) and str(r) for r in raters
        ):
            raise _fail(line, f"{here}.raters", "a list of rater ids (strings or integers)", raters)
        as_text = [str(r) for r in raters]
        if len(set(as_text)) != len(as_text):
            duplicate = next(r for r in as_text if as_text.count(r) > 1)
            raise DatasetImportError(
                "duplicate rater",
                line=line,
                field=f"{here}.raters",
                expected="distinct rater ids",
                found=_show(duplicate),
            )
        if any(len(r) > 200 for r in as_text):
            raise _fail(line, f"{here}.raters", "rater ids of at most 200 characters", raters)
        state.hash_rater_ids.update(r for r in as_text if r.startswith("#"))
    elif isinstance(answer.get("human_evals"), dict):
        widths = [len(v) for v in answer["human_evals"].values() if isinstance(v, list)]
        state.positional_width = max([state.positional_width, *widths])
    if RATER_EXCLUDED_KEY in answer:
        _validate_exclusion_marks(line, f"{here}.{RATER_EXCLUDED_KEY}", answer[RATER_EXCLUDED_KEY], raters, state)
    if "human_evals" in answer:
        response = answer.get("response")
        text = response if isinstance(response, str) else ""
        _validate_scores(line, f"{here}.human_evals", answer["human_evals"], raters, state, text)
    if "auto_evals" in answer:
        _validate_auto_evals(line, f"{here}.auto_evals", answer["auto_evals"])


def _validate_exclusion_marks(
    line: int, where: str, marks: Any, raters: list[Any] | None, state: ValidationState
) -> None:
    if raters is None:
        raise _fail(line, where, "marks beside a 'raters' list (positional raters cannot be excluded)", marks)
    if not isinstance(marks, list) or not all(isinstance(mark, bool) for mark in marks):
        raise _fail(line, where, "a list of true or false, one per entry of 'raters'", marks)
    if len(marks) != len(raters):
        raise DatasetImportError(
            "marks and raters differ in length",
            line=line,
            field=where,
            expected=f"{len(raters)} marks, one per entry of 'raters'",
            found=f"{len(marks)}",
        )
    for index, (rater, mark) in enumerate(zip(raters, marks, strict=True)):
        state.mark_excluded(line, f"{where}[{index}]", rater, mark)

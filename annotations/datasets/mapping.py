"""Mappings from the columns of someone else's table (CSV, TSV, JSONL, Parquet) to evalsite's dataset format.

A mapping names, for each part of an item, the column that holds it: the item id, prompt, turn, system, answer and
reference; ratings in wide layout (one column per aspect), long layout (an aspect column and a score column) or
nested (a column holding one object of aspect scores per rater); preferences as pairs with a winner or as a choice
among K candidates, ties allowed; and judge scores. ``build_items`` groups the rows into items in the import format
and remembers which row gave each part, so the import's own checks, run on the items, can name the row.

This module writes nothing; ``annotations.datasets.tables`` reads the tables and ``annotations.datasets.mapped_import``
hands the items to the JSONL import.

Why one module of this size: the mapping file's schema and the row grouping share the row-number bookkeeping that lets
every later error name the row it came from.
"""

from __future__ import annotations

import contextlib
import json
import math
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from annotations.datasets.exporting import JUDGE_FILLED_KEY, RATER_EXCLUDED_KEY
from annotations.datasets.tables import FORMATS
from annotations.errors import DatasetImportError, RubricError
from annotations.rubrics import RubricSpec, parse_rubric, preset_rubric
from annotations.storable import NUL, unstorable_character

READY_MADE_DIR = Path(__file__).resolve().parent / "mappings"
MAPPING_MAX_BYTES = 64 * 1024

_TOP_KEYS = {
    "format",
    "description",
    "item",
    "prompt",
    "turn",
    "system",
    "system_by_position",
    "answer",
    "reference",
    "optional",
    "json_columns",
    "rubric",
    "preset",
    "ratings",
    "preferences",
    "judges",
}
_RATING_KEYS = {
    "wide": {"layout", "aspects", "rater", "rater_name", "rater_excluded", "filled_by", "judge_version", "campaign"},
    "long": {
        "layout",
        "aspect",
        "score",
        "rater",
        "rater_name",
        "rater_excluded",
        "filled_by",
        "judge_version",
        "campaign",
    },
    "nested": {"layout", "column", "rater_prefix", "aspects"},
}
# The value of a rating block's filled_by column that marks a rating a judge gave in a hybrid campaign in place of
# the task's raters, as evalsite's flat and Parquet exports write it.
JUDGE_FILLED = "judge"
_PREFERENCE_KEYS = {
    "pair": {
        "layout",
        "system_a",
        "system_b",
        "winner",
        "a_wins",
        "b_wins",
        "ties",
        "both_bad",
        "answer_a",
        "answer_b",
        "conversation_a",
        "conversation_b",
        "rater",
        "rater_name",
        "reason",
    },
    "choice": {
        "layout",
        "candidates",
        "preferred",
        "ties",
        "none_appropriate",
        "tie",
        "rater",
        "rater_name",
        "reason",
        "campaign",
    },
}
# Either layout may name the column of the rater_excluded marks.
for _layout_keys in _PREFERENCE_KEYS.values():
    _layout_keys.add("rater_excluded")
# Either layout may name the rater values that are pairwise judges, and the aspect of their verdicts.
for _layout_keys in _PREFERENCE_KEYS.values():
    _layout_keys |= {"judges", "judge_aspect"}
# The aspect a pairwise judge's imported verdicts are about when the mapping names none.
DEFAULT_JUDGE_ASPECT = "overall"


class MappingError(ValueError):
    """A mapping file that cannot be used; the message names the key."""


@dataclass(frozen=True)
class RatingBlock:
    layout: str
    aspects: dict[str, str] = field(default_factory=dict)  # wide: aspect -> column; nested: aspect -> key
    aspect: str = ""
    score: str = ""
    rater: str = ""
    rater_name: str = ""
    column: str = ""
    rater_prefix: str = ""
    # The column marking each row's rater excluded from the statistics (true or false), as the exports write it.
    rater_excluded: str = ""
    # A row whose filled_by column says "judge" is a judge's rating in a hybrid campaign, named by the rater column:
    # it becomes an entry of the answer's judge_filled list (with the judge_version and campaign columns), as the
    # JSONL format carries it, never a rating of a person.
    filled_by: str = ""
    judge_version: str = ""
    campaign: str = ""


@dataclass(frozen=True)
class PreferenceBlock:
    layout: str
    system_a: str = ""
    system_b: str = ""
    winner: str = ""
    a_wins: tuple[str, ...] = ("model_a", "a")
    b_wins: tuple[str, ...] = ("model_b", "b")
    ties: tuple[str, ...] = ("tie",)
    both_bad: tuple[str, ...] = ()
    answer_a: str = ""
    answer_b: str = ""
    conversation_a: str = ""
    conversation_b: str = ""
    candidates: str = ""
    preferred: str = ""
    none_appropriate: str = ""
    tie: str = ""
    rater: str = ""
    rater_name: str = ""
    reason: str = ""
    campaign: str = ""
    rater_excluded: str = ""
    # Values of the rater column (or the rater name) that are a pairwise judge, not a person: their votes become the
    # judge's verdicts on ``judge_aspect``, never preferences of a rater.
    judges: tuple[str, ...] = ()
    judge_aspect: str = DEFAULT_JUDGE_ASPECT


@dataclass(frozen=True)
class Mapping:
    name: str
    format: str = ""
    item: str = ""
    prompt: str = ""
    turn: str = ""
    system: str = ""
    system_by_position: str = ""
    answer: str = ""
    reference: str = ""
    optional: frozenset[str] = frozenset()
    json_columns: frozenset[str] = frozenset()
    rubric: RubricSpec | None = None
    ratings: tuple[RatingBlock, ...] = ()
    preferences: PreferenceBlock | None = None
    judges: dict[str, dict[str, str]] = field(default_factory=dict)

    def columns(self) -> set[str]:
        """Every column the mapping reads."""
        names = {self.item, self.prompt, self.turn, self.system, self.answer, self.reference}
        for block in self.ratings:
            names |= set(block.aspects.values()) if block.layout == "wide" else set()
            names |= {block.aspect, block.score, block.rater, block.column, block.rater_excluded}
            names |= {block.filled_by, block.judge_version, block.campaign}
        if self.preferences is not None:
            p = self.preferences
            names |= {p.system_a, p.system_b, p.winner, p.answer_a, p.answer_b, p.conversation_a, p.conversation_b}
            names |= {p.candidates, p.preferred, p.none_appropriate, p.tie, p.rater, p.reason, p.campaign}
            names.add(p.rater_excluded)
        for by_aspect in self.judges.values():
            names |= set(by_aspect.values())
        names.discard("")
        return names


def _text(data: dict[str, Any], key: str, where: str) -> str:
    value = data.get(key, "")
    if not isinstance(value, str):
        raise MappingError(f"{where}{key}: expected a column name (a string), found {json.dumps(value)}")
    return value


def _values(data: dict[str, Any], key: str, default: tuple[str, ...], where: str) -> tuple[str, ...]:
    value = data.get(key, list(default))
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise MappingError(f"{where}{key}: expected a list of strings")
    return tuple(value)


def _unknown(data: dict[str, Any], allowed: set[str], where: str) -> None:
    extra = sorted(set(data) - allowed)
    if extra:
        raise MappingError(f"{where}unknown key {extra[0]!r}; allowed: {', '.join(sorted(allowed))}")


def _rating_block(raw: Any, where: str) -> RatingBlock:
    if not isinstance(raw, dict):
        raise MappingError(f"{where}: expected a table")
    layout = raw.get("layout", "wide")
    if layout not in _RATING_KEYS:
        raise MappingError(f"{where}.layout: expected one of wide, long, nested, found {json.dumps(layout)}")
    _unknown(raw, _RATING_KEYS[layout], f"{where}.")
    aspects_raw = raw.get("aspects", {})
    if isinstance(aspects_raw, list) and all(isinstance(a, str) for a in aspects_raw):
        aspects = {name: name for name in aspects_raw}
    elif isinstance(aspects_raw, dict) and all(isinstance(v, str) for v in aspects_raw.values()):
        aspects = dict(aspects_raw)
    else:
        raise MappingError(f"{where}.aspects: expected a list of column names or a table aspect = column")
    block = RatingBlock(
        layout=layout,
        aspects=aspects,
        aspect=_text(raw, "aspect", f"{where}."),
        score=_text(raw, "score", f"{where}."),
        rater=_text(raw, "rater", f"{where}."),
        rater_name=_text(raw, "rater_name", f"{where}."),
        column=_text(raw, "column", f"{where}."),
        rater_prefix=_text(raw, "rater_prefix", f"{where}."),
        rater_excluded=_text(raw, "rater_excluded", f"{where}."),
        filled_by=_text(raw, "filled_by", f"{where}."),
        judge_version=_text(raw, "judge_version", f"{where}."),
        campaign=_text(raw, "campaign", f"{where}."),
    )
    if (block.judge_version or block.campaign) and not block.filled_by:
        raise MappingError(f"{where}: 'judge_version' and 'campaign' describe judge-filled rows; give 'filled_by' too")
    if layout == "wide" and not aspects:
        raise MappingError(f"{where}.aspects: a wide layout needs at least one aspect column")
    if layout == "long" and not (block.aspect and block.score):
        raise MappingError(f"{where}: a long layout needs 'aspect' and 'score' columns")
    if layout == "nested" and not block.column:
        raise MappingError(f"{where}.column: a nested layout needs the column holding the raters' scores")
    if layout != "nested" and bool(block.rater) == bool(block.rater_name):
        raise MappingError(f"{where}: give either 'rater' (a column) or 'rater_name' (one name for every row)")
    return block


def _preference_block(raw: Any) -> PreferenceBlock:
    where = "preferences"
    if not isinstance(raw, dict):
        raise MappingError(f"{where}: expected a table")
    layout = raw.get("layout", "pair")
    if layout not in _PREFERENCE_KEYS:
        raise MappingError(f"{where}.layout: expected pair or choice, found {json.dumps(layout)}")
    _unknown(raw, _PREFERENCE_KEYS[layout], f"{where}.")
    texts = {
        key: _text(raw, key, f"{where}.")
        for key in _PREFERENCE_KEYS[layout]
        if key not in ("layout", "a_wins", "b_wins", "ties", "both_bad", "judges", "judge_aspect")
    }
    block = PreferenceBlock(
        layout=layout,
        a_wins=_values(raw, "a_wins", PreferenceBlock.a_wins, f"{where}."),
        b_wins=_values(raw, "b_wins", PreferenceBlock.b_wins, f"{where}."),
        ties=_values(raw, "ties", PreferenceBlock.ties if layout == "pair" else (), f"{where}."),
        both_bad=_values(raw, "both_bad", (), f"{where}."),
        judges=_values(raw, "judges", (), f"{where}."),
        judge_aspect=_text(raw, "judge_aspect", f"{where}.") or DEFAULT_JUDGE_ASPECT,
        **texts,
    )
    if block.judges and not (block.rater or block.rater_name):
        raise MappingError(f"{where}.judges: judges are values of the rater column; give 'rater' too")
    if layout == "pair" and not (block.system_a and block.system_b and block.winner):
        raise MappingError(f"{where}: a pair layout needs 'system_a', 'system_b' and 'winner' columns")
    if layout == "choice" and not (block.candidates and block.preferred):
        raise MappingError(f"{where}: a choice layout needs 'candidates' and 'preferred' columns")
    if block.rater and block.rater_name:
        raise MappingError(f"{where}: give 'rater' (a column) or 'rater_name', not both")
    return block


def parse_mapping(data: Any, *, name: str) -> Mapping:
    if not isinstance(data, dict):
        raise MappingError("mapping: expected a table (a JSON object or a TOML document)")
    _unknown(data, _TOP_KEYS, "mapping: ")
    fmt = data.get("format", "")
    if fmt and fmt not in FORMATS:
        raise MappingError(f"format: expected one of {', '.join(FORMATS)}, found {json.dumps(fmt)}")
    rubric: RubricSpec | None = None
    try:
        if "rubric" in data and "preset" in data:
            raise MappingError("give either 'rubric' or 'preset', not both")
        if "rubric" in data:
            rubric = parse_rubric(data["rubric"], source=f"mapping:{name}")
        elif "preset" in data:
            rubric = preset_rubric(str(data["preset"]))
    except RubricError as exc:
        raise MappingError(str(exc)) from None
    ratings_raw = data.get("ratings", [])
    if isinstance(ratings_raw, dict):
        ratings_raw = [ratings_raw]
    if not isinstance(ratings_raw, list):
        raise MappingError("ratings: expected a table or a list of tables")
    judges = data.get("judges", {})
    if not isinstance(judges, dict) or not all(
        isinstance(by_aspect, dict) and by_aspect and all(isinstance(c, str) for c in by_aspect.values())
        for by_aspect in judges.values()
    ):
        raise MappingError("judges: expected a table judge name = {aspect = column, ...}")
    mapping = Mapping(
        name=name,
        format=fmt,
        item=_text(data, "item", ""),
        prompt=_text(data, "prompt", ""),
        turn=_text(data, "turn", ""),
        system=_text(data, "system", ""),
        system_by_position=_text(data, "system_by_position", ""),
        answer=_text(data, "answer", ""),
        reference=_text(data, "reference", ""),
        optional=frozenset(_values(data, "optional", (), "")),
        json_columns=frozenset(_values(data, "json_columns", (), "")),
        rubric=rubric,
        ratings=tuple(_rating_block(block, f"ratings[{i}]") for i, block in enumerate(ratings_raw)),
        preferences=_preference_block(data["preferences"]) if "preferences" in data else None,
        judges={str(k): dict(v) for k, v in judges.items()},
    )
    if mapping.system and mapping.system_by_position:
        raise MappingError("give either 'system' (a column) or 'system_by_position' (a key prefix), not both")
    if not mapping.prompt and not (mapping.preferences and mapping.preferences.conversation_a):
        raise MappingError("prompt: the column holding the prompt is required (or conversations in preferences)")
    if (mapping.ratings or mapping.judges) and not (mapping.system or mapping.system_by_position):
        raise MappingError("system: ratings and judge scores need the column naming the system")
    if not (mapping.ratings or mapping.preferences or mapping.judges or mapping.answer):
        raise MappingError("mapping: map at least answers, ratings, preferences or judge scores")
    return mapping


def load_mapping_bytes(raw: bytes, *, name: str) -> Mapping:
    if len(raw) > MAPPING_MAX_BYTES:
        raise MappingError(f"mapping {name}: larger than {MAPPING_MAX_BYTES} bytes")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise MappingError(f"mapping {name}: not UTF-8 text") from None
    try:
        data = json.loads(text) if text.lstrip().startswith("{") else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise MappingError(f"mapping {name}: neither valid JSON nor valid TOML ({exc})") from None
    return parse_mapping(data, name=name)


def ready_made_mappings() -> list[str]:
    return sorted(path.stem for path in READY_MADE_DIR.glob("*.toml"))


def ready_made_mapping(name: str) -> Mapping:
    if name not in ready_made_mappings():
        raise MappingError(f"unknown ready-made mapping {name!r}; choose one of {', '.join(ready_made_mappings())}")
    return load_mapping_bytes((READY_MADE_DIR / f"{name}.toml").read_bytes(), name=name)


def load_mapping(name_or_path: str) -> Mapping:
    """A ready-made mapping by name, or a mapping file (JSON or TOML) by path."""
    if name_or_path in ready_made_mappings():
        return ready_made_mapping(name_or_path)
    try:
        raw = Path(name_or_path).read_bytes()
    except OSError as exc:
        raise MappingError(f"mapping {name_or_path}: {exc.strerror}") from None
    return load_mapping_bytes(raw, name=Path(name_or_path).name)


# --- rows to items ----------------------------------------------------------------------------------------------


@dataclass
class _Answer:
    text: str
    row: int
    raters: list[str] = field(default_factory=list)
    scores: dict[str, dict[str, tuple[Any, int]]] = field(default_factory=dict)  # aspect -> rater -> (score, row)
    judges: dict[str, dict[str, tuple[float, int]]] = field(default_factory=dict)
    exclusion_marks: dict[str, tuple[Any, int]] = field(default_factory=dict)  # rater -> (mark, row)
    judge_filled: list[tuple[dict[str, Any], int]] = field(default_factory=list)


@dataclass
class _Turn:
    prompt: str
    row: int
    reference: str | None = None
    answers: dict[str, _Answer] = field(default_factory=dict)
    preferences: list[tuple[dict[str, Any], int]] = field(default_factory=list)


@dataclass
class _Item:
    external_id: str
    row: int
    turns: dict[int, _Turn] = field(default_factory=dict)


@dataclass
class BuiltItems:
    """Items in the import format, in order of first appearance, with the row behind each part of each item."""

    items: list[dict[str, Any]]
    provenance: list[dict[str, int]]  # per item: field path -> row
    rows: int = 0
    preferences: int = 0
    # Pairwise judges' verdicts (never preferences): item index, turn index, judge, system a, system b, outcome for
    # a (1 a wins, 0 b wins, 0.5 a tie), row.
    judge_verdicts: list[tuple[int, int, str, str, str, float, int]] = field(default_factory=list)

    def row_of(self, line: int, field_path: str | None) -> int | None:
        if not 1 <= line <= len(self.provenance):
            return None
        paths = self.provenance[line - 1]
        best = ""
        for path in paths:
            if field_path and field_path.startswith(path) and len(path) > len(best):
                best = path
        return paths.get(best, paths.get(""))


_TRUE = (True, "true", "True", "1", 1)
_FALSE = (False, "false", "False", "0", 0)


def _is_blank(value: Any) -> bool:
    return value is None or value == "" or (isinstance(value, float) and math.isnan(value))


def _mark(value: Any) -> Any:
    """A cell as a rater_excluded mark: true or false, None for an empty cell; anything else is kept as it is, for
    the JSONL import to refuse."""
    if _is_blank(value):
        return None
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    return value


def _score(value: Any) -> Any:
    """A cell as a score: numbers stay numbers, numeric text becomes one, an empty cell or NaN is null (missing),
    any other text is kept for the import to accept as a missing code or refuse."""
    if _is_blank(value):
        return None
    if isinstance(value, str):
        text = value.strip()
        for parse in (int, float):
            try:
                number = parse(text)
            except ValueError:
                continue
            return number if math.isfinite(number) else value
        return value
    return value


class _Builder:
    def __init__(self, mapping: Mapping, unit: str) -> None:
        self.mapping = mapping
        self.unit = unit  # "data row" or "line"
        self.items: dict[str, _Item] = {}
        self.by_prompt: dict[str, str] = {}
        self.rows = 0
        self.preferences = 0
        self.header_checked = False
        self.judge_verdicts: list[tuple[_Item, int, str, str, str, float, int]] = []

    def fail(self, row: int, message: str, *, expected: str | None = None, found: Any = None) -> DatasetImportError:
        shown = None if found is None else (found if isinstance(found, str) else json.dumps(found, default=str))
        if shown is not None and len(shown) > 80:
            shown = shown[:77] + "..."
        error = DatasetImportError(message, expected=expected, found=shown)
        return error.at_row(row, unit=self.unit)

    def check_columns(self, row: int, values: dict[str, Any]) -> None:
        missing = sorted(self.mapping.columns() - set(values) - self.mapping.optional)
        if missing:
            raise self.fail(
                row, "column not in the file", expected=f"a column named {missing[0]!r}", found=", ".join(values)
            )
        self.header_checked = True

    def cell(self, values: dict[str, Any], column: str) -> Any:
        value = values.get(column)
        if column in self.mapping.json_columns and isinstance(value, str):
            try:
                return json.loads(value)
            except json.JSONDecodeError:
                return value
        return value

    def text(self, row: int, values: dict[str, Any], column: str, what: str) -> str:
        value = self.cell(values, column)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and what in ("item id", "system"):
            return str(int(value)) if float(value).is_integer() else str(value)
        if not isinstance(value, str) or (what in ("item id", "system", "rater") and not value):
            raise self.fail(row, f"invalid {what}", expected=f"text in column {column!r}", found=value)
        return value

    def conversation(self, row: int, values: dict[str, Any], column: str) -> list[tuple[str, str]]:
        """A conversation column as (prompt, answer) per turn: a list of {"role", "content"} messages, or its JSON
        text, the user's messages paired with the assistant's in order."""
        value = values.get(column)
        if isinstance(value, str):
            with contextlib.suppress(json.JSONDecodeError):
                value = json.loads(value)
        if not isinstance(value, list) or not all(
            isinstance(m, dict) and isinstance(m.get("content"), str) and m.get("role") in ("user", "assistant")
            for m in value
        ):
            raise self.fail(
                row,
                "invalid conversation",
                expected=f'a list of {{"role": "user"|"assistant", "content": text}} in column {column!r}',
                found=value,
            )
        prompts = [m["content"] for m in value if m["role"] == "user"]
        answers = [m["content"] for m in value if m["role"] == "assistant"]
        if not prompts or len(prompts) != len(answers):
            raise self.fail(
                row,
                "invalid conversation",
                expected="as many assistant messages as user messages, at least one",
                found=f"{len(prompts)} user and {len(answers)} assistant messages",
            )
        return list(zip(prompts, answers, strict=True))

    def item_for(self, row: int, values: dict[str, Any], prompt: str | None) -> _Item:
        mapping = self.mapping
        if mapping.item and (mapping.item in values or mapping.item not in mapping.optional):
            external_id = self.text(row, values, mapping.item, "item id")
        elif prompt is not None:
            external_id = self.by_prompt.setdefault(prompt, f"item-{len(self.by_prompt) + 1}")
        else:
            raise self.fail(row, "no item id", expected=f"a column {mapping.item or 'prompt'!r}")
        item = self.items.get(external_id)
        if item is None:
            item = self.items[external_id] = _Item(external_id=external_id, row=row)
        return item

    def turn_for(self, row: int, item: _Item, index: int, prompt: str | None) -> _Turn:
        turn = item.turns.get(index)
        if turn is None:
            if prompt is None:
                raise self.fail(
                    row,
                    "turn without a prompt",
                    expected=f"the prompt of turn {index + 1} of item {item.external_id!r}",
                    found="no prompt column in this row",
                )
            turn = item.turns[index] = _Turn(prompt=prompt, row=row)
        elif prompt is not None and prompt != turn.prompt:
            raise self.fail(
                row,
                "conflicting prompt",
                expected=f"the prompt given in {self.unit} {turn.row} for turn {index + 1} of item "
                f"{item.external_id!r}",
                found=prompt,
            )
        return turn

    def answer_for(self, row: int, turn: _Turn, system: str, text: str | None, item: _Item) -> _Answer:
        answer = turn.answers.get(system)
        if answer is None:
            if text is None:
                raise self.fail(
                    row,
                    "answer without text",
                    expected=f"the answer of system {system!r} (column {self.mapping.answer or 'answer'!r})",
                    found="no answer in this row",
                )
            answer = turn.answers[system] = _Answer(text=text, row=row)
        elif text is not None and text != answer.text:
            raise self.fail(
                row,
                "conflicting answer",
                expected=f"the answer of system {system!r} given in {self.unit} {answer.row} for item "
                f"{item.external_id!r}",
                found=text,
            )
        return answer

    def add(self, row: int, values: dict[str, Any]) -> None:
        if not self.header_checked:
            self.check_columns(row, values)
        self.rows += 1
        mapping = self.mapping
        present = {c for c in mapping.columns() if c in values}
        for column in present:
            value = values[column]
            bad = unstorable_character(value) if isinstance(value, str) else None
            if bad == NUL:
                raise self.fail(
                    row, f"NUL character in column {column!r}", expected="text without U+0000", found="U+0000"
                )
            if bad:
                raise self.fail(
                    row,
                    f"unpaired surrogate in column {column!r}",
                    expected="text without unpaired surrogates",
                    found=bad,
                )
        prompt = self.text(row, values, mapping.prompt, "prompt") if mapping.prompt in present else None
        turn_number = 1
        if mapping.turn in present:
            raw_turn = _score(values[mapping.turn])
            if not isinstance(raw_turn, int) or isinstance(raw_turn, bool) or raw_turn < 1:
                raise self.fail(row, "invalid turn", expected="a turn number from 1", found=values[mapping.turn])
            turn_number = raw_turn
        preference = mapping.preferences
        conversations = self.conversations(row, values, present)
        if conversations:
            if mapping.turn not in present:
                turn_number = len(conversations["a"])
            if prompt is None and turn_number <= len(conversations["a"]):
                prompt = conversations["a"][turn_number - 1][0]
        if prompt is None and mapping.prompt in mapping.optional and mapping.item in present:
            prompt = self.text(row, values, mapping.item, "item id")  # no prompt in the file: the item id stands in
        item = self.item_for(row, values, prompt)
        index = turn_number - 1
        for earlier in range(len(conversations.get("a", []))):
            self.turn_for(row, item, earlier, conversations["a"][earlier][0])
        turn = self.turn_for(row, item, index, prompt)
        if mapping.reference in present and not _is_blank(values[mapping.reference]):
            turn.reference = self.reference(row, values)
        system = ""
        if mapping.system in present:
            system = self.text(row, values, mapping.system, "system")
        elif mapping.system_by_position:
            system = f"{mapping.system_by_position}{len(turn.answers) + 1}"
        if system:
            text = self.text(row, values, mapping.answer, "answer") if mapping.answer in present else None
            answer = self.answer_for(row, turn, system, text, item)
            self.add_ratings(row, values, present, answer, item, system)
            self.add_judges(row, values, present, answer)
        if preference is not None:
            self.add_preference(row, values, present, item, conversations, index)

    def conversations(self, row: int, values: dict[str, Any], present: set[str]) -> dict[str, list[tuple[str, str]]]:
        block = self.mapping.preferences
        if block is None or not block.conversation_a or block.conversation_a not in present:
            return {}
        found = {
            "a": self.conversation(row, values, block.conversation_a),
            "b": self.conversation(row, values, block.conversation_b),
        }
        if [p for p, _ in found["a"]] != [p for p, _ in found["b"]]:
            raise self.fail(
                row, "conversations differ", expected="the same user messages in both conversations", found="not"
            )
        return found

    def reference(self, row: int, values: dict[str, Any]) -> str:
        reference = self.cell(values, self.mapping.reference)
        if isinstance(reference, list) and reference:
            reference = reference[0]  # several references: the first is the original one
        if not isinstance(reference, str):
            raise self.fail(row, "invalid reference", expected="text", found=reference)
        return reference

    def rate(self, row: int, answer: _Answer, aspect: str, rater: str, score: Any, item: _Item, system: str) -> None:
        by_rater = answer.scores.setdefault(aspect, {})
        if rater in by_rater:
            raise self.fail(
                row,
                "duplicate rating",
                expected=f"one score per rater; rater {rater!r} already rated {aspect!r} of system {system!r} on "
                f"item {item.external_id!r} in {self.unit} {by_rater[rater][1]}",
                found=score,
            )
        if rater not in answer.raters:
            answer.raters.append(rater)
        by_rater[rater] = (score, row)

    def add_ratings(
        self, row: int, values: dict[str, Any], present: set[str], answer: _Answer, item: _Item, system: str
    ) -> None:
        for block in self.mapping.ratings:
            if block.layout == "nested":
                if block.column not in present or _is_blank(values[block.column]):
                    continue
                entries = self.cell(values, block.column)
                if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
                    raise self.fail(
                        row, "invalid ratings", expected=f"a list of objects in column {block.column!r}", found=entries
                    )
                for number, entry in enumerate(entries, start=1):
                    keys = block.aspects or {name: name for name in entry}
                    for aspect, key in keys.items():
                        if key in entry:
                            rater = f"{block.rater_prefix}{number}"
                            self.rate(row, answer, aspect, rater, _score(entry[key]), item, system)
                continue
            if block.rater:
                if block.rater not in present:
                    continue
                rater = self.text(row, values, block.rater, "rater")
            else:
                rater = block.rater_name
            if block.filled_by and block.filled_by in present and values[block.filled_by] == JUDGE_FILLED:
                self.add_judge_filled(row, values, present, block, answer, rater)
                continue
            if block.rater_excluded and block.rater_excluded in present:
                self.mark_excluded(row, answer, rater, values[block.rater_excluded])
            if block.layout == "wide":
                for aspect, column in block.aspects.items():
                    if column in present:
                        self.rate(row, answer, aspect, rater, _score(self.cell(values, column)), item, system)
            elif block.aspect in present and block.score in present:
                aspect = self.text(row, values, block.aspect, "aspect")
                self.rate(row, answer, aspect, rater, _score(self.cell(values, block.score)), item, system)

    def mark_excluded(self, row: int, answer: _Answer, rater: str, value: Any) -> None:
        """The answer's JSONL carries one mark per rater, so every row of the rater on this answer must agree; the
        JSONL import then checks the marks across the whole dataset."""
        mark = _mark(value)
        if mark is None:
            return
        earlier = answer.exclusion_marks.setdefault(rater, (mark, row))
        if earlier[0] != mark:
            raise self.fail(
                row,
                "rater marked both excluded and not excluded",
                expected=f"the same mark for rater {rater!r} as in {self.unit} {earlier[1]}",
                found=value,
            )

    def add_judge_filled(
        self, row: int, values: dict[str, Any], present: set[str], block: RatingBlock, answer: _Answer, judge: str
    ) -> None:
        """A judge's ratings in a hybrid campaign, as the JSONL export lists them under the answer's judge_filled."""
        if block.layout == "wide":
            scores = [
                (aspect, self.cell(values, column)) for aspect, column in block.aspects.items() if column in present
            ]
        elif block.aspect in present and block.score in present:
            scores = [(self.text(row, values, block.aspect, "aspect"), self.cell(values, block.score))]
        else:
            scores = []
        described = {
            key: self.cell(values, column) if column in present else None
            for key, column in (("judge_version", block.judge_version), ("campaign", block.campaign))
            if column
        }
        for aspect, score in scores:
            entry = {"aspect": aspect, "value": _score(score), "filled_by": JUDGE_FILLED, "judge": judge}
            answer.judge_filled.append((entry | described, row))

    def add_judges(self, row: int, values: dict[str, Any], present: set[str], answer: _Answer) -> None:
        for judge, by_aspect in self.mapping.judges.items():
            for aspect, column in by_aspect.items():
                if column not in present:
                    continue
                score = _score(values[column])
                if score is None:
                    continue
                answer.judges.setdefault(judge, {})[aspect] = (score, row)

    def add_preference(
        self,
        row: int,
        values: dict[str, Any],
        present: set[str],
        item: _Item,
        conversations: dict[str, list[tuple[str, str]]],
        turn_index: int,
    ) -> None:
        block = self.mapping.preferences
        assert block is not None
        entry: dict[str, Any] = {}
        if block.rater and block.rater in present:
            entry["rater"] = self.text(row, values, block.rater, "rater")
        elif block.rater_name:
            entry["rater"] = block.rater_name
        mark = _mark(values[block.rater_excluded]) if block.rater_excluded and block.rater_excluded in present else None
        # An entry without a rater excludes no one: its false mark is dropped, any other is left for the import to
        # refuse.
        if mark is not None and (mark is not False or entry.get("rater") is not None):
            entry[RATER_EXCLUDED_KEY] = mark
        if block.layout == "pair":
            if block.winner not in present:
                return
            entry.update(self.pair_entry(row, values, present, item, conversations, turn_index))
        else:
            if block.candidates not in present or _is_blank(values[block.candidates]):
                return  # a row that only rates
            entry.update(self.choice_entry(row, values, present))
        for key, column in (("reason", block.reason), ("campaign", block.campaign)):
            if column and column in present and isinstance(values[column], str) and values[column]:
                entry[key] = values[column]
        turn = item.turns[turn_index]
        for system in entry["candidates"]:
            if system not in turn.answers:
                raise self.fail(
                    row,
                    "candidate without an answer",
                    expected=f"an answer of system {system!r} on turn {turn_index + 1} of item {item.external_id!r}",
                    found="none",
                )
        if entry.get("rater") in block.judges:
            self.judge_verdicts.append(self.judge_verdict(row, entry, item, turn_index))
            return
        turn.preferences.append((entry, row))
        self.preferences += 1

    def judge_verdict(
        self, row: int, entry: dict[str, Any], item: _Item, turn_index: int
    ) -> tuple[_Item, int, str, str, str, float, int]:
        """A judge's vote on two answers, as its outcome for the first."""
        if len(entry["candidates"]) != 2:
            raise self.fail(
                row, "judge verdict on more than two answers", expected="two candidates", found=entry["candidates"]
            )
        first, second = entry["candidates"]
        preferred = entry.get("preferred")
        if entry.get("tie"):
            outcome = 0.5
        elif preferred in (first, second):
            outcome = 1.0 if preferred == first else 0.0
        else:
            raise self.fail(row, "judge verdict without a choice", expected="a winner or a tie", found=preferred)
        return item, turn_index, str(entry["rater"]), first, second, outcome, row

    def pair_entry(
        self,
        row: int,
        values: dict[str, Any],
        present: set[str],
        item: _Item,
        conversations: dict[str, list[tuple[str, str]]],
        turn_index: int,
    ) -> dict[str, Any]:
        """A pair with a winner: the two answers (from the conversations or answer columns) and the vote."""
        pairs = self.mapping.preferences
        assert pairs is not None
        system_a = self.text(row, values, pairs.system_a, "system")
        system_b = self.text(row, values, pairs.system_b, "system")
        if system_a == system_b:
            raise self.fail(row, "a system compared with itself", expected="two different systems", found=system_a)
        for side, system, column in (("a", system_a, pairs.answer_a), ("b", system_b, pairs.answer_b)):
            if side in conversations:
                for index, (_prompt, text) in enumerate(conversations[side]):
                    self.answer_for(row, item.turns[index], system, text, item)
            elif column and column in present:
                text = self.text(row, values, column, "answer")
                self.answer_for(row, item.turns[turn_index], system, text, item)
        winner = self.cell(values, pairs.winner)
        entry: dict[str, Any] = {"candidates": [system_a, system_b]}
        if winner in pairs.a_wins:
            entry["preferred"] = system_a
        elif winner in pairs.b_wins:
            entry["preferred"] = system_b
        elif winner in pairs.ties or winner in pairs.both_bad:
            entry["preferred"] = None
            entry["tie"] = True
            if winner in pairs.both_bad:
                entry["none_appropriate"] = True
        else:
            accepted = [*pairs.a_wins, *pairs.b_wins, *pairs.ties, *pairs.both_bad]
            raise self.fail(row, "unknown winner", expected=f"one of {', '.join(map(repr, accepted))}", found=winner)
        return entry

    def choice_entry(self, row: int, values: dict[str, Any], present: set[str]) -> dict[str, Any]:
        """A choice among K candidates, or a tie."""
        choice = self.mapping.preferences
        assert choice is not None
        candidates = self.cell(values, choice.candidates)
        if isinstance(candidates, str):
            candidates = [c.strip() for c in candidates.split("|") if c.strip()]
        if not isinstance(candidates, list) or len(candidates) < 2 or not all(isinstance(c, str) for c in candidates):
            raise self.fail(
                row,
                "invalid candidates",
                expected='at least two system keys (a list, or text separated by "|")',
                found=candidates,
            )
        entry: dict[str, Any] = {"candidates": list(candidates)}
        preferred = self.cell(values, choice.preferred)
        if choice.tie and choice.tie in present:
            is_tie = values[choice.tie] in _TRUE
        else:
            is_tie = preferred in choice.ties or (_is_blank(preferred) and "" in choice.ties)
        if is_tie:
            entry["preferred"] = None
            entry["tie"] = True
        elif _is_blank(preferred):
            entry["preferred"] = None  # no choice asked: kept, and left out of the statistics
        elif preferred in candidates:
            entry["preferred"] = preferred
        else:
            raise self.fail(row, "preferred system not among the candidates", expected=str(candidates), found=preferred)
        if choice.none_appropriate and choice.none_appropriate in present and values[choice.none_appropriate] in _TRUE:
            entry["none_appropriate"] = True  # a table cannot tell false from absent: only true is written
        return entry

    @staticmethod
    def answer_body(answer: _Answer, where: str, paths: dict[str, int]) -> dict[str, Any]:
        """One answer in the import format, noting in paths the row behind each of its parts."""
        body: dict[str, Any] = {"response": answer.text}
        if answer.scores:
            body["human_evals"] = {}
            for aspect, by_rater in answer.scores.items():
                scores = []
                for position, rater in enumerate(answer.raters):
                    score, score_row = by_rater.get(rater, (None, answer.row))
                    paths[f"{where}.human_evals.{aspect}[{position}]"] = score_row
                    scores.append(score)
                body["human_evals"][aspect] = scores
            body["raters"] = list(answer.raters)
            if answer.exclusion_marks:
                # A rater without a mark on this answer is not excluded here, as an unmarked JSONL rater.
                marks = []
                for position, rater in enumerate(answer.raters):
                    mark, mark_row = answer.exclusion_marks.get(rater, (False, answer.row))
                    paths[f"{where}.{RATER_EXCLUDED_KEY}[{position}]"] = mark_row
                    marks.append(mark)
                body[RATER_EXCLUDED_KEY] = marks
        if answer.judge_filled:
            body[JUDGE_FILLED_KEY] = []
            for position, (entry, entry_row) in enumerate(answer.judge_filled):
                paths[f"{where}.{JUDGE_FILLED_KEY}[{position}]"] = entry_row
                body[JUDGE_FILLED_KEY].append(entry)
        if answer.judges:
            body["auto_evals"] = {}
            for judge, by_aspect in answer.judges.items():
                body["auto_evals"][judge] = {}
                for aspect, (score, score_row) in by_aspect.items():
                    paths[f"{where}.auto_evals.{judge}"] = score_row
                    body["auto_evals"][judge][aspect] = score
        return body

    def finish(self) -> BuiltItems:
        items: list[dict[str, Any]] = []
        provenance: list[dict[str, int]] = []
        for item in self.items.values():
            paths: dict[str, int] = {"": item.row}
            turns = []
            for index in range(max(item.turns) + 1):
                turn = item.turns.get(index)
                if turn is None:
                    later = item.turns[min(i for i in item.turns if i > index)]
                    raise self.fail(
                        later.row,
                        "missing turn",
                        expected=f"turn {index + 1} of item {item.external_id!r} before turn {index + 2}",
                        found="no row for it",
                    )
                here = f"turns[{index}]"
                paths[here] = turn.row
                out: dict[str, Any] = {"prompt": turn.prompt}
                if turn.reference is not None:
                    out["reference"] = turn.reference
                responses: dict[str, Any] = {}
                for system, answer in turn.answers.items():
                    where = f"{here}.responses.{system}"
                    paths[where] = answer.row
                    responses[system] = self.answer_body(answer, where, paths)
                out["responses"] = responses
                if turn.preferences:
                    out["preferences"] = []
                    for position, (entry, entry_row) in enumerate(turn.preferences):
                        paths[f"{here}.preferences[{position}]"] = entry_row
                        out["preferences"].append(entry)
                turns.append(out)
            items.append({"id": item.external_id, "turns": turns})
            provenance.append(paths)
        index_of = {id(item): index for index, item in enumerate(self.items.values())}
        verdicts = [
            (index_of[id(item)], turn, judge, first, second, outcome, row)
            for item, turn, judge, first, second, outcome, row in self.judge_verdicts
        ]
        return BuiltItems(
            items=items, provenance=provenance, rows=self.rows, preferences=self.preferences, judge_verdicts=verdicts
        )


def build_items(tables: list[tuple[str, str, Iterator[tuple[int, dict[str, Any]]]]], mapping: Mapping) -> BuiltItems:
    """Groups the rows of one or more tables (label, unit of its row numbers, rows) into items. Every error names the
    table and row."""
    builder: _Builder | None = None
    seen_columns: set[str] = set()
    for label, unit, rows in tables:
        builder_for_table = _Builder(mapping, unit)
        if builder is not None:
            # Later tables extend the items of earlier ones (an answers table, then ratings, then preferences).
            builder_for_table.items = builder.items
            builder_for_table.by_prompt = builder.by_prompt
            builder_for_table.rows = builder.rows
            builder_for_table.preferences = builder.preferences
            builder_for_table.judge_verdicts = builder.judge_verdicts
        builder = builder_for_table
        multiple = len(tables) > 1
        builder.header_checked = multiple  # several tables: each holds some of the mapped columns
        try:
            for number, values in rows:
                if multiple and not seen_columns.issuperset(values):
                    seen_columns.update(values)
                builder.add(number, values)
        except DatasetImportError as exc:
            raise exc.in_file(label) if multiple else exc from None
    if builder is None or not builder.items:
        raise DatasetImportError("empty file", expected="at least one data row", found="no rows")
    absent = sorted(mapping.columns() - seen_columns - mapping.optional) if len(tables) > 1 else []
    if absent:
        raise DatasetImportError("column in none of the files", expected=f"a column named {absent[0]!r}", found="none")
    return builder.finish()

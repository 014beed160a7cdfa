"""Mappings from the columns of someone else's table (CSV, TSV, JSONL, Parquet) to evalsite's dataset format: the
mapping file's schema, read and checked here.

A mapping names, for each part of an item, the column that holds it: the item id, prompt, turn, system, answer and
reference; ratings in wide layout (one column per aspect), long layout (an aspect column and a score column) or
nested (a column holding one object of aspect scores per rater); preferences as pairs with a winner or as a choice
among K candidates, ties allowed; and judge scores. ``build_items`` (annotations.datasets.mapped_items) groups the
rows into items in the import format on the row reading of annotations.datasets.mapped_rows, which remembers which
row gave each part, so the import's own checks, run on the items, can name the row.

Nothing here writes; ``annotations.datasets.tables`` reads the tables and ``annotations.datasets.mapped_import``
hands the items to the JSONL import.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from annotations.datasets.tables import FORMATS
from annotations.errors import RubricError
from annotations.rubrics.specs import RubricSpec, parse_rubric, preset_rubric

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

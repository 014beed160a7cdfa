"""Reading the rows of a mapped table into the item tree: the item, turn and answer each row names, with the row that
first gave each part, and the cell values (blank, marks, scores) as the import format spells them."""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from annotations.datasets.mapping import Mapping
from annotations.errors import DatasetImportError


@dataclass
class AnswerPart:
    text: str
    row: int
    raters: list[str] = field(default_factory=list)
    scores: dict[str, dict[str, tuple[Any, int]]] = field(default_factory=dict)  # aspect -> rater -> (score, row)
    judges: dict[str, dict[str, tuple[float, int]]] = field(default_factory=dict)
    exclusion_marks: dict[str, tuple[Any, int]] = field(default_factory=dict)  # rater -> (mark, row)
    judge_filled: list[tuple[dict[str, Any], int]] = field(default_factory=list)


@dataclass
class TurnPart:
    prompt: str
    row: int
    reference: str | None = None
    answers: dict[str, AnswerPart] = field(default_factory=dict)
    preferences: list[tuple[dict[str, Any], int]] = field(default_factory=list)


@dataclass
class ItemPart:
    external_id: str
    row: int
    turns: dict[int, TurnPart] = field(default_factory=dict)


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


TRUE_MARKS = (True, "true", "True", "1", 1)
FALSE_MARKS = (False, "false", "False", "0", 0)


def is_blank(value: Any) -> bool:
    return value is None or value == "" or (isinstance(value, float) and math.isnan(value))


def mark_value(value: Any) -> Any:
    """A cell as a rater_excluded mark: true or false, None for an empty cell; anything else is kept as it is, for
    the JSONL import to refuse."""
    if is_blank(value):
        return None
    if value in TRUE_MARKS:
        return True
    if value in FALSE_MARKS:
        return False
    return value


def score_value(value: Any) -> Any:
    """A cell as a score: numbers stay numbers, numeric text becomes one, an empty cell or NaN is null (missing),
    any other text is kept for the import to accept as a missing code or refuse."""
    if is_blank(value):
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


PartT = TypeVar("PartT", "TurnPart", "AnswerPart")


class RowReader:
    """Reads a row's cells into the item tree: the item, turn and answer a row names, each remembered with the
    row that first gave it, so a later error can name that row."""

    def __init__(self, mapping: Mapping, unit: str) -> None:
        self.mapping = mapping
        self.unit = unit  # "data row" or "line"
        self.items: dict[str, ItemPart] = {}
        self.by_prompt: dict[str, str] = {}
        self.rows = 0
        self.preferences = 0
        self.header_checked = False
        self.judge_verdicts: list[tuple[ItemPart, int, str, str, str, float, int]] = []

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

    def item_for(self, row: int, values: dict[str, Any], prompt: str | None) -> ItemPart:
        mapping = self.mapping
        if mapping.item and (mapping.item in values or mapping.item not in mapping.optional):
            external_id = self.text(row, values, mapping.item, "item id")
        elif prompt is not None:
            external_id = self.by_prompt.setdefault(prompt, f"item-{len(self.by_prompt) + 1}")
        else:
            raise self.fail(row, "no item id", expected=f"a column {mapping.item or 'prompt'!r}")
        item = self.items.get(external_id)
        if item is None:
            item = self.items[external_id] = ItemPart(external_id=external_id, row=row)
        return item

    def turn_for(self, row: int, item: ItemPart, index: int, prompt: str | None) -> TurnPart:
        where = f"turn {index + 1} of item {item.external_id!r}"
        return self.find_or_add(
            row,
            item.turns,
            index,
            prompt,
            make=lambda given: TurnPart(prompt=given, row=row),
            held=lambda turn: turn.prompt,
            absent=("turn without a prompt", f"the prompt of {where}", "no prompt column in this row"),
            conflict=("conflicting prompt", lambda turn: f"the prompt given in {self.unit} {turn.row} for {where}"),
        )

    def answer_for(self, row: int, turn: TurnPart, system: str, text: str | None, item: ItemPart) -> AnswerPart:
        column = self.mapping.answer or "answer"
        return self.find_or_add(
            row,
            turn.answers,
            system,
            text,
            make=lambda given: AnswerPart(text=given, row=row),
            held=lambda answer: answer.text,
            absent=(
                "answer without text",
                f"the answer of system {system!r} (column {column!r})",
                "no answer in this row",
            ),
            conflict=(
                "conflicting answer",
                lambda answer: (
                    f"the answer of system {system!r} given in {self.unit} {answer.row} for item {item.external_id!r}"
                ),
            ),
        )

    def find_or_add(
        self,
        row: int,
        parts: dict[Any, PartT],
        key: Any,
        given: str | None,
        *,
        make: Callable[[str], PartT],
        held: Callable[[PartT], str],
        absent: tuple[str, str, str],
        conflict: tuple[str, Callable[[PartT], str]],
    ) -> PartT:
        """The part under `key`, made from `given` the first time a row names it; later rows must give the same
        text or none. `absent` is the error (message, expected, found) when the first row gives none, `conflict` the
        message and, from the part held, what was expected."""
        part = parts.get(key)
        if part is None:
            if given is None:
                message, expected, found = absent
                raise self.fail(row, message, expected=expected, found=found)
            part = parts[key] = make(given)
        elif given is not None and given != held(part):
            raise self.fail(row, conflict[0], expected=conflict[1](part), found=given)
        return part

"""The mapped import: a table (CSV, TSV, JSONL, Parquet) read through a mapping becomes items in the JSONL format,
which go through the JSONL import itself, so every rule it checks and every write it makes is the same. Its errors
are moved from the generated line to the row of the table that gave the value."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from django.contrib.auth.models import User
from django.db import transaction

from annotations.datasets import judge_scores
from annotations.datasets.importing import ImportResult, dataset_import, dataset_validate
from annotations.datasets.mapping import BuiltItems, Mapping, build_items, format_of, iter_rows
from annotations.errors import DatasetImportError
from annotations.rubrics import RubricSpec

PREVIEW_ITEMS = 5


@dataclass(frozen=True)
class MappedTable:
    """One input table: its file name (for the format and the error messages) and its bytes."""

    filename: str
    stream: IO[bytes]


@dataclass(frozen=True)
class MappedPreview:
    items: list[dict[str, Any]]
    rubric: RubricSpec
    notice: str
    n_items: int
    n_rows: int
    n_answers: int
    n_ratings: int
    n_preferences: int
    n_judge_scores: int
    n_judge_verdicts: int = 0


def _build(tables: list[MappedTable], mapping: Mapping) -> BuiltItems:
    readers: list[tuple[str, Iterator[tuple[int, dict[str, Any]]]]] = []
    for table in tables:
        fmt = format_of(table.filename, mapping)
        label = table.filename if fmt != "jsonl" or table.filename.endswith(".jsonl") else f"{table.filename}.jsonl"
        readers.append((label, iter_rows(table.stream, fmt)))
    return build_items(readers, mapping)


def _as_jsonl(built: BuiltItems) -> IO[bytes]:
    spooled = tempfile.SpooledTemporaryFile(max_size=32 * 1024 * 1024)  # noqa: SIM115 - returned to the caller
    for item in built.items:
        spooled.write(json.dumps(item, ensure_ascii=False).encode("utf-8") + b"\n")
    spooled.seek(0)
    return spooled  # type: ignore[return-value]


def _located(exc: DatasetImportError, built: BuiltItems, unit: str) -> DatasetImportError:
    """The import's error, located at the table row that gave the value (the item's first row otherwise)."""
    if exc.line is None:
        return exc
    row = built.row_of(exc.line, exc.field)
    item_id = built.items[exc.line - 1]["id"] if 1 <= exc.line <= len(built.items) else None
    moved = DatasetImportError(
        exc.reason if item_id is None else f"{exc.reason} (item {item_id!r})",
        field=exc.field,
        expected=exc.expected,
        found=exc.found,
    )
    return moved.at_row(row, unit=unit)


def _unit(tables: list[MappedTable]) -> str:
    return "line" if all(t.filename.endswith((".jsonl", ".ndjson", ".json")) for t in tables) else "row"


def _counts(built: BuiltItems) -> dict[str, int]:
    answers = ratings = judge_scores = 0
    for item in built.items:
        for turn in item["turns"]:
            for answer in turn["responses"].values():
                answers += 1
                ratings += sum(len(scores) for scores in answer.get("human_evals", {}).values())
                judge_scores += sum(len(by_aspect) for by_aspect in answer.get("auto_evals", {}).values())
    return {"n_answers": answers, "n_ratings": ratings, "n_judge_scores": judge_scores}


def mapped_preview(*, tables: list[MappedTable], mapping: Mapping, n_items: int = PREVIEW_ITEMS) -> MappedPreview:
    """Reads and checks everything as the import would, writes nothing, and returns the first items and the rubric
    the import would use (inferred from the data when the mapping declares none)."""
    built = _build(tables, mapping)
    try:
        rubric, notice = dataset_validate(stream=_as_jsonl(built), rubric=mapping.rubric)
    except DatasetImportError as exc:
        raise _located(exc, built, _unit(tables)) from None
    return MappedPreview(
        items=built.items[:n_items],
        rubric=rubric,
        notice=notice,
        n_items=len(built.items),
        n_rows=built.rows,
        n_preferences=built.preferences,
        n_judge_verdicts=len(built.judge_verdicts),
        **_counts(built),
    )


def mapped_import(*, tables: list[MappedTable], mapping: Mapping, name: str, owner: User | None = None) -> ImportResult:
    """All rows or nothing, as the JSONL import: the same checks, the same writes, in one transaction. Pairwise
    judges' verdicts become imported judges with their judgments, never preferences of a rater."""
    built = _build(tables, mapping)
    with transaction.atomic():
        try:
            result = dataset_import(stream=_as_jsonl(built), name=name, rubric=mapping.rubric, owner=owner)
        except DatasetImportError as exc:
            raise _located(exc, built, _unit(tables)) from None
        if built.judge_verdicts:
            _store_judge_verdicts(result, built, mapping)
    return result


def _store_judge_verdicts(result: ImportResult, built: BuiltItems, mapping: Mapping) -> None:
    """Each judge's verdicts on the answers the import just wrote, on the mapping's judge aspect."""
    from annotations.models import Response  # noqa: PLC0415 - only an import with judge verdicts needs it

    assert mapping.preferences is not None
    answers = {
        (external_id, index, key): pk
        for pk, external_id, index, key in Response.objects.filter(turn__item__dataset=result.dataset).values_list(
            "pk", "turn__item__external_id", "turn__index", "system__key"
        )
    }
    scoring = {
        name
        for item in built.items
        for turn in item["turns"]
        for body in turn["responses"].values()
        for name in body.get("auto_evals", {})
    }
    by_judge: dict[str, list[tuple[int, int, float]]] = {}
    for item_index, turn, judge, first, second, outcome, _row in built.judge_verdicts:
        external_id = built.items[item_index]["id"]
        by_judge.setdefault(judge, []).append(
            (answers[(external_id, turn, first)], answers[(external_id, turn, second)], outcome)
        )
    for judge, verdicts in by_judge.items():
        if judge in scoring:
            raise DatasetImportError(
                "judge named twice", expected=f"judge {judge!r} either scoring answers or giving verdicts", found="both"
            )
        judge_scores.imported_verdicts_create(
            dataset=result.dataset, name=judge, aspect=mapping.preferences.judge_aspect, verdicts=verdicts
        )

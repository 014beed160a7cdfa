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
from annotations.datasets.import_writer import ImportResult
from annotations.datasets.importing import dataset_import, dataset_validate
from annotations.datasets.mapped_items import build_items
from annotations.datasets.mapped_rows import BuiltItems
from annotations.datasets.mapping import Mapping
from annotations.datasets.tables import DEFAULT_DUPLICATES, TableReader
from annotations.errors import DatasetImportError
from annotations.rubrics.specs import RubricSpec

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
    read: TablesRead
    n_judge_verdicts: int = 0


@dataclass(frozen=True)
class TablesRead:
    """How the tables were read, for the summary: each table's format, compression, encoding, delimiter and rows,
    and the choice for exactly repeated rows with how many there were."""

    tables: list[str]
    duplicates: str
    repeated: int

    def duplicates_summary(self) -> str:
        if self.duplicates == "drop":
            return f"duplicates: drop (kept the first of each; {self.repeated} exactly repeated rows dropped)"
        if self.duplicates == "keep":
            return f"duplicates: keep ({self.repeated} exactly repeated rows imported as they are)"
        return "duplicates: refuse (no exactly repeated rows)"


def _readers(tables: list[MappedTable], mapping: Mapping, duplicates: str) -> list[TableReader]:
    return [
        TableReader(stream=table.stream, filename=table.filename, declared_format=mapping.format, duplicates=duplicates)
        for table in tables
    ]


def _with_source_line(exc: DatasetImportError, readers: list[TableReader]) -> DatasetImportError:
    """The error, with the file line where its row starts when that is not the row's plain position."""
    if exc.row is None or exc.unit != "data row":
        return exc
    named = [r for r in readers if r.filename == exc.file] if exc.file else readers
    if len(named) != 1:
        return exc  # several tables and no file named: the row cannot be placed in one
    return exc.starting_on_line(named[0].physical_line(exc.row))


def _build(readers: list[TableReader], mapping: Mapping) -> BuiltItems:
    tables: list[tuple[str, str, Iterator[tuple[int, dict[str, Any]]]]] = [
        (reader.filename, reader.unit, reader.iter_rows()) for reader in readers
    ]
    try:
        return build_items(tables, mapping)
    except DatasetImportError as exc:
        raise _with_source_line(exc, readers) from None


def _tables_read(readers: list[TableReader], duplicates: str) -> TablesRead:
    return TablesRead(
        tables=[reader.describe() for reader in readers],
        duplicates=duplicates,
        repeated=sum(reader.repeated for reader in readers),
    )


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


def _unit(readers: list[TableReader]) -> str:
    return "line" if all(reader.unit == "line" for reader in readers) else "data row"


def _counts(built: BuiltItems) -> dict[str, int]:
    answers = ratings = judge_scores = 0
    for item in built.items:
        for turn in item["turns"]:
            for answer in turn["responses"].values():
                answers += 1
                ratings += sum(len(scores) for scores in answer.get("human_evals", {}).values())
                judge_scores += sum(len(by_aspect) for by_aspect in answer.get("auto_evals", {}).values())
    return {"n_answers": answers, "n_ratings": ratings, "n_judge_scores": judge_scores}


def mapped_preview(
    *,
    tables: list[MappedTable],
    mapping: Mapping,
    n_items: int = PREVIEW_ITEMS,
    duplicates: str = DEFAULT_DUPLICATES,
) -> MappedPreview:
    """Reads and checks everything as the import would, writes nothing, and returns the first items and the rubric
    the import would use (inferred from the data when the mapping declares none)."""
    readers = _readers(tables, mapping, duplicates)
    built = _build(readers, mapping)
    try:
        rubric, notice = dataset_validate(stream=_as_jsonl(built), rubric=mapping.rubric)
    except DatasetImportError as exc:
        raise _with_source_line(_located(exc, built, _unit(readers)), readers) from None
    return MappedPreview(
        items=built.items[:n_items],
        rubric=rubric,
        notice=notice,
        n_items=len(built.items),
        n_rows=built.rows,
        n_preferences=built.preferences,
        read=_tables_read(readers, duplicates),
        n_judge_verdicts=len(built.judge_verdicts),
        **_counts(built),
    )


@dataclass(frozen=True)
class MappedImportResult:
    result: ImportResult
    read: TablesRead


def mapped_import(
    *,
    tables: list[MappedTable],
    mapping: Mapping,
    name: str,
    owner: User | None = None,
    duplicates: str = DEFAULT_DUPLICATES,
) -> MappedImportResult:
    """All rows or nothing, as the JSONL import: the same checks, the same writes, in one transaction. Pairwise
    judges' verdicts become imported judges with their judgments, never preferences of a rater."""
    readers = _readers(tables, mapping, duplicates)
    built = _build(readers, mapping)
    with transaction.atomic():
        try:
            result = dataset_import(stream=_as_jsonl(built), name=name, rubric=mapping.rubric, owner=owner)
        except DatasetImportError as exc:
            raise _with_source_line(_located(exc, built, _unit(readers)), readers) from None
        if built.judge_verdicts:
            _store_judge_verdicts(result, built, mapping)
    return MappedImportResult(result=result, read=_tables_read(readers, duplicates))


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

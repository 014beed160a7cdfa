"""Columns of a researcher's CSV file for the commands that read a stream or an export: every problem is a
CommandError naming the file, the row or the column."""

from __future__ import annotations

import csv
import math
from pathlib import Path

from django.core.management.base import CommandError

MAX_ROWS = 1_000_000


def read_rows(path: str) -> tuple[list[str], list[dict[str, str]]]:
    try:
        with Path(path).open(encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle)
            rows = []
            for row in reader:
                rows.append(row)
                if len(rows) > MAX_ROWS:
                    raise CommandError(f"{path} has more than {MAX_ROWS} rows")
            return list(reader.fieldnames or []), rows
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise CommandError(f"{path} is not a UTF-8 CSV file: {exc}") from None


def column_cells(rows: list[dict[str, str]], name: str, columns: list[str]) -> list[str]:
    if name not in columns:
        raise CommandError(f"the file has no column {name!r}; its columns are: {', '.join(columns) or 'none'}")
    return [(row.get(name) or "").strip() for row in rows]


def _number(cell: str, line: int, name: str) -> float:
    try:
        value = float(cell)
    except ValueError:
        raise CommandError(f"row {line}, column {name!r}: {cell!r} is not a number") from None
    if not math.isfinite(value):
        raise CommandError(f"row {line}, column {name!r}: {cell!r} is not a finite number")
    return value


def numbers(cells: list[str], name: str) -> list[float]:
    return [_number(cell, line, name) for line, cell in enumerate(cells, start=2)]


def optional_numbers(cells: list[str], name: str) -> list[float | None]:
    """Numbers where the cell has one, None where it is empty (an item without that value, e.g. not rated)."""
    values: list[float | None] = []
    for line, cell in enumerate(cells, start=2):
        values.append(None if cell == "" else _number(cell, line, name))
    return values

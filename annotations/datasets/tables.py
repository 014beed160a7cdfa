"""The tables of the mapped import (CSV, TSV, JSONL, Parquet, each optionally gzip-compressed) read as rows, within
limits on what an upload may become.

An upload's size cap bounds only its compressed bytes: a small gzip file or zstd-compressed Parquet file can hold
gigabytes. So the limits on columns, rows, decompressed bytes and characters per cell are checked while the table
is read, never after, and a Parquet file's own metadata is checked before any of its data is decompressed.

Row numbers: a CSV, TSV or Parquet table's rows are counted as *data rows* from 1, the header not counted and blank
lines skipped; when a quoted CSV field spans lines, the physical line where the row starts is kept as well. A JSONL
table's rows are its lines.
"""

from __future__ import annotations

import bisect
import codecs
import csv
import gzip
import hashlib
import io
import itertools
import json
import tempfile
import zlib
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from annotations.datasets.import_checks import iter_items
from annotations.errors import DatasetImportError

FORMATS = ("csv", "tsv", "jsonl", "parquet")
DELIMITERS = (",", ";", "\t", "|")  # in order of preference when two read the sample equally well
DUPLICATE_POLICIES = ("refuse", "drop", "keep")
DEFAULT_DUPLICATES = "refuse"
SNIFF_CHARS = 64 * 1024
SNIFF_RECORDS = 50
PARQUET_BATCH_ROWS = 1_000


@dataclass(frozen=True)
class TableLimits:
    """What one table may become once read; each refusal names the setting that sets it."""

    columns: int
    rows: int
    bytes: int
    cell_chars: int

    @classmethod
    def from_settings(cls) -> TableLimits:
        from django.conf import settings  # noqa: PLC0415 - keeps this module usable without Django configured

        return cls(
            columns=settings.IMPORT_MAX_COLUMNS,
            rows=settings.IMPORT_MAX_ROWS,
            bytes=settings.IMPORT_MAX_TABLE_BYTES,
            cell_chars=settings.IMPORT_MAX_CELL_CHARS,
        )

    def too_many_columns(self, found: str) -> DatasetImportError:
        return DatasetImportError(
            "too many columns", expected=f"at most {self.columns} columns (limit IMPORT_MAX_COLUMNS)", found=found
        )

    def too_many_rows(self, found: str) -> DatasetImportError:
        return DatasetImportError(
            "too many rows", expected=f"at most {self.rows} data rows (limit IMPORT_MAX_ROWS)", found=found
        )

    def too_many_bytes(self, found: str) -> DatasetImportError:
        return DatasetImportError(
            "table too large",
            expected=f"at most {self.bytes} bytes of data once decompressed (limit IMPORT_MAX_TABLE_BYTES)",
            found=found,
        )

    def cell_too_large(self, column: str, found: int) -> DatasetImportError:
        return DatasetImportError(
            f"cell too large in column {column!r}",
            expected=f"at most {self.cell_chars} characters (limit IMPORT_MAX_CELL_CHARS)",
            found=f"{found} characters",
        )


def format_of(filename: str, declared: str = "") -> str:
    """The table's format: the mapping's 'format' when it declares one, else the file's suffix (under any .gz)."""
    if declared:
        return declared
    name = filename[:-3] if filename.lower().endswith(".gz") else filename
    suffix = Path(name).suffix.lower().lstrip(".")
    if suffix in ("jsonl", "ndjson", "json"):
        return "jsonl"
    if suffix in FORMATS:
        return suffix
    raise DatasetImportError(
        "unknown file type",
        expected="a .csv, .tsv, .jsonl or .parquet file, optionally gzip-compressed (.gz), or 'format' in the mapping",
        found=filename,
    )


def first_repeated(names: Iterable[Hashable]) -> Hashable | None:
    """The first name that appears a second time, in one pass (a set, not a count per name: headers can be long)."""
    seen: set[Hashable] = set()
    for name in names:
        if name in seen:
            return name
        seen.add(name)
    return None


class _CappedReader(io.RawIOBase):
    """The bytes of a (possibly gzip-compressed) upload, refused as soon as more than the limit has been produced,
    so a compressed bomb is stopped after the limit and never expanded in full."""

    def __init__(self, source: IO[bytes], limits: TableLimits) -> None:
        self.source = source
        self.limits = limits
        self.produced = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            chunk = self.source.read(len(buffer))
        except (OSError, EOFError, zlib.error) as exc:
            raise DatasetImportError(
                "not a readable gzip file", expected="gzip-compressed data", found=str(exc) or type(exc).__name__
            ) from None
        self.produced += len(chunk)
        if self.produced > self.limits.bytes:
            raise self.limits.too_many_bytes("more")
        buffer[: len(chunk)] = chunk
        return len(chunk)


def _encoding(head: bytes) -> str:
    """The text encoding from the byte-order mark; UTF-8 without one."""
    if head.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"  # the codec reads the mark and the byte order from it
    return "utf-8"


def _outside_quotes(line: str) -> str:
    """The parts of a CSV line outside quoted fields (a doubled quote inside one toggles twice, so it stays inside)."""
    return "".join(line.split('"')[0::2]) if '"' in line else line


def _widest_consistent(widths_of: Callable[[str], list[int]]) -> str | None:
    """The delimiter among , ; tab | that gives every record the same number of cells, the most cells when several
    do; None when none gives more than one."""
    best, best_width = None, 1
    for delimiter in DELIMITERS:
        widths = set(widths_of(delimiter))
        if len(widths) == 1 and (width := widths.pop()) > best_width:
            best, best_width = delimiter, width
    return best


def _sniff_delimiter(head: str, complete: bool) -> str:
    """The table's delimiter, from the first lines read: counted outside quotes first (a few passes of str.count),
    parsed as CSV when a quoted field spans lines; a comma when neither decides (a row with the wrong number of cells
    is then reported)."""
    lines = head.splitlines()[:SNIFF_RECORDS]
    if not complete and len(lines) > 1:
        lines = lines[:-1]  # the sample may have cut the last line short
    lines = [_outside_quotes(line) for line in lines if line.strip()]
    counted = _widest_consistent(lambda delimiter: [line.count(delimiter) + 1 for line in lines])
    if counted is not None or '"' not in head:
        return counted or ","

    def parsed_widths(delimiter: str) -> list[int]:
        try:
            records = [
                r
                for r in itertools.islice(csv.reader(io.StringIO(head, newline=""), delimiter=delimiter), SNIFF_RECORDS)
                if r
            ]
        except csv.Error:
            return []
        if not complete and len(records) > 1:
            records = records[:-1]  # the sample may have cut the last record short
        return [len(r) for r in records]

    return _widest_consistent(parsed_widths) or ","


@dataclass
class TableReader:
    """One table of an import: reads its rows within the limits and keeps what it found for the summary (format,
    compression, encoding, delimiter, rows, exactly repeated rows)."""

    stream: IO[bytes]
    filename: str
    declared_format: str = ""
    limits: TableLimits = field(default_factory=TableLimits.from_settings)
    duplicates: str = DEFAULT_DUPLICATES
    format: str = ""
    compression: str = ""
    encoding: str = ""
    delimiter: str = ""
    rows: int = 0
    repeated: int = 0
    # (first data row, physical line minus data row) at each point the difference changes: a quoted field spanning
    # lines, or a blank line, shifts every later row.
    _line_shifts: list[tuple[int, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.duplicates not in DUPLICATE_POLICIES:
            raise DatasetImportError(
                "unknown duplicates choice", expected=" or ".join(DUPLICATE_POLICIES), found=self.duplicates
            )
        self.format = format_of(self.filename, self.declared_format)
        self.compression = "gzip" if self.filename.lower().endswith(".gz") else ""

    @property
    def unit(self) -> str:
        return "line" if self.format == "jsonl" else "data row"

    def physical_line(self, row: int) -> int | None:
        """The line of the file where a data row starts, when it is not simply the row after the header's lines."""
        at = bisect.bisect_right(self._line_shifts, (row, float("inf"))) - 1
        if at < 0:
            return None
        return row + self._line_shifts[at][1]

    def describe(self) -> str:
        parts = [self.format.upper()]
        if self.compression:
            parts.append(self.compression)
        if self.encoding:
            parts.append({"utf-8": "UTF-8", "utf-8-sig": "UTF-8 with BOM", "utf-16": "UTF-16"}[self.encoding])
        if self.delimiter:
            parts.append("delimiter " + ("tab" if self.delimiter == "\t" else repr(self.delimiter)))
        return f"{self.filename}: {', '.join(parts)}, {self.rows} rows"

    def iter_rows(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """(row number from 1, {column: value}) per row, exactly repeated rows handled as chosen."""
        readers = {"csv": self._csv_rows, "tsv": self._csv_rows, "jsonl": self._jsonl_rows}
        rows = self._parquet_rows() if self.format == "parquet" else readers[self.format](self._capped())
        first_row: dict[bytes, int] = {}
        for number, values in rows:
            key = hashlib.blake2b(
                json.dumps(values, sort_keys=True, default=str, ensure_ascii=False).encode("utf-8", "surrogatepass"),
                digest_size=16,
            ).digest()
            earlier = first_row.setdefault(key, number)
            if earlier != number:
                self.repeated += 1
                if self.duplicates == "refuse":
                    raise DatasetImportError(
                        "repeated row",
                        expected=f"distinct rows; this row repeats {self.unit} {earlier} exactly (choose duplicates "
                        "'drop' to keep only the first, or 'keep' to import every copy)",
                        found="the same cells",
                    ).at_row(number, unit=self.unit)
                if self.duplicates == "drop":
                    continue
            self.rows += 1
            yield number, values

    # --- the formats ------------------------------------------------------------------------------------------

    def _capped(self) -> io.BufferedReader:
        source: IO[bytes] = self.stream
        if self.compression:
            source = gzip.GzipFile(fileobj=self.stream, mode="rb")  # type: ignore[assignment]
        return io.BufferedReader(_CappedReader(source, self.limits))

    def _counted(self, count: int, number: int) -> None:
        if count > self.limits.rows:
            raise self.limits.too_many_rows("more").at_row(number, unit=self.unit)

    def _check_cells(self, number: int, values: dict[str, Any]) -> None:
        for column, value in values.items():
            if isinstance(value, str) and len(value) > self.limits.cell_chars:
                raise self.limits.cell_too_large(column, len(value)).at_row(number, unit=self.unit)

    def _jsonl_rows(self, stream: io.BufferedReader) -> Iterator[tuple[int, dict[str, Any]]]:
        for count, (line, values) in enumerate(iter_items(stream), start=1):
            self._counted(count, line)
            if len(values) > self.limits.columns:
                raise self.limits.too_many_columns(str(len(values))).at_row(line, unit="line")
            self._check_cells(line, values)
            yield line, values

    def _csv_rows(self, stream: io.BufferedReader) -> Iterator[tuple[int, dict[str, Any]]]:
        self.encoding = _encoding(stream.peek(4)[:4])
        if csv.field_size_limit() <= self.limits.cell_chars:
            csv.field_size_limit(self.limits.cell_chars + 1)  # our own check names the limit
        text = io.TextIOWrapper(stream, encoding=self.encoding, newline="")
        number = 0
        try:
            head = text.read(SNIFF_CHARS)
            complete = len(head) < SNIFF_CHARS
            if "\x00" in head and head.count("\x00") > len(head) // 4:  # a NUL every other byte: UTF-16 as UTF-8
                raise DatasetImportError(
                    "NUL bytes in the text",
                    expected="UTF-8 text, or UTF-16 with a byte-order mark",
                    found="NUL bytes (UTF-16 without a byte-order mark, or not a text table)",
                )
            self.delimiter = "\t" if self.format == "tsv" else _sniff_delimiter(head, complete)
            # A header of 20,000 names is refused by counting in the first characters read, before the rest of its
            # line is read and before the CSV reader makes a string of each name.
            width = _outside_quotes(head.split("\n", 1)[0]).count(self.delimiter) + 1
            if width > self.limits.columns:
                raise self.limits.too_many_columns(f"at least {width}")
            sample = head if complete else head + text.readline()  # the CSV reader is given whole lines
            reader = csv.reader(itertools.chain(io.StringIO(sample, newline=""), text), delimiter=self.delimiter)
            header = next(reader, None)
            if header is None:
                return
            if len(header) > self.limits.columns:
                raise self.limits.too_many_columns(str(len(header)))
            repeated = first_repeated(header)
            if repeated is not None:
                raise DatasetImportError(
                    "duplicate column", line=1, expected="distinct column names", found=str(repeated)
                )
            shift = 1  # a one-line header, then one line per row
            start = reader.line_num + 1
            for cells in reader:
                if not cells:
                    start = reader.line_num + 1
                    continue
                number += 1
                self._counted(number, number)
                if start - number != shift:
                    shift = start - number
                    self._line_shifts.append((number, shift))
                start = reader.line_num + 1
                if len(cells) != len(header):
                    raise DatasetImportError(
                        "wrong number of cells", expected=f"{len(header)} cells", found=f"{len(cells)}"
                    ).at_row(number, unit=self.unit)
                values = dict(zip(header, cells, strict=True))
                self._check_cells(number, values)
                yield number, values
        except UnicodeDecodeError as exc:
            name = {"utf-8": "UTF-8", "utf-8-sig": "UTF-8", "utf-16": "UTF-16"}[self.encoding]
            raise DatasetImportError(
                f"not valid {name}",
                expected=f"{name} text (UTF-8, or UTF-8 or UTF-16 with a byte-order mark)",
                found=f"byte 0x{exc.object[exc.start]:02x} "
                + (f"in the text after data row {number}" if number else "in the first rows"),
            ) from None
        except csv.Error as exc:
            raise DatasetImportError("unreadable CSV", expected="CSV text", found=str(exc)).at_row(
                number + 1, unit=self.unit
            ) from None
        finally:
            if not stream.closed:
                text.detach()  # the caller's stream stays open

    def _parquet_source(self) -> IO[bytes]:
        if not self.compression:
            return self.stream
        # Parquet is read from its end (the footer) first, so a gzip stream is expanded into a file, within the limit.
        copy = tempfile.SpooledTemporaryFile(max_size=8 * 1024 * 1024)  # noqa: SIM115 - closed by the caller's GC
        capped = self._capped()
        while chunk := capped.read(1024 * 1024):
            copy.write(chunk)
        copy.seek(0)
        return copy  # type: ignore[return-value]

    def _parquet_rows(self) -> Iterator[tuple[int, dict[str, Any]]]:
        import pyarrow as pa  # noqa: PLC0415 - pyarrow.parquet takes about 1.1 s to import; only Parquet needs it
        import pyarrow.parquet as pq  # noqa: PLC0415

        try:
            parquet = pq.ParquetFile(self._parquet_source())
        except (pa.ArrowException, OSError) as exc:
            raise DatasetImportError("not a readable Parquet file", expected="a Parquet file", found=str(exc)) from None
        self.check_parquet_metadata(parquet.metadata, len(parquet.schema_arrow))
        number = 0
        decoded = 0
        try:
            for batch in parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS):
                # The metadata's sizes are the writer's word: the data actually decoded is counted as well.
                decoded += batch.nbytes
                if decoded > self.limits.bytes:
                    raise self.limits.too_many_bytes("more").at_row(number + 1, unit=self.unit)
                for values in batch.to_pylist():
                    number += 1
                    self._counted(number, number)
                    self._check_cells(number, values)
                    yield number, values
        except pa.ArrowException as exc:
            raise DatasetImportError("not a readable Parquet file", expected="a Parquet file", found=str(exc)).at_row(
                number + 1, unit=self.unit
            ) from None

    def check_parquet_metadata(self, metadata: Any, columns: int) -> None:
        """Refuses a file whose footer already declares more columns, rows or uncompressed bytes than the limits,
        before any data page is decompressed."""
        if columns > self.limits.columns:
            raise self.limits.too_many_columns(str(columns))
        if metadata.num_rows > self.limits.rows:
            raise self.limits.too_many_rows(f"{metadata.num_rows} in the file's metadata")
        declared = sum(metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups))
        if declared > self.limits.bytes:
            raise self.limits.too_many_bytes(f"{declared} bytes declared by the file's metadata")

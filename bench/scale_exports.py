"""The exports of bench/scale.py and their floor, each run in a child process of its own so that its peak memory is
its own: the child reports its resident-set peak (VmHWM of /proc/self/status, which includes the interpreter and
Django, about 100 MB) and its time. Not getrusage's ru_maxrss: Linux carries it over from the parent through fork and
exec, so a child would report the benchmark's own peak.

    python -m bench.scale_exports <server url> <database> <dataset id> <kind> <target file>

kind is one of:

  csv            the flat CSV export (iter_flat_csv over iter_flat_rows)
  parquet        the ratings Parquet export (export_parquet_table)
  floor-csv      COPY (SELECT ...) TO STDOUT of the same rating rows, read row by row and written by csv.writer
  floor-parquet  the same COPY, its rows gathered into Arrow record batches of 100,000 and written by ParquetWriter

The floor reads the columns a rating row shows (item, turn, system, aspect, rater, origin, raw, value, is_missing,
rationale, comment, seconds spent, created at) in the export's order. It does not look up the submission a rating
was entered with, the consensus or the exclusions: those are the export's own work over the rows.
"""

from __future__ import annotations

import json
import subprocess  # nosec B404 - runs this module's own children
import sys
import time
from typing import Any

FLOOR_SQL = """
    SELECT i.external_id, t.index + 1, s.key, a.name, r.pseudonym, ra.origin, ra.raw::text, ra.value, ra.is_missing,
           ra.rationale, ra.comment, ra.seconds_spent, ra.created_at
    FROM annotations_rating ra
    JOIN annotations_response re ON re.id = ra.response_id
    JOIN annotations_turn t ON t.id = re.turn_id
    JOIN annotations_item i ON i.id = t.item_id
    JOIN annotations_system s ON s.id = re.system_id
    JOIN annotations_aspect a ON a.id = ra.aspect_id
    JOIN annotations_rater r ON r.id = ra.rater_id
    WHERE i.dataset_id = {dataset_id}
    ORDER BY i.position, t.index, re.position, a.position, ra.position, ra.id
"""
FLOOR_TYPES = ["text", "int4", "text", "text", "text", "text", "text", "float8", "bool", "text", "text", "float8"]
FLOOR_TYPES.append("timestamptz")
FLOOR_BATCH_ROWS = 100_000


def _floor_rows(url: str, dataset_id: int) -> Any:
    import psycopg

    with psycopg.connect(url) as conn, conn.cursor() as cursor:
        query = FLOOR_SQL.format(dataset_id=int(dataset_id))
        with cursor.copy(f"COPY ({query}) TO STDOUT") as copy:
            copy.set_types(FLOOR_TYPES)
            yield from copy.rows()


def _floor_csv(url: str, dataset_id: int, target: str) -> int:
    import csv

    count = 0
    with open(target, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\r\n")
        for row in _floor_rows(url, dataset_id):
            writer.writerow(row)
            count += 1
    return count


def _floor_parquet(url: str, dataset_id: int, target: str) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from annotations.datasets.parquet_export import _schemas

    # The export's own column types, for the columns the floor reads (the first thirteen, in the same order).
    schema = pa.schema(list(_schemas()["ratings"])[: len(FLOOR_TYPES)])
    count = 0
    with pq.ParquetWriter(target, schema, compression="zstd") as writer:
        batch: list[tuple[Any, ...]] = []
        for row in _floor_rows(url, dataset_id):
            batch.append(row)
            if len(batch) >= FLOOR_BATCH_ROWS:
                writer.write_batch(
                    pa.RecordBatch.from_arrays([pa.array(c) for c in zip(*batch, strict=True)], schema=schema)
                )
                count += len(batch)
                batch = []
        if batch:
            writer.write_batch(
                pa.RecordBatch.from_arrays([pa.array(c) for c in zip(*batch, strict=True)], schema=schema)
            )
            count += len(batch)
    return count


def _export(dataset_id: int, kind: str, target: str) -> int:
    from annotations.datasets.flat_export import iter_flat_csv, iter_flat_rows
    from annotations.datasets.parquet_export import export_parquet_table
    from annotations.models import Dataset

    dataset = Dataset.objects.get(pk=dataset_id)
    if kind == "parquet":
        return export_parquet_table(dataset=dataset, table="ratings", target=target)
    count = 0
    with open(target, "w", encoding="utf-8") as handle:
        for chunk in iter_flat_csv(iter_flat_rows(dataset=dataset)):
            handle.write(chunk)
            count += chunk.count("\n")
    return count - 1  # the header


def _peak_rss() -> int:
    """This process's peak resident set in bytes: VmHWM, kept per address space, so new at exec."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024  # kB
    raise RuntimeError("no VmHWM in /proc/self/status")


def child_main(argv: list[str]) -> int:
    server_url, database, dataset_id, kind, target = argv
    # Django's start is neither the export's nor the floor's: the time starts once it is set up (its memory is in
    # both peaks).
    from bench.database import set_up_django_on

    set_up_django_on(server_url, database)
    if kind.startswith("floor-"):
        writer = _floor_csv if kind == "floor-csv" else _floor_parquet
        started = time.perf_counter()
        rows = writer(f"{server_url}/{database}", int(dataset_id), target)
    else:
        started = time.perf_counter()
        rows = _export(int(dataset_id), kind, target)
    seconds = time.perf_counter() - started
    peak = _peak_rss()
    print(json.dumps({"seconds": seconds, "peak_rss": peak, "rows": rows}))
    return 0


def run_child(server_url: str, database: str, dataset_id: int, kind: str, target: str) -> dict[str, Any]:
    """Runs one export or floor in a fresh interpreter; returns its seconds, peak RSS in bytes and row count."""
    completed = subprocess.run(  # nosec B603 - this interpreter and this module, fixed arguments
        [sys.executable, "-m", "bench.scale_exports", server_url, database, str(dataset_id), kind, target],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))

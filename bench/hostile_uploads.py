"""Hostile uploads to the mapped import: what a refusal costs the worker that reads them.

    .venv/bin/python bench/hostile_uploads.py [--columns 20000] [--bomb-rows 100000] [--bomb-cell 4000] [--repeat 5]

header  a CSV header of --columns names against one of 20, both refused (the wide one by IMPORT_MAX_COLUMNS, the
        narrow one for lacking the mapping's columns): the median time of each and their ratio, which must stay
        within 20x; then the same wide header with the column limit lifted, so the duplicate-column check itself
        runs over every name (a set: linear).
bomb    a zstd Parquet file of --bomb-rows rows of --bomb-cell highly compressible characters (about 1 MB on disk,
        rows x cell bytes once decompressed), previewed with the ready-made helpsteer2 mapping: the time to the
        refusal and the growth of the process's peak memory over what it held before; bounds 10 s and 300 MB.

Both go through annotations.datasets.mapped_import.mapped_preview, the function the page and the command call.
The bomb is written by a child process, so its construction does not count in the reader's peak memory. Exits with
status 1 when a bound is exceeded.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADER_RATIO_BOUND = 20.0
BOMB_SECONDS_BOUND = 10.0
BOMB_MEMORY_BOUND_MB = 300.0


def _memory_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def write_bomb(path: str, rows: int, cell: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("prompt", pa.string()), ("response", pa.string())])
    with pq.ParquetWriter(path, schema, compression="zstd", compression_level=19) as writer:
        step = 1_000
        for start in range(0, rows, step):
            numbers = range(start, min(rows, start + step))
            writer.write_table(
                pa.table(
                    {"prompt": [f"p{i % 7}" for i in numbers], "response": [f"{i}" + "a" * cell for i in numbers]},
                    schema=schema,
                )
            )


def refusal_seconds(data: bytes, filename: str, mapping: object) -> tuple[float, str]:
    from annotations.datasets.mapped_import import MappedTable, mapped_preview
    from annotations.errors import DatasetImportError

    started = time.perf_counter()
    try:
        mapped_preview(tables=[MappedTable(filename, io.BytesIO(data))], mapping=mapping)  # type: ignore[arg-type]
    except DatasetImportError as exc:
        return time.perf_counter() - started, str(exc)
    raise SystemExit(f"{filename} was not refused")


def median_refusal(data: bytes, filename: str, mapping: object, repeat: int) -> tuple[float, str]:
    runs = [refusal_seconds(data, filename, mapping) for _ in range(repeat)]
    return statistics.median(seconds for seconds, _ in runs), runs[0][1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--columns", type=int, default=20_000)
    parser.add_argument("--bomb-rows", type=int, default=100_000)
    parser.add_argument("--bomb-cell", type=int, default=4_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--write-bomb", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write_bomb:
        write_bomb(args.write_bomb, args.bomb_rows, args.bomb_cell)
        return 0

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    import django

    django.setup()
    import pyarrow.parquet  # noqa: F401 - loaded before the baseline, as in a worker that read Parquet once
    from django.test import override_settings

    from annotations.datasets.mapping import ready_made_mapping

    mapping = ready_made_mapping("helpsteer2")
    failed = False

    narrow = (",".join(f"column_{i}" for i in range(20)) + "\n").encode()
    wide = (",".join(f"column_{i}" for i in range(args.columns)) + "\n").encode()
    refusal_seconds(narrow, "warm-up.csv", mapping)
    narrow_s, _ = median_refusal(narrow, "narrow.csv", mapping, args.repeat)
    wide_s, wide_message = median_refusal(wide, "wide.csv", mapping, args.repeat)
    ratio = wide_s / narrow_s
    failed |= ratio > HEADER_RATIO_BOUND
    print(
        f"header: {args.columns} columns ({len(wide) / 1024:.0f} KB) refused in {wide_s * 1000:.2f} ms, 20 columns in "
        f"{narrow_s * 1000:.2f} ms: ratio {ratio:.1f}x (bound {HEADER_RATIO_BOUND:.0f}x)"
        f" -- {wide_message.split(': ', 1)[-1][:80]}"
    )
    with override_settings(IMPORT_MAX_COLUMNS=args.columns + 1):
        repeated = wide[:-1] + b",column_0\n"
        lifted_s, lifted_message = median_refusal(repeated, "wide.csv", mapping, args.repeat)
    print(
        f"header, column limit lifted: {args.columns + 1} columns, the last repeating the first, refused in "
        f"{lifted_s * 1000:.2f} ms -- {lifted_message.split(': ', 1)[-1][:60]}"
    )

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "bomb.parquet")
        subprocess.run(
            [sys.executable, __file__, "--write-bomb", path, "--bomb-rows", str(args.bomb_rows),
             "--bomb-cell", str(args.bomb_cell)],
            check=True,
        )  # fmt: skip
        data = Path(path).read_bytes()
        try:
            with open("/proc/self/clear_refs", "w") as clear:
                clear.write("5")  # resets the peak (VmHWM) to the present size, so earlier peaks do not count
        except OSError:
            pass  # the peak then includes earlier ones: an overestimate
        baseline_kb = _memory_kb("VmRSS")
        seconds, message = refusal_seconds(data, "bomb.parquet", mapping)
        growth_mb = (_memory_kb("VmHWM") - baseline_kb) / 1024
    failed |= seconds > BOMB_SECONDS_BOUND or growth_mb > BOMB_MEMORY_BOUND_MB
    print(
        f"bomb: {args.bomb_rows} rows, {len(data) / 1e6:.2f} MB zstd Parquet, refused in {seconds:.3f} s "
        f"(bound {BOMB_SECONDS_BOUND:.0f} s), peak memory growth {growth_mb:.0f} MB (bound {BOMB_MEMORY_BOUND_MB:.0f} "
        f"MB) -- found {message.rsplit('found ', 1)[-1]}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Import/export benchmark on Postgres: 404 items x 10 systems x 5 aspects x 3 raters = 60,600 ratings.

    python -m bench.import_export [--items 404] [--systems 10] [--raters 3] [--keep-db]

Creates its own database (evalsite_bench_io, dropped at the end), migrates it, generates the file with
bench.datagen, then measures, each with wall seconds and peak RSS of this process during the phase:

  import   annotations.datasets.importing.dataset_import (validate pass + chunked write pass, one transaction)
  export   annotations.datasets.exporting.iter_export_lines written to a file
  floor    json.loads of every line + COPY of the same item/turn/response/rating rows into temp tables of the same
           shape (psycopg COPY, no validation, no constraints): what any importer must at least spend
  floor    for export: COPY TO of those rows + json.dumps of the parsed lines

Targets: import <= 15 s, export <= 10 s, peak RSS < 1 GB.
"""

import argparse
import io
import json
import os
import resource
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from bench.copy_rows import imported_rating_row, response_row
from bench.database import drop_database, recreate_database, set_up_django_on

BENCH_DB = "evalsite_bench_io"
SERVER_URL = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432")
TARGETS = {"import": 15.0, "export": 10.0}
RSS_LIMIT = 1024**3


class PeakRss:
    """Samples this process's RSS in a thread, so each phase gets its own peak (ru_maxrss only grows)."""

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._process = psutil.Process()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._process.memory_info().rss)
            self._stop.wait(self.interval)

    @contextmanager
    def measure(self) -> Iterator["PeakRss"]:
        self.peak = self._process.memory_info().rss
        thread = threading.Thread(target=self._run, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join()
            self._stop.clear()
            self.peak = max(self.peak, self._process.memory_info().rss)


def timed(label: str, action: Callable[[], Any], results: dict[str, dict[str, float]]) -> Any:
    sampler = PeakRss()
    with sampler.measure():
        started = time.perf_counter()
        value = action()
        seconds = time.perf_counter() - started
    results[label] = {"seconds": seconds, "rss": float(sampler.peak)}
    return value


def floor_rows(lines: list[dict[str, Any]]) -> dict[str, list[tuple[Any, ...]]]:
    """The rows an import writes, built with no checks; ids are assigned here as COPY needs them."""
    from psycopg.types.json import Jsonb

    items: list[tuple[Any, ...]] = []
    turns: list[tuple[Any, ...]] = []
    responses: list[tuple[Any, ...]] = []
    ratings: list[tuple[Any, ...]] = []
    systems: dict[str, int] = {}
    raters: dict[str, int] = {}
    aspects: dict[str, int] = {}
    turn_id = response_id = rating_id = 0
    now = datetime.now(UTC)
    for position, line in enumerate(lines):
        item_id = position + 1
        items.append((item_id, 1, str(line["id"]), position, Jsonb({k: v for k, v in line.items() if k != "turns"})))
        for index, turn in enumerate(line["turns"]):
            turn_id += 1
            source = {k: v for k, v in turn.items() if k != "responses"}
            turns.append((turn_id, item_id, index, turn["prompt"], turn.get("reference"), None, Jsonb(source)))
            for answer_position, (key, answer) in enumerate(turn["responses"].items()):
                response_id += 1
                system_id = systems.setdefault(key, len(systems) + 1)
                responses.append(response_row(response_id, turn_id, system_id, answer_position, answer))
                for aspect, tokens in answer.get("human_evals", {}).items():
                    aspect_id = aspects.setdefault(aspect, len(aspects) + 1)
                    for rater_position, token in enumerate(tokens):
                        rating_id += 1
                        rater_id = raters.setdefault(f"#{rater_position + 1}", len(raters) + 1)
                        ratings.append(
                            imported_rating_row(rating_id, response_id, aspect_id, rater_id, rater_position, token, now)
                        )
    return {"item": items, "turn": turns, "response": responses, "rating": ratings}


FLOOR_COLUMNS = {
    "item": ["id", "dataset_id", "external_id", "position", "source"],
    "turn": ["id", "item_id", "index", "prompt", "reference", "context", "source"],
    "response": ["id", "turn_id", "system_id", "position", "text", "source", "eval_aspects", "has_human_evals"],
    "rating": [
        *("id", "response_id", "aspect_id", "rater_id", "position", "raw", "value", "is_missing"),
        *("rationale", "comment", "seconds_spent", "origin", "created_at", "updated_at"),
    ],
}


def floor_copy_in(rows: dict[str, list[tuple[Any, ...]]]) -> Any:
    """COPY the rows into temp tables shaped like the real ones (LIKE copies columns, types and NOT NULL)."""
    import psycopg

    conn = psycopg.connect(f"{SERVER_URL}/{BENCH_DB}")
    with conn.cursor() as cursor:
        for name, table_rows in rows.items():
            table = f"floor_{name}"
            cursor.execute(f"CREATE TEMP TABLE {table} (LIKE annotations_{name} INCLUDING DEFAULTS)")
            columns = ", ".join(f'"{c}"' for c in FLOOR_COLUMNS[name])
            with cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in table_rows:
                    copy.write_row(row)
    conn.commit()
    return conn


def floor_copy_out(conn: Any) -> int:
    size = 0
    with conn.cursor() as cursor:
        for name in FLOOR_COLUMNS:
            with cursor.copy(f"COPY floor_{name} TO STDOUT") as copy:
                for block in copy:
                    size += len(block)
    return size


def _report(results: dict[str, dict[str, float]], baseline_rss: int, lossless: bool) -> bool:
    """Prints each phase next to its floor and target; True when every target is met."""
    floor_import = results["floor: json parse"]["seconds"] + results["floor: COPY in"]["seconds"]
    floor_export = results["floor: COPY out"]["seconds"] + results["floor: json dumps"]["seconds"]
    print(f"\n{'phase':<20} {'seconds':>8} {'peak RSS MB':>12}")
    for label, values in results.items():
        print(f"{label:<20} {values['seconds']:>8.2f} {values['rss'] / 2**20:>12.0f}")
    print(f"\nimport floor (parse + COPY in)   {floor_import:6.2f} s")
    print(f"export floor (COPY out + dumps)  {floor_export:6.2f} s")
    ok = True
    for phase, floor in (("import", floor_import), ("export", floor_export)):
        seconds, rss = results[phase]["seconds"], results[phase]["rss"]
        verdict = seconds <= TARGETS[phase] and rss < RSS_LIMIT
        ok = ok and verdict
        print(
            f"{phase}: {seconds:.2f} s = {seconds / floor:.1f}x floor; target <= {TARGETS[phase]:.0f} s; "
            f"peak RSS {rss / 2**20:.0f} MB (< 1024 MB) -> {'OK' if verdict else 'MISSED'}"
        )
    print(f"RSS after django.setup() (before any phase): {baseline_rss / 2**20:.0f} MB")
    print(f"process ru_maxrss {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    print(f"round trip of the exported file: {'JSON-equal' if lossless else 'DIFFERENT'}")
    return ok


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=404)
    parser.add_argument("--systems", type=int, default=10)
    parser.add_argument("--raters", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep-db", action="store_true", help="do not drop the benchmark database at the end")
    return parser.parse_args()


def main() -> int:
    args = _arguments()

    from bench.datagen import generate_llm_jp_jsonl

    workdir = Path(tempfile.mkdtemp(prefix="evalsite-bench-io-"))
    data_path = workdir / "llm_jp.jsonl"
    counts = generate_llm_jp_jsonl(
        data_path, items=args.items, systems=args.systems, raters=args.raters, seed=args.seed
    )
    print(
        f"data: {counts['items']} items, {counts['turns']} turns, {counts['responses']} answers, "
        f"{counts['ratings']} ratings, {counts['bytes'] / 1e6:.1f} MB ({data_path})"
    )

    recreate_database(SERVER_URL, BENCH_DB)
    try:
        set_up_django_on(SERVER_URL, BENCH_DB)
        baseline_rss = psutil.Process().memory_info().rss
        from django.db import connection

        from annotations.datasets.exporting import iter_export_lines
        from annotations.datasets.importing import dataset_import

        results: dict[str, dict[str, float]] = {}

        def run_import() -> Any:
            with open(data_path, "rb") as stream:
                return dataset_import(stream=stream, name="bench", preset="llm-human-eval-jp")

        result = timed("import", run_import, results)
        assert result.ratings == counts["ratings"], (result.ratings, counts["ratings"])

        export_path = workdir / "export.jsonl"

        def run_export() -> None:
            with open(export_path, "w", encoding="utf-8") as handle:
                for line in iter_export_lines(dataset=result.dataset):
                    handle.write(line)

        timed("export", run_export, results)
        connection.close()

        def parse() -> list[dict[str, Any]]:
            with open(data_path, "rb") as handle:
                return [json.loads(line) for line in handle]

        lines = timed("floor: json parse", parse, results)
        rows = floor_rows(lines)  # building tuples is neither parsing nor COPY; kept out of the floor
        conn = timed("floor: COPY in", lambda: floor_copy_in(rows), results)
        timed("floor: COPY out", lambda: floor_copy_out(conn), results)

        def dumps() -> int:
            buffer = io.StringIO()
            for line in lines:
                buffer.write(json.dumps(line, ensure_ascii=False) + "\n")
            return buffer.tell()

        timed("floor: json dumps", dumps, results)
        conn.close()

        with open(export_path, encoding="utf-8") as handle:
            exported = [json.loads(line) for line in handle]
        lossless = exported == lines
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        if not args.keep_db:
            from django.db import connections

            connections.close_all()
            drop_database(SERVER_URL, BENCH_DB)

    ok = _report(results, baseline_rss, lossless)
    return 0 if ok and lossless else 1


if __name__ == "__main__":
    sys.exit(main())

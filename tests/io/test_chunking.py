"""Import and export work chunk by chunk (IMPORT_CHUNK_ITEMS), so memory follows the chunk, not the file."""

import io
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotations.datasets import import_writer
from annotations.datasets.exporting import iter_export_lines
from annotations.datasets.importing import dataset_import
from bench.datagen import generate_llm_jp_jsonl


def _inserts_into(queries: list[dict[str, Any]], table: str) -> int:
    return sum(1 for q in queries if q["sql"].startswith(f'INSERT INTO "{table}"'))


@pytest.mark.django_db
def test_import_writes_items_and_ratings_in_several_chunks(
    tmp_path: Path, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.IMPORT_CHUNK_ITEMS = 5
    path = tmp_path / "chunks.jsonl"
    counts = generate_llm_jp_jsonl(path, items=23, systems=3, seed=11, max_chars=120)
    bulk_writes: list[tuple[str, int]] = []
    real_insert_rows = import_writer._insert_rows

    def recording_insert_rows(model: Any, rows: list[dict[str, Any]], **kwargs: Any) -> list[int]:
        bulk_writes.append((model.__name__, len(rows)))
        return real_insert_rows(model, rows, **kwargs)

    monkeypatch.setattr(import_writer, "_insert_rows", recording_insert_rows)
    with open(path, "rb") as stream, CaptureQueriesContext(connection) as captured:
        result = dataset_import(stream=stream, name="chunks", preset="llm-human-eval-jp")
    assert result.items == 23 and result.ratings == counts["ratings"]
    item_writes = [n for name, n in bulk_writes if name == "Item"]
    turn_writes = [n for name, n in bulk_writes if name == "Turn"]
    assert item_writes == [5, 5, 5, 5, 3]  # ceil(23 / 5) chunks
    assert len(turn_writes) == 5 and sum(turn_writes) == result.turns
    # Every table is written by COPY on Postgres; nothing goes in row by row through INSERT.
    if connection.vendor == "postgresql":
        assert _inserts_into(captured.captured_queries, "annotations_item") == 0
        assert _inserts_into(captured.captured_queries, "annotations_turn") == 0
    rating_writes = [n for name, n in bulk_writes if name == "Rating"]
    response_writes = [n for name, n in bulk_writes if name == "Response"]
    assert len(rating_writes) == 5 and sum(rating_writes) == counts["ratings"]
    assert len(response_writes) == 5 and sum(response_writes) == counts["responses"]
    assert max(rating_writes) <= 5 * 2 * 3 * 5 * 3  # a chunk: 5 items, <= 2 turns, 3 systems, 5 aspects, 3 raters


@pytest.mark.django_db
def test_export_reads_items_in_chunks(tmp_path: Path, settings: Any) -> None:
    path = tmp_path / "chunks.jsonl"
    generate_llm_jp_jsonl(path, items=23, systems=3, seed=11, max_chars=120)
    with open(path, "rb") as stream:
        dataset = dataset_import(stream=stream, name="chunks", preset="llm-human-eval-jp").dataset
    settings.IMPORT_CHUNK_ITEMS = 5
    with CaptureQueriesContext(connection) as captured:
        lines = list(iter_export_lines(dataset=dataset))
    assert len(lines) == 23
    item_reads = [q for q in captured.captured_queries if q["sql"].startswith('SELECT "annotations_item"')]
    assert len(item_reads) == 6  # five chunks, then an empty read that ends the loop
    assert all("LIMIT 5" in q["sql"] for q in item_reads)


@pytest.mark.django_db
def test_import_memory_follows_the_chunk_not_the_file(tmp_path: Path, settings: Any) -> None:
    """Quadrupling the file leaves the import's peak Python allocation nearly flat with a fixed chunk size."""
    settings.IMPORT_CHUNK_ITEMS = 4

    def peak_for(items: int, name: str) -> int:
        path = tmp_path / f"{name}.jsonl"
        generate_llm_jp_jsonl(path, items=items, systems=2, seed=2, min_chars=2000, max_chars=2001)
        data = path.read_bytes()
        tracemalloc.start()
        try:
            dataset_import(stream=io.BytesIO(data), name=name, preset="llm-human-eval-jp")
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    small = peak_for(12, "small")
    large = peak_for(48, "large")
    assert large < small * 1.8, (small, large)

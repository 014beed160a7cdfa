"""streamed_values gives the ORM's own tuples, and the flat and Parquet exports read through it are the same as when
read through the ORM's iterator (on Postgres the two are different paths; on SQLite the same one)."""

from pathlib import Path
from typing import Any

import pytest
from django.db.models import BigIntegerField, Value

from annotations.datasets import flat_export
from annotations.datasets.flat_export import iter_flat_csv, iter_flat_rows
from annotations.datasets.parquet_export import parquet_bytes
from annotations.datasets.streamed_values import streamed_values
from annotations.models import Dataset, Rating
from tests.io.helpers import run_import_cli, write_lines

LINES: list[dict[str, Any]] = [
    {
        "id": f"item{i}",
        "turns": [
            {
                "prompt": f"p{i}",
                "responses": {
                    "a": {"response": "x", "raters": ["r1", "r2"], "human_evals": {"overall": [i % 5 + 1, "NA"]}},
                    "b": {"response": "y", "raters": ["r2"], "human_evals": {"overall": [None]}},
                },
            }
        ],
    }
    for i in range(7)
]
# Tokens the import would refuse for this rubric but a rating can hold: a fraction, text, a negative number, a list,
# an object of error spans, a string of digits.
ODD_TOKENS: list[Any] = [4.5, "four", -2, [1, 2], {"spans": [{"start": 0, "end": 1, "category": "c"}]}, "12"]


@pytest.fixture
def dataset(db: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Dataset:
    code, _, err = run_import_cli(write_lines(tmp_path / "s.jsonl", LINES), "streamed", capsys=capsys)
    assert code == 0, err
    for rating, token in zip(Rating.objects.order_by("id"), ODD_TOKENS, strict=False):
        Rating.objects.filter(pk=rating.pk).update(raw=token, is_missing=False, value=1.0)
    return Dataset.objects.get(name="streamed")


def _orm_iterator(queryset: Any, *, chunk_size: int) -> Any:
    return queryset.iterator(chunk_size=chunk_size)


def test_streamed_values_are_the_orm_values(dataset: Dataset) -> None:
    ratings = (
        Rating.objects.filter(response__turn__item__dataset=dataset)
        .annotate(nothing=Value(None, output_field=BigIntegerField()))
        .order_by("response__turn__item__position", "id")
        .values_list("id", "raw", "value", "is_missing", "created_at", "rater__pseudonym", "nothing", "response_id")
    )
    expected = list(ratings.iterator(chunk_size=3))
    assert len(expected) == 21
    assert list(streamed_values(ratings, chunk_size=3)) == expected
    assert [type(row[1]) for row in streamed_values(ratings, chunk_size=3)] == [type(row[1]) for row in expected]
    assert list(streamed_values(ratings.filter(id__in=[]), chunk_size=3)) == []


def test_flat_exports_are_the_same_read_either_way(dataset: Dataset, monkeypatch: pytest.MonkeyPatch) -> None:
    streamed_csv = "".join(iter_flat_csv(iter_flat_rows(dataset=dataset)))
    streamed_parquet = parquet_bytes(dataset=dataset, table="ratings")
    monkeypatch.setattr(flat_export, "streamed_values", _orm_iterator)
    assert "".join(iter_flat_csv(iter_flat_rows(dataset=dataset))) == streamed_csv
    assert parquet_bytes(dataset=dataset, table="ratings") == streamed_parquet
    assert streamed_csv.count("\r\n") == 1 + 21 + 1  # the header, the ratings, the error span

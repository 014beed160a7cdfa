"""Error spans in and out: the JSONL format round-trips them losslessly (offsets, categories, severities, notes and a
"no error" confirmation), and the flat export gives one row per span after the rating row that holds the score."""

import io
import json
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from annotations.datasets.exporting import iter_export_lines
from annotations.datasets.flat_export import iter_flat_rows
from annotations.datasets.importing import dataset_import
from annotations.errors import DatasetImportError
from annotations.models import ErrorSpan, Rating
from annotations.rubrics.specs import parse_rubric
from tests.conftest import CAST_PASSWORD
from tests.spans.world import ANSWERS, SPAN_RUBRIC

pytestmark = pytest.mark.django_db

MARKED = {
    "no_error": False,
    "spans": [
        {"start": 8, "end": 9, "category": "Accuracy/Mistranslation", "severity": "major", "note": "emoji for a word"},
        {"start": 10, "end": 13, "category": "Fluency/Grammar", "severity": "minor"},
        {"start": 8, "end": 13, "category": "Fluency/Grammar", "severity": "minor"},
    ],
}
CLEAN = {"no_error": True, "spans": []}


def _lines(tokens: list) -> bytes:  # type: ignore[type-arg]
    line = {
        "id": "q0",
        "turns": [
            {
                "prompt": "Translate.",
                "responses": {
                    "sys_a": {"response": ANSWERS[0], "raters": ["w1", "w2", "w3"], "human_evals": {"mqm": tokens}}
                },
            }
        ],
    }
    return json.dumps(line, ensure_ascii=False).encode()


def _import(body: bytes, name: str, owner: User | None = None):  # type: ignore[no-untyped-def]
    rubric = parse_rubric(SPAN_RUBRIC, source="file")
    return dataset_import(stream=io.BytesIO(body), name=name, rubric=rubric, owner=owner).dataset


def test_jsonl_round_trip_keeps_every_span() -> None:
    dataset = _import(_lines([MARKED, CLEAN, "NA"]), "first")
    assert ANSWERS[0][8:9] == "😀" and ANSWERS[0][10:13] == "eat"
    values = dict(Rating.objects.filter(aspect__name="mqm").values_list("rater__external_id", "value"))
    assert values == {"w1": 7.0, "w2": 0.0, "w3": None}
    assert ErrorSpan.objects.count() == 3
    exported = "\n".join(iter_export_lines(dataset=dataset)).encode()
    again = _import(exported, "second")
    first_spans = list(
        ErrorSpan.objects.filter(rating__aspect__dataset=dataset)
        .values_list("rating__rater__external_id", "position", "start", "end", "category", "severity", "note")
        .order_by("rating__rater__external_id", "position")
    )
    second_spans = list(
        ErrorSpan.objects.filter(rating__aspect__dataset=again)
        .values_list("rating__rater__external_id", "position", "start", "end", "category", "severity", "note")
        .order_by("rating__rater__external_id", "position")
    )
    assert first_spans == second_spans and len(first_spans) == 3
    tokens = json.loads(exported.splitlines()[0])["turns"][0]["responses"]["sys_a"]["human_evals"]["mqm"]
    assert tokens == [MARKED, CLEAN, "NA"]


def test_flat_export_has_one_row_per_span() -> None:
    dataset = _import(_lines([MARKED, CLEAN, "NA"]), "flat")
    rows = [row for row in iter_flat_rows(dataset=dataset) if row["aspect"] == "mqm"]
    assert [(row["kind"], row["rater"]) for row in rows] == [
        ("rating", "w1"), ("error_span", "w1"), ("error_span", "w1"), ("error_span", "w1"),
        ("rating", "w2"), ("rating", "w3"),
    ]  # fmt: skip
    assert [row["raw"] for row in rows if row["kind"] == "error_span"] == MARKED["spans"]
    assert rows[0]["value"] == 7.0


def test_spans_that_do_not_fit_the_answer_are_refused_on_import() -> None:
    bad = {"spans": [{"start": 5, "end": 500, "category": "Fluency/Grammar", "severity": "minor"}]}
    with pytest.raises(DatasetImportError, match="invalid error spans"):
        _import(_lines([bad, CLEAN, CLEAN]), "bad")


def test_parquet_export_has_one_row_per_span_like_the_flat_rows(tmp_path: Path) -> None:
    dataset = _import(_lines([MARKED, CLEAN, "NA"]), "parquet")
    folder = tmp_path / "hf"
    call_command("export_dataset", "parquet", "--hf-folder", str(folder), stdout=io.StringIO())
    table = pq.read_table(folder / "data" / "error_spans.parquet")
    assert table.schema.field("start").type == pa.int64() and table.schema.field("position").type == pa.int32()
    rows = table.to_pylist()
    flat = [row for row in iter_flat_rows(dataset=dataset) if row["kind"] == "error_span"]
    assert len(rows) == len(flat) == 3
    assert [
        {key: row[key] for key in ("start", "end", "category", "severity")}
        | ({"note": row["note"]} if row["note"] else {})
        for row in rows
    ] == MARKED["spans"]
    assert [(row["item_id"], row["system"], row["aspect"], row["rater"], row["position"]) for row in rows] == [
        ("q0", "sys_a", "mqm", "w1", 0), ("q0", "sys_a", "mqm", "w1", 1), ("q0", "sys_a", "mqm", "w1", 2),
    ]  # fmt: skip
    assert [ANSWERS[0][row["start"] : row["end"]] for row in rows] == ["😀", "eat", "😀 eat"]
    # The ratings table keeps one row per rating, the score beside the token that holds the spans.
    ratings = pq.read_table(folder / "data" / "ratings.parquet").to_pylist()
    assert [(row["rater"], row["value"]) for row in ratings] == [("w1", 7.0), ("w2", 0.0), ("w3", None)]
    card = (folder / "README.md").read_text()
    assert "config_name: error_spans" in card and "### error_spans (3 rows)" in card
    # The single-table command and the dataset page give the same table.
    call_command("export_dataset", "parquet", "--parquet", "error_spans", "--out", str(tmp_path), stdout=io.StringIO())
    assert pq.read_table(tmp_path / "parquet.error_spans.parquet").equals(table)


def test_error_spans_parquet_download(client: Client, researcher: User) -> None:
    dataset = _import(_lines([MARKED, CLEAN, "NA"]), "download", owner=researcher)
    url = reverse("dataset-export", args=[dataset.pk, "error-spans-parquet"])
    assert client.get(url).status_code == 302
    assert client.login(username=researcher.username, password=CAST_PASSWORD)
    response = client.get(url)
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="download.error_spans.parquet"'
    assert pq.read_table(io.BytesIO(response.content)).num_rows == 3
    assert client.post(url).status_code == 405
    api = client.get(f"/api/datasets/{dataset.pk}/export/?parquet=error_spans")
    assert api.status_code == 200 and pq.read_table(io.BytesIO(api.content)).num_rows == 3
    folder = client.get(reverse("dataset-export", args=[dataset.pk, "hf-zip"]))
    assert "download/data/error_spans.parquet" in zipfile.ZipFile(io.BytesIO(folder.content)).namelist()

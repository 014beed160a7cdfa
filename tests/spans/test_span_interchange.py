"""Error spans in and out: the JSONL format round-trips them losslessly (offsets, categories, severities, notes and a
"no error" confirmation), and the flat export gives one row per span after the rating row that holds the score."""

import io
import json

import pytest

from annotations.datasets.exporting import iter_export_lines
from annotations.datasets.flat_export import iter_flat_rows
from annotations.datasets.importing import dataset_import
from annotations.errors import DatasetImportError
from annotations.models import ErrorSpan, Rating
from annotations.rubrics import parse_rubric
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


def _import(body: bytes, name: str):  # type: ignore[no-untyped-def]
    rubric = parse_rubric(SPAN_RUBRIC, source="file")
    return dataset_import(stream=io.BytesIO(body), name=name, rubric=rubric).dataset


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

"""Every export marks the raters excluded from the statistics the same way: the flat layout per row, the JSONL
format per answer and per preference, the Parquet tables per row. The JSONL import reads the marks back as
exclusions, so export, import and export again give the same lines."""

import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.contrib.auth.models import User
from django.core.management.base import CommandError

from annotations.datasets.downloads import dataset_rubric
from annotations.datasets.exporting import iter_export_lines, iter_export_objects
from annotations.datasets.flat_export import iter_flat_rows
from annotations.datasets.import_checks import IMPORTED_EXCLUSION_REASON
from annotations.datasets.importing import dataset_import
from annotations.datasets.parquet_export import parquet_bytes
from annotations.errors import DatasetImportError
from annotations.models import Campaign, Dataset, Rater, RaterExclusion
from annotations.quality.services import rater_exclude, rater_exclusion_revoke
from annotations.rubrics.specs import parse_rubric
from tests.annotate.factories import make_campaign
from tests.annotate.test_exclusions import rate_all
from tests.io.helpers import row_counts
from tests.io.test_parquet_export import hf_folder, import_mapped, make_dataset

pytestmark = pytest.mark.django_db

Key = tuple[Any, ...]


def with_exclusions(researcher: User, annotator: User) -> tuple[Dataset, set[str]]:
    """The Parquet tests' dataset (named raters w1-w3, imported preferences) with a campaign's ratings and
    preferences of one annotator; the imported rater w2 and the annotator are excluded."""
    dataset = make_dataset(researcher)
    campaign: Campaign = make_campaign(dataset, [annotator], raters_per_item=1)
    assert rate_all(campaign, annotator) > 0
    app_rater = Rater.objects.get(dataset=dataset, user=annotator)
    rater_exclude(rater=Rater.objects.get(dataset=dataset, external_id="w2"), reason="straight-lining", by=researcher)
    rater_exclude(rater=app_rater, reason="too fast", by=researcher, campaign=campaign)
    return dataset, {"w2", app_rater.pseudonym}


def flat_marks(dataset: Dataset) -> tuple[dict[Key, bool], list[Key]]:
    """(item, turn, system, rater) -> excluded for the rating rows, and the preference rows' (item, turn, rater,
    excluded) in order."""
    ratings: dict[Key, bool] = {}
    preferences: list[Key] = []
    for row in iter_flat_rows(dataset=dataset):
        if row["kind"] == "rating":
            ratings[(row["item_id"], row["turn"], row["system"], str(row["rater"]))] = row["rater_excluded"]
        else:
            preferences.append((row["item_id"], row["turn"], str(row["rater"]), row["rater_excluded"]))
    return ratings, preferences


def jsonl_marks(objects: list[dict[str, Any]]) -> tuple[dict[Key, bool], list[Key]]:
    ratings: dict[Key, bool] = {}
    preferences: list[Key] = []
    for item in objects:
        for number, turn in enumerate(item["turns"], start=1):
            for system, answer in turn.get("responses", {}).items():
                raters = answer.get("raters", [])
                marks = answer.get("rater_excluded", [False] * len(raters))
                assert len(marks) == len(raters)
                for rater, mark in zip(raters, marks, strict=True):
                    ratings[(item["id"], number, system, str(rater))] = mark
            for entry in turn.get("preferences", []):
                preferences.append((item["id"], number, str(entry["rater"]), entry.get("rater_excluded", False)))
    return ratings, preferences


def parquet_marks(dataset: Dataset) -> tuple[dict[Key, bool], list[Key]]:
    ratings = pq.read_table(io.BytesIO(parquet_bytes(dataset=dataset, table="ratings"))).to_pylist()
    preferences = pq.read_table(io.BytesIO(parquet_bytes(dataset=dataset, table="preferences"))).to_pylist()
    return (
        {(r["item_id"], r["turn"], r["system"], r["rater"]): r["rater_excluded"] for r in ratings},
        [(r["item_id"], r["turn"], r["rater"], r["rater_excluded"]) for r in preferences],
    )


def test_the_jsonl_and_parquet_exports_mark_excluded_raters_as_the_flat_ones(
    researcher: User, annotator1: User
) -> None:
    dataset, excluded = with_exclusions(researcher, annotator1)
    flat_ratings, flat_preferences = flat_marks(dataset)
    assert {key[3] for key, mark in flat_ratings.items() if mark} == excluded
    assert {key[2] for key in flat_preferences if key[3]} == excluded
    objects = list(iter_export_objects(dataset=dataset))
    assert jsonl_marks(objects) == (flat_ratings, flat_preferences)
    assert parquet_marks(dataset) == (flat_ratings, flat_preferences)
    # The answer lists a mark per rater only where someone is excluded; a preference only when its rater is.
    first = objects[0]["turns"][0]
    assert first["responses"]["a"]["raters"][:3] == ["w1", "w2", "w3"]
    assert first["responses"]["a"]["rater_excluded"][:3] == [False, True, False]
    assert first["responses"]["c"]["rater_excluded"] == [True]  # rated by the annotator alone
    assert [entry.get("rater_excluded") for entry in first["preferences"][:3]] == [None, True, None]
    # Revoked: no export marks anyone any more.
    for exclusion in RaterExclusion.objects.filter(revoked_at__isnull=True):
        rater_exclusion_revoke(exclusion=exclusion, by=researcher)
    assert not any(flat_marks(dataset)[0].values())
    assert "rater_excluded" not in json.dumps(list(iter_export_objects(dataset=dataset)))
    assert not any(parquet_marks(dataset)[0].values())


def test_the_jsonl_round_trip_keeps_the_exclusions(researcher: User, annotator1: User) -> None:
    dataset, excluded = with_exclusions(researcher, annotator1)
    lines = "".join(iter_export_lines(dataset=dataset))
    rubric = parse_rubric(dataset_rubric(dataset), source="export")
    copy = dataset_import(stream=io.BytesIO(lines.encode()), name="copy", rubric=rubric, owner=researcher).dataset
    assert [json.loads(text) for text in iter_export_lines(dataset=copy)] == [
        json.loads(text) for text in lines.splitlines()
    ]
    in_force = RaterExclusion.objects.filter(rater__dataset=copy, revoked_at__isnull=True)
    assert {e.rater.pseudonym for e in in_force} == excluded
    assert {e.reason for e in in_force} == {IMPORTED_EXCLUSION_REASON}
    assert flat_marks(copy) == flat_marks(dataset)


def test_the_parquet_round_trip_keeps_the_exclusions(researcher: User, tmp_path: Path) -> None:
    """The evalsite-parquet mapping reads the tables' rater_excluded columns into the marks the JSONL import reads:
    w2 rated and gave a preference, and is excluded; w1 and w3 are not."""
    dataset = make_dataset(researcher)
    rater_exclude(rater=Rater.objects.get(dataset=dataset, external_id="w2"), reason="straight-lining", by=researcher)
    excluded = {"w2"}
    folder = tmp_path / "hf"
    hf_folder(dataset, folder)
    tables = [str(folder / "data" / f"{table}.parquet") for table in ("answers", "ratings", "preferences")]
    import_mapped(
        *tables, "--mapping", "evalsite-parquet", "--rubric", str(folder / "rubric.json"), "--dataset", "copy"
    )
    copy = Dataset.objects.get(name="copy")
    in_force = RaterExclusion.objects.filter(rater__dataset=copy, revoked_at__isnull=True)
    assert {e.rater.pseudonym for e in in_force} == excluded
    assert {e.reason for e in in_force} == {IMPORTED_EXCLUSION_REASON}
    assert flat_marks(copy) == flat_marks(dataset)
    assert jsonl_marks(list(iter_export_objects(dataset=copy))) == jsonl_marks(
        list(iter_export_objects(dataset=dataset))
    )


def test_a_parquet_rater_marked_both_ways_on_one_answer_is_refused(researcher: User, tmp_path: Path) -> None:
    folder = tmp_path / "hf"
    tables = hf_folder(make_dataset(researcher), folder)
    ratings = tables["ratings"].to_pylist()
    marked = [row | {"rater_excluded": row["rater"] == "w2" and row["aspect"] == "fluency"} for row in ratings]
    pq.write_table(pa.Table.from_pylist(marked, schema=tables["ratings"].schema), folder / "data" / "ratings.parquet")
    files = [str(folder / "data" / f"{table}.parquet") for table in ("answers", "ratings")]
    with pytest.raises(CommandError, match="rater marked both excluded and not excluded"):
        import_mapped(
            *files, "--mapping", "evalsite-parquet", "--rubric", str(folder / "rubric.json"), "--dataset", "c"
        )
    assert not Dataset.objects.filter(name="c").exists()


def test_a_rater_who_only_gave_preferences_can_be_marked(researcher: User) -> None:
    line = {
        "id": "p1",
        "turns": [
            {
                "prompt": "Which?",
                "responses": {"a": {"response": "A"}, "b": {"response": "B"}},
                "preferences": [
                    {"rater": 7, "candidates": ["a", "b"], "preferred": "a", "rater_excluded": True},
                    {"rater": "v2", "candidates": ["a", "b"], "preferred": "b"},
                ],
            }
        ],
    }
    body = (json.dumps(line) + "\n").encode()
    dataset = dataset_import(stream=io.BytesIO(body), name="votes", owner=researcher).dataset
    assert [e.rater.external_id for e in RaterExclusion.objects.filter(rater__dataset=dataset)] == ["7"]
    assert [json.loads(text) for text in iter_export_lines(dataset=dataset)] == [line]
    assert [row["rater_excluded"] for row in iter_flat_rows(dataset=dataset)] == [True, False]


def answer_with(**extra: Any) -> dict[str, Any]:
    answer = {"response": "A", "human_evals": {"q": [1, 2]}, "raters": ["u1", "u2"]}
    answer.update(extra)
    return answer


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (
            [{"id": 1, "turns": [{"prompt": "p", "responses": {"a": answer_with(rater_excluded=[True])}}]}],
            "line 1, field turns[0].responses.a.rater_excluded: marks and raters differ in length",
        ),
        (
            [{"id": 1, "turns": [{"prompt": "p", "responses": {"a": answer_with(rater_excluded=[1, 0])}}]}],
            "expected a list of true or false, one per entry of 'raters'",
        ),
        (
            [
                {
                    "id": 1,
                    "turns": [
                        {
                            "prompt": "p",
                            "responses": {"a": {"response": "A", "human_evals": {"q": [1]}, "rater_excluded": [True]}},
                        }
                    ],
                }
            ],
            "positional raters cannot be excluded",
        ),
        (
            [
                {"id": 1, "turns": [{"prompt": "p", "responses": {"a": answer_with(rater_excluded=[True, False])}}]},
                {"id": 2, "turns": [{"prompt": "p", "responses": {"a": answer_with(rater_excluded=[False, False])}}]},
            ],
            "line 2, field turns[0].responses.a.rater_excluded[0]: rater marked both excluded and not excluded: "
            'expected the same mark for rater "u1" as on line 1',
        ),
        (
            [
                {
                    "id": 1,
                    "turns": [
                        {
                            "prompt": "p",
                            "responses": {"a": {"response": "A"}, "b": {"response": "B"}},
                            "preferences": [{"candidates": ["a", "b"], "preferred": "a", "rater_excluded": True}],
                        }
                    ],
                }
            ],
            "expected a mark only on a preference that names its rater",
        ),
        (
            [
                {
                    "id": 1,
                    "turns": [
                        {
                            "prompt": "p",
                            "responses": {"a": {"response": "A"}},
                            "preferences": [{"rater": "u1", "rater_excluded": "yes"}],
                        }
                    ],
                }
            ],
            "turns[0].preferences[0].rater_excluded: invalid value: expected true or false",
        ),
    ],
)
def test_bad_marks_are_refused_and_nothing_is_written(lines: list[dict[str, Any]], message: str) -> None:
    body = "".join(json.dumps(line) + "\n" for line in lines).encode()
    before = row_counts()
    with pytest.raises(DatasetImportError) as raised:
        dataset_import(stream=io.BytesIO(body), name="bad")
    assert message in str(raised.value)
    assert row_counts() == before

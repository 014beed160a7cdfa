"""Parquet exports with typed columns and the Hugging Face folder: from the command line, the API and the dataset
page (researcher only, GET only); `datasets.load_dataset("parquet", ...)` reads the folder offline, and importing
the three tables back through the evalsite-parquet mapping gives the same dataset."""

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from annotations.datasets.exporting import iter_export_objects
from annotations.datasets.importing import dataset_import
from annotations.datasets.parquet_export import TABLES
from annotations.errors import DatasetImportError
from annotations.models import Dataset, Rater
from annotations.rubrics.specs import parse_rubric
from tests.conftest import CAST_PASSWORD, PROJECT_ROOT
from tests.io.helpers import write_lines
from tests.io.test_mapped_import import ARENA_SCHEMA, arena_rows
from tests.io.test_mapped_import import write_parquet as write_table

RUBRIC = {
    "aspects": [
        {"name": "fluency", "min": 1, "max": 5, "level": "ordinal", "missing": [None, "NA"]},
        {"name": "helpfulness", "min": 0, "max": 3, "level": "interval", "label": {"en": "Helpful", "ja": "有用"}},
    ]
}

LINES: list[dict[str, Any]] = [
    {
        "id": "q1",
        "turns": [
            {
                "prompt": "Why is the sky blue?",
                "reference": "Rayleigh scattering.",
                "responses": {
                    "a": {
                        "response": "Scattering.",
                        "human_evals": {"fluency": [5, 4, "NA"], "helpfulness": [3, 2, 2.5]},
                        "raters": ["w1", "w2", "w3"],
                    },
                    "b": {
                        "response": "Because.",
                        "human_evals": {"fluency": [2, None, 3], "helpfulness": [0, 1, 1]},
                        "raters": ["w1", "w2", "w3"],
                    },
                    "c": {"response": "No rating for me."},
                },
                "preferences": [
                    {"rater": "w1", "candidates": ["a", "b"], "preferred": "a"},
                    {"rater": "w2", "candidates": ["a", "b", "c"], "preferred": None, "tie": True},
                    {
                        "rater": "w3",
                        "candidates": ["b", "c"],
                        "preferred": "c",
                        "none_appropriate": True,
                        "reason": "both weak",
                    },
                ],
            },
            {
                "prompt": "And at sunset?",
                "responses": {"a": {"response": "Longer path.", "human_evals": {"fluency": [4]}, "raters": ["w1"]}},
            },
        ],
    },
    {
        "id": "q2",
        "turns": [
            {
                "prompt": "空はなぜ青い?",
                "responses": {
                    "b": {"response": "散乱のため。", "human_evals": {"fluency": [1, 2]}, "raters": ["w2", "w3"]},
                    "a": {"response": "光の散乱。", "human_evals": {"fluency": [5, 5]}, "raters": ["w2", "w3"]},
                },
            }
        ],
    },
]


def make_dataset(owner: User | None = None, name: str = "orig") -> Dataset:
    body = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in LINES).encode()
    return dataset_import(
        stream=io.BytesIO(body), name=name, rubric=parse_rubric(RUBRIC, source="test"), owner=owner
    ).dataset


def loaded_offline(program: str, *folders: str, work: Path) -> Any:
    """What `program` prints last (as JSON) after reading the folders with the `datasets` library, offline, in a
    process of its own; its last argument is a cache directory under `work`."""
    env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", HF_HOME=str(work / "hf-home"))
    done = subprocess.run(
        [sys.executable, "-c", program, *folders, str(work / "cache")],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.django_db
def test_typed_tables_and_round_trip(tmp_path: Path) -> None:
    dataset = make_dataset()
    folder = tmp_path / "hf"
    call_command("export_dataset", "orig", "--hf-folder", str(folder), stdout=io.StringIO())
    ratings = pq.read_table(folder / "data" / "ratings.parquet")
    assert ratings.schema.field("value").type == pa.float64()
    assert ratings.schema.field("turn").type == pa.int32()
    assert ratings.schema.field("is_missing").type == pa.bool_()
    assert ratings.num_rows == 17
    missing = [row for row in ratings.to_pylist() if row["is_missing"]]
    assert [(row["raw"], row["value"]) for row in missing] == [('"NA"', None), ("null", None)]
    preferences = pq.read_table(folder / "data" / "preferences.parquet")
    assert preferences.schema.field("candidates").type == pa.list_(pa.string())
    assert preferences.column("tie").to_pylist() == [False, True, False]
    assert pq.read_table(folder / "data" / "answers.parquet").num_rows == 6
    card = (folder / "README.md").read_text()
    assert "config_name: ratings" in card and "| fluency | 1 | 5 | 5 | ordinal |" in card
    assert "3 raters" in card and "Krippendorff's alpha" in card

    data = [str(folder / "data" / f"{t}.parquet") for t in ("answers", "ratings", "preferences")]
    out = io.StringIO()
    call_command(
        "import_mapped",
        *data,
        "--mapping",
        "evalsite-parquet",
        "--rubric",
        str(folder / "rubric.json"),
        "--dataset",
        "copy",
        stdout=out,
        stderr=io.StringIO(),
    )
    copy = Dataset.objects.get(name="copy")
    assert list(iter_export_objects(dataset=copy)) == list(iter_export_objects(dataset=dataset))
    assert list(copy.aspects.values_list("name", "min_value", "max_value", "level", "translations")) == list(
        dataset.aspects.values_list("name", "min_value", "max_value", "level", "translations")
    )
    # The single-table CLI export holds the same rows as the folder's table.
    call_command("export_dataset", "orig", "--parquet", "ratings", "--out", str(tmp_path), stdout=io.StringIO())
    assert pq.read_table(tmp_path / "orig.ratings.parquet").equals(ratings)


@pytest.mark.django_db
def test_datasets_loads_the_folder_offline(tmp_path: Path) -> None:
    make_dataset()
    folder = tmp_path / "hf"
    call_command("export_dataset", "orig", "--hf-folder", str(folder), stdout=io.StringIO())
    program = (
        "import json, sys\n"
        "from datasets import load_dataset\n"
        "out = {}\n"
        "for table in ('answers', 'ratings', 'preferences'):\n"
        "    ds = load_dataset('parquet', data_files=sys.argv[1] + f'/data/{table}.parquet', "
        "cache_dir=sys.argv[2])['train']\n"
        "    out[table] = {'rows': ds.num_rows, 'features': {k: str(v) for k, v in ds.features.items()}}\n"
        "out['first'] = load_dataset('parquet', data_files=sys.argv[1] + '/data/ratings.parquet', "
        "cache_dir=sys.argv[2])['train'][0]\n"
        "print(json.dumps(out, default=str))\n"
    )
    loaded = loaded_offline(program, str(folder), work=tmp_path)
    assert (loaded["answers"]["rows"], loaded["ratings"]["rows"], loaded["preferences"]["rows"]) == (6, 17, 3)
    assert "float64" in loaded["ratings"]["features"]["value"]
    assert (
        "List(Value('string'))" in loaded["preferences"]["features"]["candidates"]
        or "string" in loaded["preferences"]["features"]["candidates"]
    )
    assert loaded["first"]["item_id"] == "q1" and loaded["first"]["value"] == 5.0


def login(client: Client, user: User) -> None:
    assert client.login(username=user.username, password=CAST_PASSWORD)


@pytest.mark.django_db
@pytest.mark.parametrize("kind", ["ratings-parquet", "preferences-parquet", "answers-parquet"])
def test_page_downloads_parquet(client: Client, researcher: User, kind: str) -> None:
    dataset = make_dataset(researcher)
    login(client, researcher)
    response = client.get(reverse("dataset-export", args=[dataset.pk, kind]))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/vnd.apache.parquet"
    assert response["Content-Disposition"] == f'attachment; filename="orig.{kind.split("-")[0]}.parquet"'
    table = pq.read_table(io.BytesIO(response.content))
    assert table.num_rows == {"ratings": 17, "preferences": 3, "answers": 6}[kind.split("-")[0]]


@pytest.mark.django_db
def test_page_and_api_download_the_hf_folder(client: Client, researcher: User) -> None:
    dataset = make_dataset(researcher)
    login(client, researcher)
    for url in (
        reverse("dataset-export", args=[dataset.pk, "hf-zip"]),
        f"/api/datasets/{dataset.pk}/export/?parquet=hf",
    ):
        response = client.get(url)
        assert response.status_code == 200, url
        assert response["Content-Type"] == "application/zip"
        names = zipfile.ZipFile(io.BytesIO(response.content)).namelist()
        assert sorted(names) == [
            "orig/README.md",
            "orig/data/answers.parquet",
            "orig/data/preferences.parquet",
            "orig/data/ratings.parquet",
            "orig/rubric.json",
        ]
    response = client.get(f"/api/datasets/{dataset.pk}/export/?parquet=preferences")
    assert pq.read_table(io.BytesIO(response.content)).column("preferred").to_pylist() == ["a", None, "c"]
    page = client.get(reverse("home"))
    assert reverse("dataset-export", args=[dataset.pk, "hf-zip"]) in page.content.decode()


@pytest.mark.django_db
def test_downloads_refuse_wrong_method_and_no_access(
    client: Client, researcher: User, annotator1: User, django_user_model: Any
) -> None:
    dataset = make_dataset(researcher)
    url = reverse("dataset-export", args=[dataset.pk, "ratings-parquet"])
    assert client.get(url).status_code == 302  # anonymous: to the login page
    login(client, annotator1)
    assert client.get(url).status_code == 403
    other = django_user_model.objects.create_user(username="other", password=CAST_PASSWORD, is_staff=True)
    login(client, other)
    assert client.get(url).status_code == 404
    assert client.get(f"/api/datasets/{dataset.pk}/export/?parquet=hf").status_code == 404
    login(client, researcher)
    assert client.post(url).status_code == 405
    assert client.get(f"/api/datasets/{dataset.pk}/export/?parquet=everything").status_code == 400


# --- the three shapes of data: ratings only, preferences only, both ----------------------------------------------


def import_mapped(*args: str) -> None:
    call_command("import_mapped", *args, stdout=io.StringIO(), stderr=io.StringIO())


def summeval_ratings_only(tmp_path: Path) -> Dataset:
    """Ratings and no preferences, as the SummEval mapping gives them (three experts, four aspects)."""
    marks = [{"coherence": c, "consistency": c, "fluency": 5 - c, "relevance": 3} for c in (1, 2, 4)]
    lines = [
        {
            "id": "dm-1",
            "decoded": f"summary by {model}",
            "expert_annotations": marks,
            "references": ["the reference summary"],
            "model_id": model,
        }
        for model in ("M11", "M13")
    ]
    import_mapped(str(write_lines(tmp_path / "summeval.jsonl", lines)), "--mapping", "summeval", "--dataset", "ratings")
    return Dataset.objects.get(name="ratings")


def arena_preferences_only(tmp_path: Path) -> Dataset:
    """Preferences and no ratings, as the Chatbot Arena mapping gives them: four battles by four voters."""
    path = write_table(tmp_path / "arena.parquet", arena_rows(), ARENA_SCHEMA)
    import_mapped(str(path), "--mapping", "chatbot-arena", "--dataset", "preferences")
    return Dataset.objects.get(name="preferences")


def ratings_and_preferences(tmp_path: Path) -> Dataset:
    """Both, each preference naming its campaign."""
    lines = json.loads(json.dumps(LINES))
    for entry in lines[0]["turns"][0]["preferences"]:
        entry["campaign"] = "round 1"
    body = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode()
    rubric = parse_rubric(RUBRIC, source="test")
    return dataset_import(stream=io.BytesIO(body), name="both", rubric=rubric).dataset


SHAPES = {
    "ratings only": summeval_ratings_only,
    "preferences only": arena_preferences_only,
    "ratings and preferences": ratings_and_preferences,
}


def hf_folder(dataset: Dataset, folder: Path) -> dict[str, pa.Table]:
    """Exports the folder; its tables by name, without created_at (an imported rating's is when it was stored)."""
    call_command("export_dataset", dataset.name, "--hf-folder", str(folder), stdout=io.StringIO())
    tables = {}
    for path in sorted((folder / "data").glob("*.parquet")):
        table = pq.read_table(path)
        tables[path.stem] = table.drop_columns(["created_at"]) if "created_at" in table.column_names else table
    return tables


@pytest.mark.django_db
@pytest.mark.parametrize("shape", list(SHAPES))
def test_parquet_round_trip_of_every_shape(tmp_path: Path, shape: str) -> None:
    dataset = SHAPES[shape](tmp_path)
    first = hf_folder(dataset, tmp_path / "first")
    files = [str(tmp_path / "first" / "data" / f"{table}.parquet") for table in TABLES if table in first]
    rubric = str(tmp_path / "first" / "rubric.json")
    import_mapped(*files, "--mapping", "evalsite-parquet", "--rubric", rubric, "--dataset", "copy")
    copy = Dataset.objects.get(name="copy")
    second = hf_folder(copy, tmp_path / "second")
    assert list(second) == list(first)
    for name, table in first.items():
        assert second[name].equals(table), name
    assert list(iter_export_objects(dataset=copy)) == list(iter_export_objects(dataset=dataset))
    if shape == "ratings and preferences":
        (item, _second_item) = iter_export_objects(dataset=copy)
        assert {entry["campaign"] for entry in item["turns"][0]["preferences"]} == {"round 1"}


LOAD_EVERY_CONFIG = """
import json, sys
from pathlib import Path
from datasets import load_dataset
out = {}
for folder in sys.argv[1:-1]:
    card = (Path(folder) / "README.md").read_text()
    files = [line.split(": ", 1)[1] for line in card.splitlines() if line.startswith("  data_files: ")]
    for name in files:
        ds = load_dataset("parquet", data_files=str(Path(folder) / name), cache_dir=sys.argv[-1])["train"]
        out[f"{Path(folder).name}/{name}"] = ds.num_rows
print(json.dumps(out))
"""


@pytest.mark.django_db
def test_datasets_loads_every_table_of_one_kind_datasets(tmp_path: Path) -> None:
    folders = []
    for shape in ("ratings only", "preferences only"):
        dataset = SHAPES[shape](tmp_path)
        folder = tmp_path / dataset.name
        hf_folder(dataset, folder)
        folders.append(str(folder))
    # A table without rows has no file, and the card's configs name only the files there are.
    assert sorted(p.name for p in (tmp_path / "ratings" / "data").iterdir()) == ["answers.parquet", "ratings.parquet"]
    assert sorted(p.name for p in (tmp_path / "preferences" / "data").iterdir()) == [
        "answers.parquet",
        "preferences.parquet",
    ]
    card = (tmp_path / "preferences" / "README.md").read_text()
    assert "config_name: ratings" not in card and "### ratings (0 rows)" in card
    # The four battles of the Arena sample have four voters, who gave preferences and no ratings.
    assert "\n4 raters, who gave the ratings and preferences (0 of them annotators" in card
    assert "\n3 raters, who gave" in (tmp_path / "ratings" / "README.md").read_text()
    loaded = loaded_offline(LOAD_EVERY_CONFIG, *folders, work=tmp_path)
    assert loaded == {
        "ratings/data/answers.parquet": 2,
        "ratings/data/ratings.parquet": 24,
        "preferences/data/answers.parquet": 10,
        "preferences/data/preferences.parquet": 4,
    }


@pytest.mark.django_db
def test_a_rubric_without_aspects_imports_preferences_and_refuses_ratings() -> None:
    rubric = parse_rubric({"aspects": []}, source="test")
    answers = {"a": {"response": "A"}, "b": {"response": "B"}}
    preferences = [{"rater": "v", "preferred": "a"}]
    votes = {"id": 1, "turns": [{"prompt": "p", "responses": answers, "preferences": preferences}]}
    body = (json.dumps(votes) + "\n").encode()
    assert dataset_import(stream=io.BytesIO(body), name="votes", rubric=rubric).dataset.aspects.count() == 0
    rated = {"id": 1, "turns": [{"prompt": "p", "responses": {"a": {"response": "A", "human_evals": {"q": [1]}}}}]}
    with pytest.raises(DatasetImportError, match=r"unknown aspect: expected no ratings \(the rubric has none\)"):
        dataset_import(stream=io.BytesIO((json.dumps(rated) + "\n").encode()), name="rated", rubric=rubric)


@pytest.mark.django_db
def test_judge_filled_rows_come_back_as_judge_filled_entries_not_ratings(tmp_path: Path) -> None:
    """A hybrid campaign's judge-filled row of the ratings table is what the JSONL format lists under the answer's
    judge_filled: the mapped import keeps it there, as the JSONL import does, and never makes the judge a rater."""
    dataset = make_dataset()
    folder = tmp_path / "hf"
    ratings = hf_folder(dataset, folder)["ratings"]
    judge_row = dict.fromkeys(ratings.column_names) | {
        "item_id": "q1",
        "turn": 1,
        "system": "c",
        "aspect": "fluency",
        "rater": "judge run 1",
        "origin": "judge",
        "raw": "4.0",
        "value": 4.0,
        "is_missing": False,
        "campaign": "hybrid",
        "rater_excluded": False,
        "filled_by": "judge",
        "judge_version": "v-1234",
    }
    pq.write_table(
        pa.Table.from_pylist([*ratings.to_pylist(), judge_row], schema=ratings.schema),
        folder / "data" / "ratings.parquet",
    )
    # A dataset without error spans has no error_spans table.
    files = [str(folder / "data" / f"{table}.parquet") for table in TABLES if table != "error_spans"]
    import_mapped(*files, "--mapping", "evalsite-parquet", "--rubric", str(folder / "rubric.json"), "--dataset", "copy")
    copy = Dataset.objects.get(name="copy")
    assert not Rater.objects.filter(dataset=copy, external_id="judge run 1").exists()
    expected = list(iter_export_objects(dataset=dataset))
    expected[0]["turns"][0]["responses"]["c"]["judge_filled"] = [
        {
            "aspect": "fluency",
            "value": 4.0,
            "filled_by": "judge",
            "judge": "judge run 1",
            "judge_version": "v-1234",
            "campaign": "hybrid",
        }
    ]
    assert list(iter_export_objects(dataset=copy)) == expected


@pytest.mark.django_db
def test_a_reason_without_a_choice_on_one_answer_imports_back(tmp_path: Path) -> None:
    """A campaign that shows one answer per task and asks no preference exports each task's reason as a preference
    entry of one candidate that chooses nothing; the tables import back with it."""
    line = {
        "id": "q1",
        "turns": [
            {
                "prompt": "Why?",
                "responses": {"a": {"response": "Because.", "human_evals": {"fluency": [3]}, "raters": ["w1"]}},
                "preferences": [{"rater": "w1", "candidates": ["a"], "preferred": None, "reason": "too short"}],
            }
        ],
    }
    body = (json.dumps(line) + "\n").encode()
    dataset = dataset_import(stream=io.BytesIO(body), name="one answer", rubric=parse_rubric(RUBRIC, source="test"))
    folder = tmp_path / "one"
    first = hf_folder(dataset.dataset, folder)
    files = [str(folder / "data" / f"{table}.parquet") for table in TABLES if table in first]
    import_mapped(*files, "--mapping", "evalsite-parquet", "--rubric", str(folder / "rubric.json"), "--dataset", "copy")
    copy = Dataset.objects.get(name="copy")
    assert list(iter_export_objects(dataset=copy)) == list(iter_export_objects(dataset=dataset.dataset))
    (entry,) = next(iter_export_objects(dataset=copy))["turns"][0]["preferences"]
    assert (entry["candidates"], entry["preferred"], entry["reason"]) == (["a"], None, "too short")

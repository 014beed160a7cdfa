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
from annotations.models import Dataset
from annotations.rubrics import parse_rubric
from tests.conftest import CAST_PASSWORD, PROJECT_ROOT

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
    env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf-home"))
    done = subprocess.run(
        [sys.executable, "-c", program, str(folder), str(tmp_path / "cache")],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
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

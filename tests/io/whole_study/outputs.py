"""The whole study read back: the command line's JSON, the exports written and parsed, the API and dashboard tables,
the gate; and the counts every seam expects of them."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.test import Client
from django.urls import reverse

from tests.conftest import (
    PROJECT_ROOT,
    database_url_for_subprocess,
)
from tests.io.whole_study.building import Study, command
from tests.io.whole_study.design import ASPECT, EXPERTS, REGULAR_ITEMS, SYSTEMS


def cli_json(*args: str) -> dict[str, Any]:
    return json.loads(command(*args, "--json"))  # type: ignore[no-any-return]


def export_file(name: str, path: Path, *flags: str) -> Path:
    """`export_dataset NAME [flags]` into `path` (a folder for --hf-folder)."""
    target = ["--hf-folder", str(path)] if "--hf-folder" in flags else [*flags, "--out", str(path)]
    command("export_dataset", name, *target)
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def read_csv(path: Path) -> list[dict[str, Any]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def parquet_rows(path: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()  # type: ignore[no-any-return]


HF_PROGRAM = """
import json, sys
from datasets import load_dataset
out = {"features": {}}
card = open(f"{sys.argv[1]}/README.md", encoding="utf-8").read()
for table in ("answers", "ratings", "preferences"):
    # The card's configs name the tables written; a table without rows has no file, since datasets cannot load one.
    if f"data_files: data/{table}.parquet" not in card:
        out[table] = []
        continue
    ds = load_dataset("parquet", data_files=f"{sys.argv[1]}/data/{table}.parquet", cache_dir=sys.argv[2])["train"]
    out[table] = ds.to_list()
    out["features"][table] = {k: str(v) for k, v in ds.features.items()}
print(json.dumps(out, default=str))
"""


def load_hf_folder(folder: Path, cache_dir: Path) -> dict[str, Any]:
    """The folder's three tables as `datasets` loads them (offline, in a child process: `datasets` is heavy and
    keeps state), and its dataset card."""
    env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", HF_HOME=str(cache_dir / "home"))
    done = subprocess.run(
        [sys.executable, "-c", HF_PROGRAM, str(folder), str(cache_dir)],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    loaded: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    loaded["card"] = (folder / "README.md").read_text(encoding="utf-8")
    return loaded


def mentions_as_excluded(value: Any, pseudonym: str) -> bool:
    """Whether some key that speaks of exclusion, anywhere in the JSON value, names the pseudonym."""
    if isinstance(value, dict):
        return any(
            ("exclu" in str(key).lower() and pseudonym in json.dumps(inner)) or mentions_as_excluded(inner, pseudonym)
            for key, inner in value.items()
        )
    if isinstance(value, list):
        return any(mentions_as_excluded(inner, pseudonym) for inner in value)
    return False


def run_gate(folder: Path, dataset: str, rules: list[dict[str, Any]]) -> tuple[int, str, dict[str, Any]]:
    """`manage.py gate RULES --report R` in its own process, as CI runs it: (exit status, output, the JSON report)."""
    folder.mkdir(parents=True, exist_ok=True)
    rules_file = folder / "rules.json"
    rules_file.write_text(json.dumps({"dataset": dataset, "rule": rules}), encoding="utf-8")
    report = folder / "gate-report.json"
    env = dict(os.environ, DATABASE_URL=database_url_for_subprocess(), DJANGO_SETTINGS_MODULE="evalsite.settings")
    done = subprocess.run(
        [sys.executable, "manage.py", "gate", str(rules_file), "--report", str(report)],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr, json.loads(report.read_text(encoding="utf-8"))


ANSWERS = REGULAR_ITEMS * len(SYSTEMS)  # the gold item's answers measure the annotators, not the systems
IMPORTED = ANSWERS * len(EXPERTS)
COLLECTED = ANSWERS * 3  # three annotators, every regular answer, in the first campaign
PREFERENCES = REGULAR_ITEMS * 3
POSTGRES = settings.DATABASES["default"]["ENGINE"].endswith("postgresql")


def collected(study: Study) -> int:
    """The app ratings of the scale aspect: the first campaign's, then the hybrid and the stopping campaigns'."""
    return COLLECTED + study.later_ratings


def counted(study: Study) -> int:
    """The scale aspect's ratings the statistics count: the excluded annotator's left out."""
    return IMPORTED + collected(study) - ANSWERS


def researcher_client(study: Study) -> Client:
    client = Client()
    client.force_login(study.researcher)
    return client


def api_json(study: Study, name: str, dataset_id: int, **query: Any) -> dict[str, Any]:
    response = researcher_client(study).get(reverse(name, args=[dataset_id]), query)
    assert response.status_code == 200, response.content[:500]
    return response.json()  # type: ignore[no-any-return]


def dashboard_table(study: Study, name: str, dataset_id: int, table: str, **query: Any) -> dict[str, Any]:
    response = researcher_client(study).get(reverse(name, args=[dataset_id, table, "json"]), query)
    assert response.status_code == 200, response.content[:500]
    return json.loads(response.content)  # type: ignore[no-any-return]


def answers_of(lines: list[dict[str, Any]]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for line in lines:
        for turn in line["turns"]:
            for system, answer in turn["responses"].items():
                yield line["id"], system, answer


def app_rating_rows(rows: list[dict[str, Any]], aspect: str = ASPECT) -> list[dict[str, Any]]:
    return [
        row
        for row in rows
        if row.get("kind", "rating") == "rating" and row["origin"] == "app" and row["aspect"] == aspect
    ]

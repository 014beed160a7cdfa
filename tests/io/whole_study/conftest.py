"""One study across every feature, and one small test per seam where two features meet.

The package fixture builds the study once (design.py states its design, building.py builds it): a
JSONL import and a mapped SummEval sample, a campaign with gold tasks and an adjudication rule rated by three
annotators over the annotator API, a settled dispute and an excluded rater, a judge run on a real Celery worker
against the fake provider, its certificate and a hybrid campaign. The data is committed, because the worker reads it
from its own process, and flushed at the end. Each test then reads the study through two or more outputs
(the command line, the statistics API, the dashboard, every export, the gate) and asserts that they agree: the same
ratings counted, the same raters left out, the same consensus, the same figures.

A new feature adds its seam here: build what it needs in `build_study`, and add a test that compares its output with
the outputs that already exist.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import cache
from django.core.management import call_command

from tests.io.whole_study.building import Study, build_study, command
from tests.io.whole_study.design import NAME
from tests.io.whole_study.outputs import export_file, load_hf_folder, parquet_rows, read_csv, read_jsonl


@pytest.fixture(scope="package")
def study(django_db_setup: None, django_db_blocker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Study]:  # type: ignore[no-untyped-def]
    with django_db_blocker.unblock():
        try:
            yield build_study(tmp_path_factory.mktemp("whole-study"))
        finally:
            call_command("flush", interactive=False, verbosity=0)
            cache.clear()  # the statistics cached for these datasets' ids must not outlive them


@pytest.fixture(scope="package")
def exports(study: Study) -> dict[str, Any]:
    """Every export of the study, written once by `export_dataset` (the same functions the pages and the API call)."""
    folder = study.work / "exports"
    folder.mkdir()
    return {
        "jsonl": read_jsonl(export_file(NAME, folder / "study.jsonl")),
        "judges": read_jsonl(export_file(NAME, folder / "study.judges.jsonl", "--include-judges")),
        "flat_csv": read_csv(export_file(NAME, folder / "study.flat.csv", "--flat", "--format", "csv")),
        "flat_jsonl": read_jsonl(export_file(NAME, folder / "study.flat.jsonl", "--flat", "--format", "jsonl")),
        "parquet": {
            table: parquet_rows(export_file(NAME, folder / f"study.{table}.parquet", "--parquet", table))
            for table in ("answers", "ratings", "preferences")
        },
        "hf": load_hf_folder(export_file(NAME, folder / "hf", "--hf-folder"), study.work / "hf-cache"),
    }


@pytest.fixture(scope="package")
def parquet_copy(study: Study, exports: dict[str, Any]) -> str:
    """The HF folder's three tables imported back through the evalsite-parquet mapping, as a new dataset."""
    folder = study.work / "exports" / "hf"
    copy = f"{NAME} copy"
    command(
        "import_mapped",
        *(str(folder / "data" / f"{table}.parquet") for table in ("answers", "ratings", "preferences")),
        "--mapping",
        "evalsite-parquet",
        "--rubric",
        str(folder / "rubric.json"),
        "--dataset",
        copy,
    )
    return copy

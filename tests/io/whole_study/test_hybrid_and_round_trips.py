"""The whole study's seams of the certified judge's hybrid campaign, the exports read back and the mapped import."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from annotations.models import RaterExclusion
from tests.io.whole_study.building import Study, api_client, command
from tests.io.whole_study.design import ASPECT, MAPPED_NAME, NAME, summeval_lines
from tests.io.whole_study.outputs import (
    answers_of,
    api_json,
    cli_json,
    counted,
    dashboard_table,
    export_file,
    load_hf_folder,
    read_jsonl,
)

pytestmark = pytest.mark.django_db


# ---------------------------------------------------------------- certificate and hybrid campaign


def test_judge_filled_ratings_are_marked_in_every_export_and_leave_the_human_figures_alone(
    study: Study, exports: dict[str, Any]
) -> None:
    judged = study.calibration.judged_tasks or 0
    assert judged > 0 and (study.calibration.human_tasks or 0) > 0
    in_jsonl = sum(len(answer.get("judge_filled", [])) for _i, _s, answer in answers_of(exports["jsonl"]))
    assert in_jsonl == judged
    for name, rows in (
        ("flat jsonl", exports["flat_jsonl"]),
        ("parquet", exports["parquet"]["ratings"]),
        ("hf folder", exports["hf"]["ratings"]),
    ):
        assert sum(row.get("filled_by") == "judge" for row in rows) == judged, name
    assert cli_json("agreement", NAME)["aspects"][ASPECT]["n_ratings"] == counted(study)


def test_an_annotator_of_both_campaigns_is_never_handed_an_answer_they_rated(study: Study) -> None:
    annotator = study.annotators["annotator1"]
    study.hybrid_campaign.annotators.add(annotator)  # undone with the test's transaction
    client = api_client(annotator)
    assert (
        study.calibration.human_tasks or 0
    ) > 0  # tasks left to humans, every answer of them rated in the first campaign
    claimed = client.post(reverse("api-annotate-next", args=[study.hybrid_campaign.pk]))
    assert claimed.status_code == 204, claimed.content[:300]


# ---------------------------------------------------------------- round trips and the mapped import


def test_the_parquet_tables_import_back_to_the_same_human_ratings(
    study: Study, exports: dict[str, Any], parquet_copy: str
) -> None:
    copy = read_jsonl(export_file(parquet_copy, study.work / "copy.jsonl"))

    def human(lines: list[dict[str, Any]]) -> dict[tuple[str, str], list[float]]:
        return {
            (item, system): sorted(answer.get("human_evals", {}).get(ASPECT, []))
            for item, system, answer in answers_of(lines)
        }

    assert human(copy) == human(exports["jsonl"])
    original = cli_json("agreement", NAME, "--include-excluded")["aspects"][ASPECT]
    copied = cli_json("agreement", parquet_copy, "--include-excluded")["aspects"][ASPECT]
    assert (copied["n_ratings"], copied["alpha"]) == (original["n_ratings"], original["alpha"])


def test_the_parquet_copy_leaves_out_the_same_rater(study: Study, parquet_copy: str) -> None:
    excluded = RaterExclusion.objects.filter(rater__dataset__name=parquet_copy, revoked_at__isnull=True)
    assert [exclusion.rater.external_id for exclusion in excluded] == [study.excluded_pseudonym]


def test_the_hf_folder_of_a_ratings_only_dataset_loads_with_datasets(study: Study) -> None:
    folder = export_file(MAPPED_NAME, study.work / "mapped-hf", "--hf-folder")
    loaded = load_hf_folder(folder, study.work / "mapped-hf-cache")
    assert (len(loaded["answers"]), len(loaded["ratings"]), len(loaded["preferences"])) == (3, 36, 0)


def test_the_tables_of_a_ratings_only_dataset_import_back(study: Study) -> None:
    folder = study.work / "mapped-tables"
    folder.mkdir()
    tables = [
        export_file(MAPPED_NAME, folder / f"{table}.parquet", "--parquet", table) for table in ("answers", "ratings")
    ]
    rubric = export_file(MAPPED_NAME, folder / "rubric.json", "--rubric")
    copy_name = f"{MAPPED_NAME} copy"
    command(
        "import_mapped",
        *map(str, tables),
        "--mapping",
        "evalsite-parquet",
        "--rubric",
        str(rubric),
        "--dataset",
        copy_name,
    )

    def rated(name: str) -> list[tuple[str, str, Any, Any]]:
        lines = read_jsonl(export_file(name, study.work / f"{name}.jsonl"))
        return [(item, system, a.get("raters"), a.get("human_evals")) for item, system, a in answers_of(lines)]

    assert rated(copy_name) == rated(MAPPED_NAME)


def test_the_mapped_import_reads_the_public_format_and_every_output_agrees(study: Study) -> None:
    exported = read_jsonl(export_file(MAPPED_NAME, study.work / "mapped.jsonl"))
    source = {line["model_id"]: line["expert_annotations"] for line in summeval_lines()}
    for _item, system, answer in answers_of(exported):
        for aspect, values in answer["human_evals"].items():
            assert values == [marks[aspect] for marks in source[system]], (system, aspect)
    report = cli_json("agreement", MAPPED_NAME)
    assert {aspect: summary["n_ratings"] for aspect, summary in report["aspects"].items()} == {
        aspect: 9 for aspect in ("coherence", "consistency", "fluency", "relevance")
    }
    assert api_json(study, "api-stats-agreement", study.mapped.pk) == report
    table = dashboard_table(study, "dashboard-dataset-table", study.mapped.pk, "agreement")
    alpha = table["columns"].index("alpha ordinal")
    for row in table["rows"]:
        assert row[alpha] == report["aspects"][row[0]]["alpha"]["ordinal"]["value"], row[0]

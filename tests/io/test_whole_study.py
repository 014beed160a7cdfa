"""One study across every feature, and one small test per seam where two features meet.

The module fixture builds the study once (tests/io/whole_study.py describes its design and how it is built): a
JSONL import and a mapped SummEval sample, a campaign with gold tasks and an adjudication rule rated by three
annotators over the annotator API, a settled dispute and an excluded rater, a judge run on a real Celery worker
against the fake provider, its certificate and a hybrid campaign. The data is committed, because the worker reads it
from its own process, and flushed when the module ends. Each test then reads the study through two or more outputs
(the command line, the statistics API, the dashboard, every export, the gate) and asserts that they agree: the same
ratings counted, the same raters left out, the same consensus, the same figures.

A new feature adds its seam here: build what it needs in `build_study`, and add a test that compares its output with
the outputs that already exist.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.core.cache import cache
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from annotations.models import Adjudication, RaterExclusion
from judging.models import JudgeScore
from tests.io.whole_study import (
    ASPECT,
    EXPERTS,
    JUDGE,
    MAPPED_NAME,
    NAME,
    RATIONALE,
    REGULAR_ITEMS,
    SETTLED_ITEM,
    SYSTEMS,
    Study,
    api_client,
    build_study,
    cli_json,
    command,
    export_file,
    load_hf_folder,
    parquet_rows,
    read_csv,
    read_jsonl,
    run_gate,
    summeval_lines,
)

pytestmark = pytest.mark.django_db

ANSWERS = REGULAR_ITEMS * len(SYSTEMS)  # the gold item's answers measure the annotators, not the systems
IMPORTED = ANSWERS * len(EXPERTS)
COLLECTED = ANSWERS * 3  # three annotators, every regular answer
COUNTED = IMPORTED + COLLECTED - ANSWERS  # the excluded annotator's ratings left out
PREFERENCES = REGULAR_ITEMS * 3
POSTGRES = settings.DATABASES["default"]["ENGINE"].endswith("postgresql")


@pytest.fixture(scope="module")
def study(django_db_setup: None, django_db_blocker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Study]:  # type: ignore[no-untyped-def]
    with django_db_blocker.unblock():
        try:
            yield build_study(tmp_path_factory.mktemp("whole-study"))
        finally:
            call_command("flush", interactive=False, verbosity=0)
            cache.clear()  # the statistics cached for these datasets' ids must not outlive them


@pytest.fixture(scope="module")
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


def app_rating_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [row for row in rows if row.get("kind", "rating") == "rating" and row["origin"] == "app"]


# ---------------------------------------------------------------- the judge run on the worker


def test_judge_scores_are_there_when_the_run_reports_success(study: Study) -> None:
    """On Postgres the build holds score writes still at the end of the run (whole_study.ScoreWritesHeld), so this
    sees what a reader sees the moment the run reads as succeeded; SQLite cannot hold one table, and only the stored
    scores are checked there."""
    if POSTGRES:
        assert study.scores_when_succeeded == study.run_units
    assert JudgeScore.objects.filter(judge=study.run.judge).count() == study.run_units


def test_judge_scores_are_the_same_in_the_export_correlate_the_api_and_the_dashboard(
    study: Study, exports: dict[str, Any]
) -> None:
    stored = dict(JudgeScore.objects.filter(judge=study.run.judge).values_list("response__text", "value"))
    assert len(stored) == study.run_units == ANSWERS + len(SYSTEMS)
    exported = {
        answer["response"]: answer["auto_evals"][JUDGE][ASPECT]
        for _item, _system, answer in answers_of(exports["judges"])
    }
    assert exported == stored
    for _item, _system, answer in answers_of(exports["judges"]):
        assert answer["judge_certification"][JUDGE] == "certified"
    correlation = cli_json("correlate", "--dataset", NAME, "--judge", JUDGE)
    assert correlation["aspects"][ASPECT]["response"]["n"] == ANSWERS
    assert api_json(study, "api-stats-correlation", study.dataset.pk, judge=JUDGE) == correlation
    adjudicated = cli_json("correlate", "--dataset", NAME, "--judge", JUDGE, "--human", "adjudicated")
    assert adjudicated["scope"]["human_score"] == "adjudicated"
    assert api_json(study, "api-stats-correlation", study.dataset.pk, judge=JUDGE, human="adjudicated") == adjudicated
    levels = dashboard_table(study, "dashboard-judge-table", study.dataset.pk, "levels", judge=JUDGE, aspect=ASPECT)
    pearson = levels["columns"].index("pearson")
    for row in levels["rows"]:
        assert row[pearson] == correlation["aspects"][ASPECT][row[0]]["pearson"]["value"], row[0]


# ---------------------------------------------------------------- statistics: the same ratings, the same figures


def test_agreement_counts_the_same_ratings_in_the_cli_the_api_and_the_dashboard(study: Study) -> None:
    report = cli_json("agreement", NAME)
    assert report["aspects"][ASPECT]["n_ratings"] == COUNTED
    assert report["scope"]["exclusions"] == {
        "left_out": True,
        "raters": [{"rater": study.excluded_pseudonym, "reason": study.exclusion.reason}],
    }
    assert api_json(study, "api-stats-agreement", study.dataset.pk) == report
    table = dashboard_table(study, "dashboard-dataset-table", study.dataset.pk, "agreement")
    alpha = table["columns"].index("alpha ordinal")
    (row,) = table["rows"]
    assert row[alpha] == report["aspects"][ASPECT]["alpha"]["ordinal"]["value"]
    page = researcher_client(study).get(reverse("dashboard-dataset", args=[study.dataset.pk]))
    assert page.context["report"] == report
    # Included again on request, the same way everywhere.
    included = cli_json("agreement", NAME, "--include-excluded")
    assert included["aspects"][ASPECT]["n_ratings"] == IMPORTED + COLLECTED
    assert api_json(study, "api-stats-agreement", study.dataset.pk, excluded="include") == included
    campaign = cli_json("agreement", NAME, "--campaign", study.campaign.name)
    assert campaign["aspects"][ASPECT]["n_ratings"] == COLLECTED - ANSWERS
    assert api_json(study, "api-stats-agreement", study.dataset.pk, campaign=study.campaign.pk) == campaign


def test_the_gate_reads_the_agreement_reports_alpha_and_the_certificate(study: Study) -> None:
    alpha = cli_json("agreement", NAME)["aspects"][ASPECT]["alpha"]
    rules = [
        {"kind": "alpha", "aspect": ASPECT, "min": round(alpha["ordinal"]["value"] - 0.1, 3)},
        {"kind": "judge_certified", "judge": JUDGE, "aspects": [ASPECT]},
    ]
    code, output, report = run_gate(study.work / "pass", NAME, rules)
    assert code == 0, output
    alpha_rule, certified_rule = report["rules"]
    assert (alpha_rule["outcome"], certified_rule["outcome"]) == ("pass", "pass"), output
    assert alpha_rule["evidence"]["alpha"] == alpha["ordinal"]
    assert alpha_rule["evidence"]["n_ratings"] == COUNTED
    assert certified_rule["evidence"][ASPECT]["certificate"] == study.certificate.pk


def test_a_gate_that_fails_exits_one(study: Study) -> None:
    alpha = cli_json("agreement", NAME)["aspects"][ASPECT]["alpha"]["ordinal"]["value"]
    code, output, report = run_gate(
        study.work / "fail", NAME, [{"kind": "alpha", "aspect": ASPECT, "min": alpha + 0.1}]
    )
    assert report["rules"][0]["outcome"] == "fail"
    assert code == 1, output


# ---------------------------------------------------------------- exports: the excluded rater, the consensus


def test_every_export_holds_the_same_ratings(study: Study, exports: dict[str, Any]) -> None:
    in_jsonl = sum(
        len(answer.get("human_evals", {}).get(ASPECT, [])) for _i, _s, answer in answers_of(exports["jsonl"])
    )
    assert in_jsonl == IMPORTED + COLLECTED
    # Each annotator also rated the gold task, whose ratings measure the annotator: no export holds them.
    assert study.tasks_rated == {name: REGULAR_ITEMS + 1 for name in study.annotators}
    for name, rows in (
        ("flat csv", exports["flat_csv"]),
        ("flat jsonl", exports["flat_jsonl"]),
        ("parquet", exports["parquet"]["ratings"]),
        ("hf folder", exports["hf"]["ratings"]),
    ):
        human = [
            row for row in rows if row.get("kind", "rating") == "rating" and row.get("filled_by", "human") == "human"
        ]
        origins = Counter(row["origin"] for row in human)
        assert origins == {"import": IMPORTED, "app": COLLECTED}, name
    for name, rows in (
        ("flat csv", [row for row in exports["flat_csv"] if row["kind"] == "preference"]),
        ("parquet", exports["parquet"]["preferences"]),
        ("hf folder", exports["hf"]["preferences"]),
    ):
        assert len(rows) == PREFERENCES, name
    assert len(exports["parquet"]["answers"]) == len(exports["hf"]["answers"]) == ANSWERS + len(SYSTEMS)


def test_the_flat_exports_mark_the_excluded_rater(study: Study, exports: dict[str, Any]) -> None:
    for name, rows in (("flat csv", exports["flat_csv"]), ("flat jsonl", exports["flat_jsonl"])):
        marked = {row["rater"] for row in rows if str(row["rater_excluded"]).lower() == "true"}
        assert marked == {study.excluded_pseudonym}, name
        assert sum(row["rater"] == study.excluded_pseudonym for row in app_rating_rows(rows)) == ANSWERS, name


def test_the_jsonl_parquet_and_hf_exports_mark_the_excluded_rater(study: Study, exports: dict[str, Any]) -> None:
    pseudonym = study.excluded_pseudonym
    for item, system, answer in answers_of(exports["jsonl"]):
        if pseudonym in answer.get("raters", []):
            marks = [rater == pseudonym for rater in answer["raters"]]
            assert answer.get("rater_excluded") == marks, (item, system)
    for line in exports["jsonl"]:
        for entry in line["turns"][0].get("preferences", []):
            assert entry.get("rater_excluded", False) == (entry["rater"] == pseudonym), line["id"]
    for name, rows in (
        ("parquet ratings", exports["parquet"]["ratings"]),
        ("parquet preferences", exports["parquet"]["preferences"]),
        ("hf ratings", exports["hf"]["ratings"]),
        ("hf preferences", exports["hf"]["preferences"]),
    ):
        assert {row["rater"] for row in rows if row.get("rater_excluded") is True} == {pseudonym}, name
        assert all(row.get("rater_excluded") is False for row in rows if row["rater"] != pseudonym), name


def test_the_consensus_is_the_same_in_every_export(study: Study, exports: dict[str, Any]) -> None:
    settled = {
        (a.response.system.key, a.aspect.name): a.value
        for a in Adjudication.objects.filter(dispute=study.settled).select_related("response__system", "aspect")
    }
    assert settled
    jsonl = {
        (system, ASPECT): answer["consensus"][ASPECT]
        for item, system, answer in answers_of(exports["jsonl"])
        if item == SETTLED_ITEM and "consensus" in answer
    }
    assert jsonl == settled
    assert not [
        item for item, _s, answer in answers_of(exports["jsonl"]) if "consensus" in answer and item != SETTLED_ITEM
    ]
    for name, rows in (
        ("flat jsonl", exports["flat_jsonl"]),
        ("parquet", exports["parquet"]["ratings"]),
        ("hf folder", exports["hf"]["ratings"]),
    ):
        found = {
            (row["system"], row["aspect"]): float(row["consensus"])
            for row in rows
            if row.get("kind", "rating") == "rating" and row["consensus"] not in (None, "")
        }
        assert found == settled, name


def test_the_reason_with_its_line_break_is_the_same_in_every_export(study: Study, exports: dict[str, Any]) -> None:
    reasons = {
        "jsonl": [entry["reason"] for line in exports["jsonl"] for entry in line["turns"][0].get("preferences", [])],
        "flat csv": [row["rationale"] for row in exports["flat_csv"] if row["kind"] == "preference"],
        "flat jsonl": [row["rationale"] for row in exports["flat_jsonl"] if row["kind"] == "preference"],
        "parquet": [row["reason"] for row in exports["parquet"]["preferences"]],
        "hf folder": [row["reason"] for row in exports["hf"]["preferences"]],
    }
    for name, found in reasons.items():
        assert found == [RATIONALE] * PREFERENCES, name


def test_the_hf_folder_card_states_the_agreement_reports_alpha(study: Study, exports: dict[str, Any]) -> None:
    alpha = cli_json("agreement", NAME)["aspects"][ASPECT]["alpha"]["ordinal"]["value"]
    assert f"{alpha:.3f}" in exports["hf"]["card"]
    assert "float64" in exports["hf"]["features"]["ratings"]["value"]


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
    assert cli_json("agreement", NAME)["aspects"][ASPECT]["n_ratings"] == COUNTED


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


@pytest.fixture(scope="module")
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

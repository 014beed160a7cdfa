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

from annotations.models import Adjudication, Assignment, AssignmentStatus, ErrorSpan, RaterExclusion, Rating, Task
from annotations.quality.selectors import quality_panel
from judging.analysis.judge_reports import judge_details
from judging.analysis.selectors import rating_scope
from judging.hybrid.selectors import active_estimates
from judging.models import JudgeScore, Judgment
from judging.statistics.active_ppi import active_ppi_mean
from judging.statistics.sequences import confidence_sequence
from tests.io.whole_study import (
    ANNOTATORS,
    ASPECT,
    CAMPAIGN,
    EXCLUDED,
    EXPERTS,
    GOLD_ITEM,
    HUMAN_SHARE,
    HYBRID_CAMPAIGN,
    JUDGE,
    MAPPED_NAME,
    NAME,
    RATIONALE,
    REGULAR_ITEMS,
    SETTLED_ITEM,
    SPAN_JUDGE,
    SPANS,
    STOP_SYSTEM,
    STOP_WIDTH,
    STOPPING_CAMPAIGN,
    SYSTEMS,
    Study,
    api_client,
    build_study,
    cli_json,
    command,
    export_file,
    item_id,
    load_hf_folder,
    mqm_score,
    parquet_rows,
    read_csv,
    read_jsonl,
    run_gate,
    span_token,
    summeval_lines,
)

pytestmark = pytest.mark.django_db

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


def app_rating_rows(rows: list[dict[str, Any]], aspect: str = ASPECT) -> list[dict[str, Any]]:
    return [
        row
        for row in rows
        if row.get("kind", "rating") == "rating" and row["origin"] == "app" and row["aspect"] == aspect
    ]


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
    assert report["aspects"][ASPECT]["n_ratings"] == counted(study)
    assert report["scope"]["exclusions"] == {
        "left_out": True,
        "raters": [{"rater": study.excluded_pseudonym, "reason": study.exclusion.reason}],
    }
    assert api_json(study, "api-stats-agreement", study.dataset.pk) == report
    table = dashboard_table(study, "dashboard-dataset-table", study.dataset.pk, "agreement")
    alpha = table["columns"].index("alpha ordinal")
    (row,) = [row for row in table["rows"] if row[0] == ASPECT]
    assert row[alpha] == report["aspects"][ASPECT]["alpha"]["ordinal"]["value"]
    page = researcher_client(study).get(reverse("dashboard-dataset", args=[study.dataset.pk]))
    assert page.context["report"] == report
    # Included again on request, the same way everywhere.
    included = cli_json("agreement", NAME, "--include-excluded")
    assert included["aspects"][ASPECT]["n_ratings"] == IMPORTED + collected(study)
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
    assert alpha_rule["evidence"]["n_ratings"] == counted(study)
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
    assert in_jsonl == IMPORTED + collected(study)
    # Each annotator also rated the gold task, whose ratings measure the annotator: no export holds them.
    assert {name: study.tasks_rated[name] for name in ANNOTATORS} == {name: REGULAR_ITEMS + 1 for name in ANNOTATORS}
    for name, rows in (
        ("flat csv", exports["flat_csv"]),
        ("flat jsonl", exports["flat_jsonl"]),
        ("parquet", exports["parquet"]["ratings"]),
        ("hf folder", exports["hf"]["ratings"]),
    ):
        human = [
            row
            for row in rows
            if row.get("kind", "rating") == "rating"
            and row.get("filled_by", "human") == "human"
            and row["aspect"] == ASPECT
        ]
        origins = Counter(row["origin"] for row in human)
        assert origins == {"import": IMPORTED, "app": collected(study)}, name
    for name, rows in (
        ("flat csv", [row for row in exports["flat_csv"] if row["kind"] == "preference"]),
        ("parquet", exports["parquet"]["preferences"]),
        ("hf folder", exports["hf"]["preferences"]),
    ):
        assert Counter(row["campaign"] for row in rows if row["preferred"]) == {CAMPAIGN: PREFERENCES}, name
        # The campaigns of one answer per task ask no preference: each answer's entry chooses nothing.
        assert Counter(row["campaign"] for row in rows if not row["preferred"]) == {
            HYBRID_CAMPAIGN: study.active_rated,
            STOPPING_CAMPAIGN: study.stopping_rated,
        }, name
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
    """The first campaign's reasons (the later campaigns ask none)."""
    preference_rows = [row for row in exports["flat_jsonl"] if row["kind"] == "preference"]
    reasons = {
        "jsonl": [
            entry["reason"]
            for line in exports["jsonl"]
            for entry in line["turns"][0].get("preferences", [])
            if entry["campaign"] == CAMPAIGN
        ],
        "flat csv": [
            row["rationale"]
            for row in exports["flat_csv"]
            if row["kind"] == "preference" and row["campaign"] == CAMPAIGN
        ],
        "flat jsonl": [row["rationale"] for row in preference_rows if row["campaign"] == CAMPAIGN],
        "parquet": [row["reason"] for row in exports["parquet"]["preferences"] if row["campaign"] == CAMPAIGN],
        "hf folder": [row["reason"] for row in exports["hf"]["preferences"] if row["campaign"] == CAMPAIGN],
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


# ---------------------------------------------------------------- the span aspect


def span_ratings(study: Study) -> Any:
    """The annotators' span ratings of the regular answers (the gold item's measure the annotators)."""
    return (
        Rating.objects.filter(aspect__dataset=study.dataset, aspect__name=SPANS)
        .exclude(response__turn__item__external_id=item_id(GOLD_ITEM))
        .select_related("rater", "response__turn__item", "response__system")
    )


def span_tokens(lines: list[dict[str, Any]]) -> dict[tuple[str, str, str], Any]:
    """(item, system, rater) → the span token the JSONL export holds (the experts marked no spans)."""
    return {
        (item, system, rater): token
        for item, system, answer in answers_of(lines)
        for rater, token in zip(answer.get("raters", []), answer.get("human_evals", {}).get(SPANS, []), strict=True)
        if token is not None
    }


def spans_by_rater(rows: list[dict[str, Any]]) -> Counter[str]:
    return Counter(row["rater"] for row in rows if row["kind"] == "error_span" and row["aspect"] == SPANS)


def test_a_span_rating_is_the_mqm_score_of_its_spans_in_the_database_and_every_export(
    study: Study, exports: dict[str, Any]
) -> None:
    ratings = list(span_ratings(study))
    assert len(ratings) == COLLECTED
    stored = {}
    for rating in ratings:
        spans = list(rating.error_spans.order_by("position").values("start", "end", "category", "severity"))
        assert rating.value == mqm_score({"spans": spans}) == mqm_score(rating.raw), rating.raw
        username = rating.rater.user.username  # type: ignore[union-attr]
        assert rating.raw == span_token(username, rating.response.text)  # what the annotator marked, in code points
        assert spans == rating.raw["spans"]
        stored[(rating.response.turn.item.external_id, rating.response.system.key, rating.rater.pseudonym)] = rating
    assert span_tokens(exports["jsonl"]) == {key: rating.raw for key, rating in stored.items()}
    for name, rows in (("flat csv", exports["flat_csv"]), ("flat jsonl", exports["flat_jsonl"])):
        values = {
            (row["item_id"], row["system"], row["rater"]): float(row["value"]) for row in app_rating_rows(rows, SPANS)
        }
        assert values == {key: rating.value for key, rating in stored.items()}, name


def test_the_flat_exports_have_one_error_span_row_per_span(study: Study, exports: dict[str, Any]) -> None:
    in_database = Counter(
        ErrorSpan.objects.filter(rating__in=span_ratings(study)).values_list("rating__rater__pseudonym", flat=True)
    )
    assert in_database[study.excluded_pseudonym] == sum(
        len(span_token(EXCLUDED, text)["spans"])
        for text in (
            Rating.objects.filter(
                pk__in=span_ratings(study).filter(rater__pseudonym=study.excluded_pseudonym)
            ).values_list("response__text", flat=True)
        )
    )
    for name, rows in (("flat csv", exports["flat_csv"]), ("flat jsonl", exports["flat_jsonl"])):
        assert spans_by_rater(rows) == in_database, name
    # Each row holds one span of the rating's token, as the JSONL export has it.
    exported = Counter(
        json.dumps([row["item_id"], row["system"], row["rater"], row["raw"]])
        for row in exports["flat_jsonl"]
        if row["kind"] == "error_span" and row["aspect"] == SPANS
    )
    assert exported == Counter(
        json.dumps([*key, span]) for key, token in span_tokens(exports["jsonl"]).items() for span in token["spans"]
    )


def test_the_jsonl_export_round_trips_the_spans(study: Study, exports: dict[str, Any]) -> None:
    """export → import → export: every span token again, with its rater, and the same ErrorSpan rows."""
    rubric = export_file(NAME, study.work / "spans-rubric.json", "--rubric")
    copy = f"{NAME} spans copy"
    command("import_dataset", str(study.work / "exports" / "study.jsonl"), "--name", copy, "--rubric", str(rubric))
    again = read_jsonl(export_file(copy, study.work / "spans-copy.jsonl"))

    def marked(lines: list[dict[str, Any]]) -> dict[tuple[str, str], Any]:
        return {
            (item, system): (answer.get("raters"), answer.get("human_evals", {}).get(SPANS))
            for item, system, answer in answers_of(lines)
        }

    assert marked(again) == marked(exports["jsonl"])
    fields = ("rating__response__text", "position", "start", "end", "category", "severity", "note")
    # The copy's raters are the exported names: the original's pseudonyms.
    original = span_ratings(study).filter(origin="app")
    copied = Rating.objects.filter(aspect__dataset__name=copy, aspect__name=SPANS)
    assert sorted(ErrorSpan.objects.filter(rating__in=copied).values_list("rating__rater__external_id", *fields)) == (
        sorted(ErrorSpan.objects.filter(rating__in=original).values_list("rating__rater__pseudonym", *fields))
    )


def test_an_exclusion_marks_the_excluded_raters_spans_and_leaves_them_out_of_the_statistics(
    study: Study, exports: dict[str, Any]
) -> None:
    pseudonym = study.excluded_pseudonym
    for name, rows in (("flat csv", exports["flat_csv"]), ("flat jsonl", exports["flat_jsonl"])):
        span_rows = [row for row in rows if row["kind"] == "error_span"]
        marked = {row["rater"] for row in span_rows if str(row["rater_excluded"]).lower() == "true"}
        assert marked == {pseudonym}, name
        assert all(str(row["rater_excluded"]).lower() == "false" for row in span_rows if row["rater"] != pseudonym), (
            name
        )
    for item, system, answer in answers_of(exports["jsonl"]):
        if SPANS in answer.get("human_evals", {}):
            marks = [rater == pseudonym for rater in answer["raters"]]
            assert answer.get("rater_excluded") == marks, (item, system)
    report = cli_json("agreement", NAME)["aspects"][SPANS]
    included = cli_json("agreement", NAME, "--include-excluded")["aspects"][SPANS]
    assert (report["n_ratings"], included["n_ratings"]) == (COLLECTED - ANSWERS, COLLECTED)
    details = judge_details(study.dataset, SPAN_JUDGE, SPANS)["spans"]
    everyone = judge_details(study.dataset, SPAN_JUDGE, SPANS, scope=rating_scope(include_excluded=True))["spans"]
    assert pseudonym not in {row["rater"] for row in details["raters"]}
    assert pseudonym in {row["rater"] for row in everyone["raters"]}


def test_the_span_judge_reads_as_succeeded_only_with_every_judgment_and_score(
    study: Study, exports: dict[str, Any]
) -> None:
    run = study.span_run
    assert run.total == ANSWERS + len(SYSTEMS)  # the span aspect only, on every answer
    assert set(Judgment.objects.filter(run=run).values_list("aspect_name", flat=True)) == {SPANS}
    if POSTGRES:
        assert study.span_when_succeeded == (run.total, run.total)
    scores = dict(JudgeScore.objects.filter(judge=run.judge).values_list("response_id", "value"))
    assert len(scores) == run.total
    # The judge marks what the first annotator marks, so its MQM score is that annotator's rating.
    first = dict(span_ratings(study).filter(rater__user__username="annotator1").values_list("response_id", "value"))
    assert {pk: scores[pk] for pk in first} == first
    exported = {
        answer["response"]: answer["auto_evals"][SPAN_JUDGE][SPANS] for _i, _s, answer in answers_of(exports["judges"])
    }
    assert exported == dict(JudgeScore.objects.filter(judge=run.judge).values_list("response__text", "value"))


# ---------------------------------------------------------------- active sampling in the hybrid campaign


def test_each_tasks_sampling_probability_is_the_same_in_the_database_the_exports_and_the_jsonl_answers(
    study: Study, exports: dict[str, Any]
) -> None:
    tasks = Task.objects.filter(campaign=study.hybrid_campaign, is_gold=False).prefetch_related("responses__turn__item")
    probability: dict[tuple[str, str], float] = {}
    for task in tasks:
        (answer,) = task.responses.all()
        assert task.human_probability is not None, task
        probability[(answer.turn.item.external_id, answer.system.key)] = task.human_probability
    assert len(probability) == ANSWERS and all(0 < p <= 1 for p in probability.values())
    assert sum(probability.values()) == pytest.approx(HUMAN_SHARE * ANSWERS)
    assert len(set(probability.values())) > 1  # the judge's uncertainty tells the tasks apart
    for name, rows in (
        ("flat csv", exports["flat_csv"]),
        ("flat jsonl", exports["flat_jsonl"]),
        ("parquet", exports["parquet"]["ratings"]),
    ):
        found = {
            (row["item_id"], row["system"]): float(row["human_probability"])
            for row in rows
            if row["campaign"] == HYBRID_CAMPAIGN and row.get("kind", "rating") == "rating"
        }
        assert found == {key: p for key, p in probability.items() if key in found}, name
        assert len(found) == (study.calibration.judged_tasks or 0) + study.active_rated, name
    for lines in (exports["jsonl"], exports["judges"]):
        sampled = {
            (item, system): entry["probability"]
            for item, system, answer in answers_of(lines)
            for entry in answer.get("human_sampling", [])
            if entry["campaign"] == HYBRID_CAMPAIGN
        }
        assert sampled == probability


def test_the_active_estimate_on_the_progress_page_weighs_the_campaigns_ratings_by_the_exported_probabilities(
    study: Study, exports: dict[str, Any]
) -> None:
    judge = {
        (row["item_id"], row["system"]): float(row["value"])
        for row in exports["flat_jsonl"]
        if row["campaign"] == HYBRID_CAMPAIGN and row["filled_by"] == "judge"
    }
    human = {
        (row["item_id"], row["system"]): float(row["value"])
        for row in app_rating_rows(exports["flat_jsonl"])
        if row["campaign"] == HYBRID_CAMPAIGN
    }
    assert len(human) == study.active_rated > 0
    scores = {
        (item, system): answer["auto_evals"][JUDGE][ASPECT] for item, system, answer in answers_of(exports["judges"])
    }
    probability = {
        (item, system): entry["probability"]
        for item, system, answer in answers_of(exports["jsonl"])
        for entry in answer.get("human_sampling", [])
        if entry["campaign"] == HYBRID_CAMPAIGN
    }
    keys = sorted(probability, key=lambda key: (key[0], SYSTEMS.index(key[1])))
    assert {key: scores[key] for key in judge} == judge  # the judge fills its tasks with its scores
    expected = active_ppi_mean(
        [human.get(key) for key in keys], [scores[key] for key in keys], [probability[key] for key in keys]
    )
    (row,) = active_estimates(study.hybrid_campaign)
    assert (row.aspect, row.rated, row.sent) == (ASPECT, study.active_rated, study.calibration.human_tasks)
    assert row.result["active"]["estimate"]["value"] == pytest.approx(expected["active"]["estimate"]["value"])
    page = researcher_client(study).get(reverse("campaign-progress", args=[study.hybrid_campaign.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    assert f"{expected['active']['estimate']['value']:.3f}" in html
    assert f"{row.rated} / {row.sent}" in html


# ---------------------------------------------------------------- the stopping rule


def stopping_ratings(study: Study) -> Any:
    return Rating.objects.filter(
        rater__user__username=study.stopping_campaign.annotators.get().username, aspect__name=ASPECT
    )


def test_the_stopping_rule_stops_the_campaign_after_the_answer_that_meets_it(study: Study) -> None:
    campaign = study.stopping_campaign
    assert campaign.stopped_at is not None
    # Not met before the first answer, nor before the last; met by the last.
    # The worker reads the rule after each answer too, and may be the one that stops it.
    *before, last = study.stop_checks
    assert before == ["not met"] * study.stopping_rated and last in ("stopped", "already stopped", "nothing to check")
    evidence = campaign.stop_evidence
    values = list(
        stopping_ratings(study)
        .filter(response__system__key=STOP_SYSTEM)
        .order_by("created_at", "pk")
        .values_list("value", flat=True)
    )
    assert evidence["met"] and evidence["n"] == len(values) > 0
    last_look = confidence_sequence(values, lower=1, upper=5)[-1]["interval"]
    assert last_look["low"] is not None and last_look["high"] is not None
    assert evidence["high"] - evidence["low"] == pytest.approx(last_look["high"] - last_look["low"])
    assert evidence["high"] - evidence["low"] <= STOP_WIDTH
    # Tasks are left, and no one is handed one: the claim on the annotator API says there is nothing.
    assert Assignment.objects.filter(campaign=campaign, status=AssignmentStatus.FREE).exists()
    claimed = api_client(campaign.annotators.get()).post(reverse("api-annotate-next", args=[campaign.pk]))
    assert claimed.status_code == 204, claimed.content[:300]
    page = researcher_client(study).get(reverse("campaign-progress", args=[campaign.pk])).content.decode()
    assert 'id="stopping-met"' in page and f"after n = {evidence['n']}" in page


def test_exports_and_statistics_after_the_stop_hold_the_ratings_stored(study: Study, exports: dict[str, Any]) -> None:
    stored = {
        (rating.response.turn.item.external_id, rating.response.system.key): rating.value
        for rating in stopping_ratings(study).select_related("response__turn__item", "response__system")
    }
    assert len(stored) == study.stopping_rated
    for name, rows in (
        ("flat csv", exports["flat_csv"]),
        ("flat jsonl", exports["flat_jsonl"]),
        ("parquet", exports["parquet"]["ratings"]),
    ):
        found = {
            (row["item_id"], row["system"]): float(row["value"])
            for row in app_rating_rows(rows)
            if row["campaign"] == STOPPING_CAMPAIGN
        }
        assert found == stored, name
    report = cli_json("agreement", NAME, "--campaign", STOPPING_CAMPAIGN)
    assert report["aspects"][ASPECT]["n_ratings"] == len(stored)
    assert api_json(study, "api-stats-agreement", study.dataset.pk, campaign=study.stopping_campaign.pk) == report


# ---------------------------------------------------------------- rater reliabilities


def test_the_quality_panels_reliabilities_are_the_rater_model_commands_without_the_excluded_rater(
    study: Study,
) -> None:
    table = quality_panel(study.campaign).reliability
    assert table.columns == [("Quality", "rater severity")]  # the scale aspect; a span aspect has no rater model
    panel = {row.pseudonym: cells[0].value for row, cells in table.rows}
    report = cli_json("rater_model", "--dataset", NAME, "--model", "severity", "--campaign", CAMPAIGN)
    fitted = {rater["rater"]: rater["reliability"]["value"] for rater in report["aspects"][ASPECT]["raters"]}
    assert study.excluded_pseudonym not in panel and study.excluded_pseudonym not in fitted
    assert panel == pytest.approx(fitted) and len(panel) == 2
    assert report["scope"]["exclusions"]["raters"] == [
        {"rater": study.excluded_pseudonym, "reason": study.exclusion.reason}
    ]
    # With the excluded rater, the model is refitted on three raters: every reliability moves.
    everyone = cli_json(
        "rater_model",
        "--dataset",
        NAME,
        "--model",
        "severity",
        "--campaign",
        CAMPAIGN,
        "--include-excluded",
    )
    refitted = {rater["rater"]: rater["reliability"]["value"] for rater in everyone["aspects"][ASPECT]["raters"]}
    assert set(refitted) == {*fitted, study.excluded_pseudonym}
    assert all(refitted[rater] != pytest.approx(fitted[rater]) for rater in fitted)

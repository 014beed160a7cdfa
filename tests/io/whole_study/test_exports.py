"""The whole study's seams between the exports: the same ratings, the excluded rater, the consensus, the reasons."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from annotations.models import Adjudication
from tests.io.whole_study.building import Study
from tests.io.whole_study.design import (
    ANNOTATORS,
    ASPECT,
    CAMPAIGN,
    HYBRID_CAMPAIGN,
    NAME,
    RATIONALE,
    REGULAR_ITEMS,
    SETTLED_ITEM,
    STOPPING_CAMPAIGN,
    SYSTEMS,
)
from tests.io.whole_study.outputs import (
    ANSWERS,
    IMPORTED,
    PREFERENCES,
    answers_of,
    app_rating_rows,
    cli_json,
    collected,
)

pytestmark = pytest.mark.django_db


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

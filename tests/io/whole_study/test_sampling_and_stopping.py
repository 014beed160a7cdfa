"""The whole study's seams of active sampling in the hybrid campaign and of the stopping rule."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from annotations.models import (
    Assignment,
    AssignmentStatus,
    Rating,
    Task,
)
from judging.hybrid.selectors import active_estimates
from judging.statistics.active_ppi import active_ppi_mean
from judging.statistics.sequences import confidence_sequence
from tests.io.whole_study.building import Study, api_client
from tests.io.whole_study.design import (
    ASPECT,
    HUMAN_SHARE,
    HYBRID_CAMPAIGN,
    JUDGE,
    NAME,
    STOP_SYSTEM,
    STOP_WIDTH,
    STOPPING_CAMPAIGN,
    SYSTEMS,
)
from tests.io.whole_study.outputs import ANSWERS, answers_of, api_json, app_rating_rows, cli_json, researcher_client

pytestmark = pytest.mark.django_db


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

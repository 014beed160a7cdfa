"""The whole study's seams of the judge run on the worker, the statistics and the gate, and the raters'
reliabilities."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from annotations.quality.selectors import quality_panel
from judging.models import (
    JudgeScore,
)
from tests.io.whole_study.building import Study
from tests.io.whole_study.design import ASPECT, CAMPAIGN, JUDGE, NAME, SYSTEMS
from tests.io.whole_study.outputs import (
    ANSWERS,
    COLLECTED,
    IMPORTED,
    POSTGRES,
    answers_of,
    api_json,
    cli_json,
    collected,
    counted,
    dashboard_table,
    researcher_client,
    run_gate,
)

pytestmark = pytest.mark.django_db


# ---------------------------------------------------------------- the judge run on the worker


def test_judge_scores_are_there_when_the_run_reports_success(study: Study) -> None:
    """On Postgres the build holds score writes still at the end of the run (building.ScoreWritesHeld), so this
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

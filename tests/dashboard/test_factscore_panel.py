"""The FActScore panel of the dashboard judges page: access, numbers equal factscore_report's, downloads."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from judging.factscore import services
from judging.factscore.selectors import factscore_report
from judging.models import JudgeRun
from tests.conftest import client_for
from tests.factories import JudgeFactory, JudgeScoreFactory
from tests.factscore.conftest import _world_server, finished_run, world, world_provider  # noqa: F401 (fixtures)
from tests.factscore.factories import truth

pytestmark = pytest.mark.django_db

CURIE_THIRD = "Marie Curie won the Nobel Prize in Chemistry in 1911."
BASEL = "The Rhine passes Basel."
BLACK_SEA = "The Rhine flows into the Black Sea."


def review_all(campaign, user: User, overrides: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    while (assignment := services.fact_review_claim(campaign=campaign, user=user)) is not None:
        facts = services.reviewer_facts(assignment)
        labels = {fact.pk: overrides.get(fact.text, truth(fact.text)) for fact in facts}
        services.fact_review_submit(assignment=assignment, user=user, labels=labels, seconds_spent=2)


def named_rows(table: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(zip(table["columns"], row, strict=True)) for row in table["rows"]]


def assert_table_rows(table: dict[str, Any], expected_rows: list[dict[str, Any]], keys: dict[str, str]) -> None:
    """Each row of a panel table shows, in each named column, the report's value under the key that column maps to."""
    for named, expected in zip(named_rows(table), expected_rows, strict=True):
        for column, key in keys.items():
            assert named[column] == expected[key], column


@pytest.fixture
def run(world, world_provider, eager, django_capture_on_commit_callbacks, researcher) -> JudgeRun:  # type: ignore[no-untyped-def]  # noqa: F811
    return finished_run(world, world_provider, django_capture_on_commit_callbacks, researcher)


@pytest.fixture
def reviewed_run(run: JudgeRun, annotator1: User, annotator2: User) -> JudgeRun:
    """Two reviewers who disagree on a few facts, and both call the estimator's false Black Sea fact supported,
    so that one system is overestimated (+) and the other underestimated (-)."""
    campaign = services.fact_review_campaign_create(
        name="panel review", run=run, raters_per_answer=2, annotators=[annotator1, annotator2]
    )
    review_all(campaign, annotator1, {CURIE_THIRD: "not_supported", BLACK_SEA: "supported"})
    review_all(campaign, annotator2, {BASEL: "not_supported", BLACK_SEA: "supported"})
    return run


def judges_url(run: JudgeRun) -> str:
    return reverse("dashboard-judges", args=[run.dataset_id]) + "?judge=" + run.judge.name


def table_url(run: JudgeRun, table: str, fmt: str) -> str:
    return reverse("dashboard-judge-table", args=[run.dataset_id, table, fmt]) + "?judge=" + run.judge.name


def download(client: Client, url: str) -> Any:
    response = client.get(url)
    assert response.status_code == 200, response.content[:500]
    return response


@pytest.mark.parametrize("page", ["judges", "systems_json", "estimator_csv"])
def test_access_by_role(
    page: str,
    reviewed_run: JudgeRun,
    researcher: User,
    other_researcher: User,
    annotator1: User,
    outsider: User,
) -> None:
    url = {
        "judges": judges_url(reviewed_run),
        "systems_json": table_url(reviewed_run, "factscore-systems", "json"),
        "estimator_csv": table_url(reviewed_run, "factscore-estimator", "csv"),
    }[page]
    assert client_for(researcher).get(url).status_code == 200
    assert client_for(researcher).post(url).status_code == 405
    assert client_for(annotator1).get(url).status_code == 403  # a reviewer of this very run
    assert client_for(outsider).get(url).status_code == 403
    assert client_for(other_researcher).get(url).status_code == 404
    anonymous = client_for(None).get(url)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith(reverse("login"))


def test_panel_numbers_equal_the_report(reviewed_run: JudgeRun, researcher: User) -> None:
    page = client_for(researcher).get(judges_url(reviewed_run))
    assert page.status_code == 200
    report = factscore_report(reviewed_run)
    panel = page.context["factscore"]
    assert panel["report"] == report
    estimator = report["human"]["estimator"]
    assert {row["mark"] for row in estimator["systems"]} == {"+", "-"}  # the data exercises both marks
    assert estimator["ranking_equal"] is True

    assert_table_rows(
        panel["factscore_systems"],
        report["systems"],
        {
            "system": "system",
            "FActScore": "factscore",
            "% responding": "pct_responding",
            "facts per answer": "facts_per_answer",
        },
    )
    assert_table_rows(
        panel["factscore_estimator"],
        estimator["systems"],
        {
            "human FActScore": "human",
            "estimated FActScore": "estimated",
            "error rate (points)": "error_rate",
            "mark (±5 points)": "mark",
            "human rank": "human_rank",
            "estimated rank": "estimated_rank",
        },
    )
    agreement = report["human"]["agreement"]
    human = named_rows(panel["factscore_human"])[0]
    assert human["alpha on fact labels"] == agreement["alpha"]["value"]
    assert human["alpha 95% CI"] == [agreement["ci95"]["low"], agreement["ci95"]["high"]]
    assert human["ranking equal"] is True and human["reviewed answers"] == report["human"]["reviewed_answers"]

    html = page.content.decode()
    assert 'id="factscore-panel"' in html
    assert f'href="{reverse("factscore:report", args=[reviewed_run.pk])}"' in html
    assert "Ranking equal: yes" in html
    for expected in report["systems"]:
        assert f"<td>{expected['factscore']:.3f}</td>" in html
        assert f"<td>{expected['pct_responding']:.3f}</td>" in html
    for expected in estimator["systems"]:
        assert f"<td>{expected['error_rate']:.3f}</td>" in html and f"<td>{expected['mark']}</td>" in html
    assert f"<td>{agreement['alpha']['value']:.3f}</td>" in html
    assert f"<td>[{agreement['ci95']['low']:.3f}, {agreement['ci95']['high']:.3f}]</td>" in html
    # Every FActScore table downloads from the panel like the other dashboard tables.
    for table in ("factscore-systems", "factscore-estimator", "factscore-human"):
        for fmt in ("csv", "json"):
            assert reverse("dashboard-judge-table", args=[reviewed_run.dataset_id, table, fmt]) in html


def test_htmx_partial_carries_the_panel(reviewed_run: JudgeRun, researcher: User) -> None:
    partial = client_for(researcher).get(judges_url(reviewed_run), HTTP_HX_REQUEST="true")
    html = partial.content.decode()
    assert partial.status_code == 200 and 'id="factscore-panel"' in html and "<html" not in html


def test_downloads_equal_the_report(reviewed_run: JudgeRun, researcher: User) -> None:
    client = client_for(researcher)
    report = factscore_report(reviewed_run)
    estimator = report["human"]["estimator"]["systems"]

    systems = json.loads(download(client, table_url(reviewed_run, "factscore-systems", "json")).content)
    assert [row[0] for row in systems["rows"]] == [row["system"] for row in report["systems"]]
    assert [row[1] for row in systems["rows"]] == [row["factscore"] for row in report["systems"]]
    assert [row[3] for row in systems["rows"]] == [row["facts_per_answer"] for row in report["systems"]]

    response = download(client, table_url(reviewed_run, "factscore-estimator", "csv"))
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    header, *rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert header[0] == "system" and len(rows) == len(estimator)
    column = {name: index for index, name in enumerate(header)}
    for row, expected in zip(rows, estimator, strict=True):
        assert float(row[column["error rate (points)"]]) == expected["error_rate"]
        assert float(row[column["human FActScore"]]) == expected["human"]
        # A leading + or - would be read as a formula by spreadsheets: csv_safe neutralises it.
        assert row[column["mark (±5 points)"]] == "'" + expected["mark"]

    human = json.loads(download(client, table_url(reviewed_run, "factscore-human", "json")).content)
    agreement = report["human"]["agreement"]
    assert human["rows"] == [
        [
            report["human"]["reviewed_answers"],
            True,
            report["human"]["estimator"]["mean_error_rate"],
            "nominal",
            agreement["alpha"]["value"],
            [agreement["ci95"]["low"], agreement["ci95"]["high"]],
            agreement["n_facts"],
            agreement["n_labels"],
        ]
    ]


def test_panel_before_any_review(run: JudgeRun, researcher: User) -> None:
    client = client_for(researcher)
    page = client.get(judges_url(run))
    assert page.status_code == 200
    html = page.content.decode()
    report = factscore_report(run)
    assert report["human"] is None and page.context["factscore"]["report"] == report
    assert 'id="factscore-panel"' in html and "No submitted fact reviews yet" in html
    assert f"<td>{report['systems'][0]['factscore']:.3f}</td>" in html
    assert json.loads(download(client, table_url(run, "factscore-estimator", "json")).content)["rows"] == []


def test_other_judges_have_no_panel_and_no_factscore_tables(run: JudgeRun, researcher: User) -> None:
    imported = JudgeFactory(dataset=run.dataset, name="imported judge", kind="imported")
    judgment = run.judgments.first()
    assert judgment is not None
    JudgeScoreFactory(judge=imported, response=judgment.response, aspect_name="factuality", value=3)
    client = client_for(researcher)
    url = reverse("dashboard-judges", args=[run.dataset_id]) + "?judge=imported judge"
    page = client.get(url)
    assert page.status_code == 200 and page.context["factscore"] is None
    assert 'id="factscore-panel"' not in page.content.decode()
    foreign_table = reverse("dashboard-judge-table", args=[run.dataset_id, "factscore-systems", "json"])
    assert client.get(foreign_table + "?judge=imported judge").status_code == 404
    assert client.get(foreign_table).status_code == 404  # no judge given


def test_factscore_runs_are_listed(run: JudgeRun, researcher: User, other_researcher: User) -> None:
    index = client_for(researcher).get(reverse("dashboard-index")).content.decode()
    assert run.judge.name in index
    assert reverse("dashboard-judges", args=[run.dataset_id]) + "?judge=" in index
    assert reverse("factscore:report", args=[run.pk]) in index
    assert run.judge.name not in client_for(other_researcher).get(reverse("dashboard-index")).content.decode()
    judges = client_for(researcher).get(reverse("dashboard-judges", args=[run.dataset_id]))
    assert judges.context["factscore_judges"] == {run.judge.name}
    assert "run · FActScore" in judges.content.decode()

"""The quality panel's posterior label per answer: each is the label (and its posterior probability) or the expected
score that judging.statistics.rater_models gives when fitted here on the test's own plan of who gave which value
(Dawid and Skene 1979 for the nominal aspect, the rater-severity model for the ordered one); the panel shows the
first rows, the CSV download all of them."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.core.cache import cache
from django.urls import reverse

from annotations.models import Response
from annotations.quality import selectors as quality_selectors
from annotations.quality.selectors import quality_panel
from judging.statistics.rater_models import fit_rater_model
from tests.annotate.test_exclusion_views import client_for
from tests.annotate.test_quality_reliability import ITEMS, PLANS, SYSTEMS, campaign_rated

pytestmark = pytest.mark.django_db


def fitted(aspect: str, model: str, raters: int) -> dict[tuple[int, str], dict[str, Any]]:
    """Each (item position, system)'s estimate, fitted here from the plans, not from the database."""
    plans = list(PLANS.values())[:raters]
    triples = [
        ((position, system), f"rater{index}", plan(position, system, aspect))
        for index, plan in enumerate(plans)
        for position in range(ITEMS)
        for system in SYSTEMS
    ]
    result = fit_rater_model(model, triples)
    assert result["undefined"] is None
    return {item["item"]: dict(item) for item in result["items"]}  # type: ignore[misc]


@pytest.fixture
def rated(researcher, annotators):  # type: ignore[no-untyped-def]
    cache.clear()
    campaign = campaign_rated(researcher, annotators, list(PLANS.values()))
    place = {
        pk: (position, system)
        for pk, position, system in Response.objects.filter(turn__item__dataset=campaign.dataset).values_list(
            "pk", "turn__item__position", "system__key"
        )
    }
    return campaign, place


def test_the_panel_lists_each_answers_posterior_as_the_model_fits_it(rated, researcher, monkeypatch):
    campaign, place = rated
    columns = [("factuality", "dawid-skene"), ("factuality", "mace"), ("amount_info", "severity")]
    want = {column: fitted(*column, 3) for column in columns}
    tables = quality_panel(campaign).posteriors
    assert [(table.model, table.categorical, table.total) for table in tables] == [
        ("Dawid–Skene", True, ITEMS * len(SYSTEMS)),
        ("MACE", True, ITEMS * len(SYSTEMS)),
        ("rater severity", False, ITEMS * len(SYSTEMS)),
    ]
    for table, column in zip(tables, columns, strict=True):
        assert len(table.rows) == ITEMS * len(SYSTEMS)  # under the cap
        for row in table.rows:
            estimate = want[column][place[row.response_id]]
            assert row.raters == 3
            if table.categorical:
                assert row.label == estimate["label"]
                assert row.probability == pytest.approx(estimate["posterior"][estimate["label"]], abs=1e-9)
                assert row.score is None
            else:
                assert row.label is None and row.probability is None
                assert row.score == pytest.approx(estimate["score"]["value"], abs=1e-9)
    monkeypatch.setattr(quality_selectors, "POSTERIOR_ROWS_SHOWN", 5)
    html = client_for(researcher).get(reverse("campaign-progress", args=[campaign.pk])).content.decode()
    assert "Posterior labels (rater model)" in html
    shown = html[html.index('class="posterior-table" data-aspect="Factuality"') :]
    shown = shown[: shown.index("</table>")]
    assert f"5 of {ITEMS * len(SYSTEMS)} answers" in shown and shown.count("<tr data-response=") == 5
    first = tables[0].rows[0]
    assert f'<td class="probability">{first.probability:.3f}</td><td class="raters">3</td>' in shown
    assert reverse("campaign-posterior-labels-csv", args=[campaign.pk]) in html


def test_the_csv_holds_every_answer(rated, researcher):
    campaign, place = rated
    shown = {"factuality": "Factuality", "amount_info": "Amount Info"}
    want = {
        (shown[aspect], model): fitted(aspect, model, 3)
        for aspect, model in [("factuality", "dawid-skene"), ("factuality", "mace"), ("amount_info", "severity")]
    }
    response = client_for(researcher).get(reverse("campaign-posterior-labels-csv", args=[campaign.pk]))
    assert response.status_code == 200
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert len(rows) == 3 * ITEMS * len(SYSTEMS)
    for row in rows:
        estimate = want[(row["aspect"], row["model"])][place[int(row["response_id"])]]
        assert int(row["raters"]) == 3
        if row["model"] in ("dawid-skene", "mace"):
            assert float(row["posterior_label"]) == estimate["label"]
            assert float(row["probability"]) == pytest.approx(estimate["posterior"][estimate["label"]], abs=1e-4)
            assert row["expected_score"] == ""
        else:
            assert row["model"] == "severity" and row["posterior_label"] == ""
            assert float(row["expected_score"]) == pytest.approx(estimate["score"]["value"], abs=1e-4)


def test_too_few_raters_gives_no_posterior_table(researcher, annotator1):
    cache.clear()
    campaign = campaign_rated(researcher, [annotator1], [PLANS["exact"]])
    assert quality_panel(campaign).posteriors == []
    html = client_for(researcher).get(reverse("campaign-progress", args=[campaign.pk])).content.decode()
    assert "No aspect has a defined rater model yet, so there are no posterior labels." in html
    response = client_for(researcher).get(reverse("campaign-posterior-labels-csv", args=[campaign.pk]))
    assert response.content.decode().strip().splitlines() == [
        "aspect,model,item,turn,system,response_id,posterior_label,probability,expected_score,raters"
    ]


def test_the_fit_is_cached_until_the_ratings_change(rated, monkeypatch):
    campaign, _place = rated
    from judging.analysis import rater_model_reports

    first = quality_panel(campaign).posteriors

    def refuse(*args: object) -> None:
        raise AssertionError("refitted although nothing changed")

    monkeypatch.setattr(rater_model_reports, "_campaign_fits", refuse)
    assert quality_panel(campaign).posteriors == first

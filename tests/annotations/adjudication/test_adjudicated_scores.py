"""Raw or adjudicated human scores: agreement always reads the raw ratings; where a human score per answer is set
against judges, the adjudicated value replaces the mean of the raw ratings of that answer's aspect, and the page
says which one it uses.

Reference values are the arithmetic means of the ratings entered here, worked by hand: 0, 3 and 2 average 5/3."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

from annotations.adjudication.services import dispute_resolve
from annotations.models import Dispute
from annotations.roles import adjudicator_grant
from judging.analysis.reports import agreement_report, human_means, load_dataset_data
from judging.analysis.selectors import ALL_RATINGS
from tests.annotate.factories import disputed_campaign, make_dataset, rate_in_disagreement

pytestmark = pytest.mark.django_db


@pytest.fixture
def settled(researcher, annotators):  # type: ignore[no-untyped-def]
    """Two tasks of two answers; factuality 0, 3 and 2 from three raters; the first task settled at 3."""
    adjudicator = adjudicator_grant(user=User.objects.create_user("adjudicator1"))
    campaign = disputed_campaign(make_dataset(owner=researcher, items=2, systems=2), annotators, adjudicator)
    rate_in_disagreement(campaign, annotators)
    dispute = Dispute.objects.order_by("task__position").first()
    assert dispute is not None
    values = {(e["response_id"], e["aspect_id"]): "3" for e in dispute.spreads}
    dispute_resolve(dispute=dispute, adjudicator=adjudicator, values=values, reason="the claims check out")
    settled_ids = set(dispute.task.responses.values_list("pk", flat=True))
    return campaign, settled_ids


def factuality(data):  # type: ignore[no-untyped-def]
    return next(aspect for aspect in data.aspects if aspect.name == "factuality")


def test_raw_human_scores_are_the_means_of_the_ratings(settled) -> None:  # type: ignore[no-untyped-def]
    campaign, _ = settled
    data = load_dataset_data(campaign.dataset, ALL_RATINGS)
    assert np.allclose(human_means(data, factuality(data)), 5 / 3)


def test_adjudicated_human_scores_replace_the_mean_where_settled(settled) -> None:  # type: ignore[no-untyped-def]
    campaign, settled_ids = settled
    data = load_dataset_data(campaign.dataset, ALL_RATINGS.with_adjudicated(True))
    means = human_means(data, factuality(data))
    for row, response_id in enumerate(data.answers.response_ids.tolist()):
        assert means[row] == pytest.approx(3.0 if response_id in settled_ids else 5 / 3)
    amount = next(aspect for aspect in data.aspects if aspect.name == "amount_info")
    raw = load_dataset_data(campaign.dataset, ALL_RATINGS)
    assert np.array_equal(human_means(data, amount), human_means(raw, amount), equal_nan=True)  # not adjudicated


def test_agreement_stays_on_the_raw_ratings(settled) -> None:  # type: ignore[no-untyped-def]
    campaign, _ = settled
    raw = agreement_report(campaign.dataset, scope=ALL_RATINGS)
    adjudicated = agreement_report(campaign.dataset, scope=ALL_RATINGS.with_adjudicated(True))
    assert raw["aspects"] == adjudicated["aspects"]
    assert adjudicated["scope"]["human_score"] == "adjudicated" and raw["scope"]["human_score"] == "raw"


def test_judges_page_offers_the_choice_and_names_it(settled, researcher) -> None:  # type: ignore[no-untyped-def]
    campaign, _ = settled
    client = Client()
    client.force_login(researcher)
    url = reverse("dashboard-judges", args=[campaign.dataset.pk])
    raw = client.get(url).content.decode()
    assert "Human scores: the mean of the raw ratings." in raw and "human=adjudicated" in raw
    page = client.get(url, {"human": "adjudicated"})
    assert page.status_code == 200
    text = page.content.decode()
    assert "adjudicated human scores" in text and "Use raw human scores" in text
    assert client.get(url, {"human": "mean"}).status_code == 400


def test_stats_api_takes_the_human_score_choice(settled, researcher) -> None:  # type: ignore[no-untyped-def]
    campaign, _ = settled
    client = Client()
    client.force_login(researcher)
    url = reverse("api-stats-agreement", args=[campaign.dataset.pk])
    assert client.get(url).json()["scope"]["human_score"] == "raw"
    adjudicated = client.get(url, {"human": "adjudicated"})
    assert adjudicated.status_code == 200 and adjudicated.json()["scope"]["human_score"] == "adjudicated"
    refused = client.get(url, {"human": "mean"})
    assert refused.status_code == 400
    assert 'human must be one of raw, adjudicated, not "mean".' in refused.json()["human"]


def test_commands_take_the_human_score_choice(settled) -> None:  # type: ignore[no-untyped-def]
    campaign, _ = settled
    name = campaign.dataset.name
    for choice in ("raw", "adjudicated"):
        out = io.StringIO()
        call_command("agreement", name, "--human", choice, "--json", stdout=out)
        assert json.loads(out.getvalue())["scope"]["human_score"] == choice
    with pytest.raises(CommandError, match="invalid choice: 'mean'"):
        call_command("agreement", name, "--human", "mean")

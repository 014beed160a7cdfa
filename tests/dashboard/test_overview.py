"""The dataset overview: rubric, campaigns with their fill, judge runs with status and cost, and the links onward."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from annotations.campaigns.claims import assignment_claim
from annotations.models import Dataset
from judging.models import Judge, JudgeKind, JudgeRun, RunStatus
from tests.annotate.factories import make_campaign, make_dataset, submit_answer
from tests.conftest import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(researcher: User, annotator1: User, annotator2: User) -> dict:
    dataset = make_dataset("overview set", owner=researcher, items=2, systems=2)
    campaign = make_campaign(dataset, [annotator1, annotator2], name="pilot Ξ", raters_per_item=2)
    assert assignment_claim(campaign=campaign, user=annotator1) is not None
    judge = Judge.objects.create(dataset=dataset, name="geval <mini>", kind=JudgeKind.RUN, params={})
    run = JudgeRun.objects.create(
        judge=judge,
        dataset=dataset,
        config_snapshot={"name": "geval <mini>", "method": "single", "model": "openai/gpt-4o-mini"},
        method="single",
        status=RunStatus.FAILED,
        total=4,
        done=1,
        failed=3,
        parse_errors=2,
        cost_usd=0.0123,
    )
    return {"dataset": dataset, "campaign": campaign, "run": run}


def test_owner_sees_the_whole_loop_of_the_dataset(researcher: User, world: dict) -> None:
    dataset: Dataset = world["dataset"]
    response = client_for(researcher).get(reverse("dashboard-overview", args=[dataset.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    # rubric
    assert "Factuality" in html and "Amount Info" in html and "<code>NA</code>" in html
    # campaign with its fill: 2 items x 1 turn = 2 tasks x 2 raters = 4 slots, one leased, none submitted
    assert reverse("campaign-progress", args=[world["campaign"].pk]) in html
    assert "pilot Ξ" in html and "0 / 4 (0.0%)" in html
    assert f"{reverse('dashboard-dataset', args=[dataset.pk])}?campaign={world['campaign'].pk}" in html
    # judge run: status, counts, cost, a link to its run page and to its comparison with the humans
    assert reverse("research-judge-run", args=[world["run"].pk]) in html
    assert "geval &lt;mini&gt;" in html and "geval <mini>" not in html
    assert "1 / 4" in html and "2 parse errors" in html and "0.0123" in html
    assert "?judge=geval%20%3Cmini%3E" in html
    # onward links
    for name in (
        "dashboard-dataset",
        "dashboard-judges",
        "dashboard-calibrate",
        "research-judge-launch",
        "research-judge-runs",
    ):
        assert reverse(name, args=[dataset.pk]) in html


def test_the_menu_and_the_dataset_list_lead_to_the_overview(researcher: User, world: dict) -> None:
    html = client_for(researcher).get(reverse("dashboard-index")).content.decode()
    assert reverse("dashboard-overview", args=[world["dataset"].pk]) in html
    for name in ("dashboard-index", "research-home", "research-judges"):
        assert f'href="{reverse(name)}' in html
    # the admin is for the operators who run the site, not for researchers
    assert 'href="/admin/' not in html


def test_overview_access(researcher: User, annotator1: User, outsider: User, world: dict) -> None:
    url = reverse("dashboard-overview", args=[world["dataset"].pk])
    other = User.objects.create_user("other-researcher", password="x" * 20, is_staff=True)
    anonymous = client_for(None).get(url)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith(reverse("login"))
    assert client_for(annotator1).get(url).status_code == 403
    assert client_for(outsider).get(url).status_code == 403
    assert client_for(other).get(url).status_code == 404
    assert client_for(researcher).post(url).status_code == 405
    assert (
        client_for(researcher).get(reverse("dashboard-overview", args=[world["dataset"].pk + 999])).status_code == 404
    )


def test_overview_counts_ratings_of_the_app(researcher: User, annotator1: User, world: dict) -> None:
    from tests.annotate.factories import full_answer

    campaign = world["campaign"]
    slot = campaign.assignments.get(annotator=annotator1)
    before = client_for(researcher).get(reverse("dashboard-overview", args=[world["dataset"].pk])).content.decode()
    assert "imported and 0 app raters" in before
    submit_answer(campaign, slot, annotator1, "overview-1", full_answer(slot, annotator1))
    after = client_for(researcher).get(reverse("dashboard-overview", args=[world["dataset"].pk])).content.decode()
    # one app rater now, and one of the 4 slots submitted
    assert "imported and 1 app raters" in after and "1 / 4 (25.0%)" in after


def test_the_campaign_link_opens_the_campaign_builder_on_this_dataset(researcher: User, world: dict) -> None:
    dataset = world["dataset"]
    html = client_for(researcher).get(reverse("dashboard-overview", args=[dataset.pk])).content.decode()
    builder = f"{reverse('research-campaign-new')}?dataset={dataset.pk}"
    assert f'href="{builder}"' in html
    form = client_for(researcher).get(builder)
    assert form.status_code == 200 and form.context["dataset"] == dataset


def test_overview_offers_the_four_downloads(researcher: User, world: dict) -> None:
    dataset = world["dataset"]
    html = client_for(researcher).get(reverse("dashboard-overview", args=[dataset.pk])).content.decode()
    for kind in ("jsonl", "judges-jsonl", "flat-csv", "flat-jsonl"):
        assert reverse("dataset-export", args=[dataset.pk, kind]) in html
    home = client_for(researcher).get(reverse("home")).content.decode()
    assert reverse("dashboard-overview", args=[dataset.pk]) in home


def test_overview_speaks_japanese(researcher: User, world: dict) -> None:
    client = client_for(researcher)
    html = client.get(
        reverse("dashboard-overview", args=[world["dataset"].pk]), HTTP_ACCEPT_LANGUAGE="ja"
    ).content.decode()
    for text in ("概要", "ルーブリック", "アノテーションキャンペーン", "ジャッジ実行", "2 件の解析エラー", "ヘルプ"):
        assert text in html, text
    for english in ("Rubric", "Judge runs", "parse errors", "Launch a judge run"):
        assert english not in html, english

"""The progress page counts regular tasks only and shows gold tasks apart."""

import pytest
from django.urls import reverse

from annotations.campaigns.progress import campaign_progress
from annotations.models import GoldItem, Item
from tests.annotate.factories import make_campaign, make_dataset
from tests.annotate.test_gold_serving import work_through

pytestmark = pytest.mark.django_db


def test_progress_counts_regular_tasks_and_shows_gold_apart(client, researcher, annotator1, annotator2):
    dataset = make_dataset(owner=researcher, items=6, systems=2)
    for item in Item.objects.filter(dataset=dataset).order_by("position")[:2]:
        GoldItem.objects.create(item=item, expected={"sys_alpha": {"factuality": 1}})
    campaign = make_campaign(dataset, [annotator1, annotator2], raters_per_item=2, gold_rate=0.5)
    handed = work_through(campaign, annotator1) + work_through(campaign, annotator2)
    gold_answers = sum(handed)
    assert gold_answers >= 2  # rate 0.5 over 4 regular tasks each: at least one gold task per annotator
    progress = campaign_progress(campaign)
    assert (progress.tasks_total, progress.tasks_complete, progress.ratings_submitted, progress.slots_total) == (
        4,
        4,
        8,
        8,
    )
    assert (progress.gold_tasks, progress.gold_answers) == (2, gold_answers)
    client.force_login(researcher)
    response = client.get(reverse("campaign-progress", args=[campaign.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert "4 of 4 tasks complete; 8 of 8 rater slots filled" in html
    assert f"Gold items and attention checks: 2 tasks, {gold_answers} answers collected" in html
    assert html.count("<progress max=") == 4  # the task table lists the regular tasks only


def test_progress_without_gold_says_nothing_about_it(client, researcher, annotator1):
    campaign = make_campaign(make_dataset(owner=researcher, items=2, systems=2), [annotator1])
    client.force_login(researcher)
    html = client.get(reverse("campaign-progress", args=[campaign.pk])).content.decode()
    assert "gold-progress" not in html

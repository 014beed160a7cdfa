"""A campaign's settings page in the research area: what the admin's campaign form may change, through the same
form and service; the dataset and the task shape shown fixed with the reason; success, wrong method, no access."""

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from annotations.models import AssignmentStatus
from tests.annotate.factories import make_campaign, make_dataset
from tests.conftest import client_for

pytestmark = pytest.mark.django_db


def settings_post(campaign, **overrides):  # type: ignore[no-untyped-def]
    data = {
        "name": campaign.name,
        "is_active": "on",
        "aspects": [a.pk for a in campaign.aspects.all()],
        "guidelines": campaign.guidelines,
        "lease_minutes": campaign.lease_minutes,
        "gold_rate": campaign.gold_rate,
        "ask_preference": "on",
        "rationale_required": "on",
        "annotators": [u.pk for u in campaign.annotators.all()],
    }
    data.update(overrides)
    return data


def test_settings_change_through_the_campaign_service(researcher: User, annotators: list[User]) -> None:
    dataset = make_dataset(owner=researcher, items=2)
    campaign = make_campaign(dataset, annotators, name="first name")
    url = reverse("research-campaign-settings", args=[campaign.pk])
    page = client_for(researcher).get(url)
    text = page.content.decode()
    assert page.status_code == 200 and "first name" in text and "tasks and rater slots were built" in text
    assert 'name="raters_per_item"' not in text and 'name="dataset"' not in text  # shown fixed, not as inputs
    assert "/admin/" not in text
    saved = client_for(researcher).post(url, settings_post(campaign, name="renamed", lease_minutes=45))
    assert saved.status_code == 302 and saved["Location"] == url
    campaign.refresh_from_db()
    assert campaign.name == "renamed" and campaign.lease_minutes == 45 and campaign.raters_per_item == 2
    # The campaign settings' own check names the problem; nothing changes.
    refused = client_for(researcher).post(url, settings_post(campaign, lease_minutes=0))
    assert refused.status_code == 400
    campaign.refresh_from_db()
    assert campaign.lease_minutes == 45
    # A posted value for a fixed field is ignored.
    client_for(researcher).post(url, settings_post(campaign, raters_per_item=9))
    campaign.refresh_from_db()
    assert campaign.raters_per_item == 2


def test_the_reason_names_the_ratings_once_there_are_some(researcher: User, annotators: list[User]) -> None:
    campaign = make_campaign(make_dataset(owner=researcher, items=1), annotators)
    url = reverse("research-campaign-settings", args=[campaign.pk])
    assert "ratings have been submitted" not in client_for(researcher).get(url).content.decode()
    slot = campaign.assignments.first()
    campaign.assignments.filter(pk=slot.pk).update(
        annotator=annotators[0], status=AssignmentStatus.SUBMITTED, submitted_at=timezone.now()
    )
    assert "ratings have been submitted" in client_for(researcher).get(url).content.decode()


def test_settings_access(researcher: User, annotators: list[User], annotator1: User) -> None:
    campaign = make_campaign(make_dataset(owner=researcher, items=1), annotators)
    url = reverse("research-campaign-settings", args=[campaign.pk])
    other = User.objects.create_user("other-researcher", password="x" * 20, is_staff=True)
    assert client_for(researcher).put(url).status_code == 405
    assert client_for(None).get(url).status_code == 302
    assert client_for(annotator1).get(url).status_code == 403
    assert client_for(other).get(url).status_code == 404
    assert client_for(other).post(url, settings_post(campaign, name="taken")).status_code == 404
    assert client_for(researcher, csrf=True).post(url, settings_post(campaign, name="taken")).status_code == 403
    campaign.refresh_from_db()
    assert campaign.name != "taken"
    # The progress page and the research home lead here, not to the admin.
    progress = client_for(researcher).get(reverse("campaign-progress", args=[campaign.pk])).content.decode()
    assert url in progress and "/admin/" not in progress

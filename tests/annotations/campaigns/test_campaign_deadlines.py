"""Campaign deadlines seen from the pages: the settings page edits them (success, wrong method, no access, bad
input), the annotator is told when the campaign opens or closed instead of being handed a task, and a crowd link
refuses newcomers outside the window. The claim rule itself is tested in test_slots.py on every database path."""

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotations.campaigns.errors import CampaignError
from annotations.campaigns.setup import campaign_update
from annotations.models import Assignment, AssignmentStatus, Campaign
from annotations.recruitment.models import Platform
from annotations.recruitment.services import link_create
from tests.annotate.factories import make_campaign, make_dataset
from tests.annotations.campaigns.test_research_campaign_settings import client_for, settings_post

pytestmark = pytest.mark.django_db


def minute(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M")


def set_window(campaign: Campaign, *, opens_at: datetime | None = None, closes_at: datetime | None = None) -> None:
    Campaign.objects.filter(pk=campaign.pk).update(opens_at=opens_at, closes_at=closes_at)
    campaign.refresh_from_db()


def test_the_settings_page_saves_the_deadlines_in_utc(researcher: User, annotators: list[User]) -> None:
    campaign = make_campaign(make_dataset(owner=researcher, items=2), annotators)
    url = reverse("research-campaign-settings", args=[campaign.pk])
    page = client_for(researcher).get(url).content.decode()
    assert 'type="datetime-local"' in page and 'name="opens_at"' in page and "Closes at (UTC)" in page
    opens = (timezone.now() + timedelta(days=1)).replace(second=0, microsecond=0)
    closes = opens + timedelta(days=7)
    saved = client_for(researcher).post(url, settings_post(campaign, opens_at=minute(opens), closes_at=minute(closes)))
    assert saved.status_code == 302
    campaign.refresh_from_db()
    assert (campaign.opens_at, campaign.closes_at) == (opens, closes)
    shown = client_for(researcher).get(url).content.decode()
    assert f'value="{minute(opens)}"' in shown and "This campaign opens at" in shown and "(UTC)" in shown
    # Emptied, both limits go.
    client_for(researcher).post(url, settings_post(campaign, opens_at="", closes_at=""))
    campaign.refresh_from_db()
    assert campaign.opens_at is None and campaign.closes_at is None


@pytest.mark.parametrize(
    ("opens_in", "closes_in", "problem"),
    [
        (timedelta(days=2), timedelta(days=1), "The closing time must be after the opening time."),
        (None, -timedelta(days=1), "is in the past"),
        (None, "31/12/2026", "Enter a valid date/time."),
    ],
)
def test_bad_deadlines_are_refused_with_the_problem_named(researcher, annotators, opens_in, closes_in, problem):  # type: ignore[no-untyped-def]
    campaign = make_campaign(make_dataset(owner=researcher, items=1), annotators, name="kept")
    url = reverse("research-campaign-settings", args=[campaign.pk])
    now = timezone.now()
    data = settings_post(
        campaign,
        name="changed",
        opens_at=minute(now + opens_in) if opens_in else "",
        closes_at=closes_in if isinstance(closes_in, str) else minute(now + closes_in),
    )
    refused = client_for(researcher).post(url, data)
    assert refused.status_code == 400 and problem in refused.content.decode()
    assert "Constraint" not in refused.content.decode()  # said once, in words, not again as the database's rule
    campaign.refresh_from_db()
    assert campaign.name == "kept" and campaign.opens_at is None and campaign.closes_at is None  # nothing half-saved


def test_a_closing_time_already_past_is_kept_when_other_settings_change(researcher, annotators):  # type: ignore[no-untyped-def]
    campaign = make_campaign(make_dataset(owner=researcher, items=1), annotators)
    closed = timezone.now() - timedelta(days=1)
    set_window(campaign, closes_at=closed)
    campaign_update(campaign=campaign, name="renamed", annotators=annotators, lease_minutes=40, closes_at=closed)
    campaign.refresh_from_db()
    assert campaign.name == "renamed" and campaign.closes_at == closed
    with pytest.raises(CampaignError, match="in the past"):
        campaign_update(campaign=campaign, name="renamed", annotators=annotators, closes_at=closed + timedelta(hours=1))


def test_deadline_settings_wrong_method_and_no_access(researcher, annotators, annotator1):  # type: ignore[no-untyped-def]
    campaign = make_campaign(make_dataset(owner=researcher, items=1), annotators)
    url = reverse("research-campaign-settings", args=[campaign.pk])
    closes = minute(timezone.now() + timedelta(days=3))
    assert client_for(researcher).delete(url).status_code == 405
    assert client_for(annotator1).post(url, settings_post(campaign, closes_at=closes)).status_code == 403
    other = User.objects.create_user("someone-else", password="x" * 20, is_staff=True)
    assert client_for(other).post(url, settings_post(campaign, closes_at=closes)).status_code == 404
    campaign.refresh_from_db()
    assert campaign.closes_at is None


def test_the_annotator_is_told_when_the_campaign_opens_and_gets_no_task(researcher, annotator1):  # type: ignore[no-untyped-def]
    campaign = make_campaign(make_dataset(owner=researcher, items=2), [annotator1], raters_per_item=1)
    set_window(campaign, opens_at=datetime(2099, 1, 2, 9, 30, tzinfo=UTC))
    client = client_for(annotator1)
    page = client.get(reverse("annotate-campaign", args=[campaign.pk])).content.decode()
    assert "This campaign opens at 2099-01-02 09:30 (UTC)." in page and "Nothing left for you" not in page
    answer = client.post(reverse("annotate-next", args=[campaign.pk]), follow=True)
    assert answer.status_code == 200 and "This campaign opens at 2099-01-02 09:30 (UTC)." in answer.content.decode()
    assert not Assignment.objects.filter(annotator=annotator1).exists()
    japanese = client.get(reverse("annotate-campaign", args=[campaign.pk]), HTTP_ACCEPT_LANGUAGE="ja")
    assert "2099-01-02 09:30" in japanese.content.decode() and "This campaign opens" not in japanese.content.decode()


def test_after_the_close_the_annotator_finishes_the_open_task_then_is_told_it_closed(researcher, annotator1):  # type: ignore[no-untyped-def]
    campaign = make_campaign(make_dataset(owner=researcher, items=3), [annotator1], raters_per_item=1)
    client = client_for(annotator1)
    client.post(reverse("annotate-next", args=[campaign.pk]))
    held = Assignment.objects.get(annotator=annotator1, status=AssignmentStatus.LEASED)
    closed = timezone.now() - timedelta(seconds=1)
    set_window(campaign, closes_at=closed)
    resumed = client.post(reverse("annotate-next", args=[campaign.pk]))
    # The open lease, still running, is resumed.
    assert resumed["Location"] == reverse("annotate-task", args=[campaign.pk, held.task_id])
    Assignment.objects.filter(pk=held.pk).update(status=AssignmentStatus.SUBMITTED, submitted_at=timezone.now())
    answer = client.post(reverse("annotate-next", args=[campaign.pk]), follow=True)
    assert "This campaign closed at" in answer.content.decode()
    assert Assignment.objects.filter(annotator=annotator1).count() == 1


def test_a_crowd_link_refuses_newcomers_outside_the_window(researcher, annotator1):  # type: ignore[no-untyped-def]
    cache.clear()
    campaign = make_campaign(make_dataset(owner=researcher, items=2), [annotator1], name="Crowd study")
    link = link_create(campaign=campaign, platform=Platform.INVITE, created_by=researcher, completion_code="LAB")
    url = reverse("crowd-entry", args=[link.token])
    set_window(campaign, closes_at=datetime(2020, 5, 6, 7, 8, tzinfo=UTC))
    closed = Client().get(url)
    assert closed.status_code == 410 and "This study closed at 2020-05-06 07:08 (UTC)." in closed.content.decode()
    set_window(campaign, opens_at=datetime(2099, 5, 6, 7, 8, tzinfo=UTC))
    early = Client().get(url)
    assert early.status_code == 403 and "This study opens at 2099-05-06 07:08 (UTC)." in early.content.decode()
    assert not User.objects.filter(username__startswith="crowd").exists()


def test_the_progress_page_and_the_research_list_show_the_window(researcher, annotators):  # type: ignore[no-untyped-def]
    campaign = make_campaign(make_dataset(owner=researcher, items=1), annotators, name="windowed")
    set_window(campaign, closes_at=datetime(2099, 3, 4, 5, 6, tzinfo=UTC))
    progress = client_for(researcher).get(reverse("campaign-progress", args=[campaign.pk])).content.decode()
    assert "Open until 2099-03-04 05:06 (UTC)." in progress
    set_window(campaign, closes_at=datetime(2020, 3, 4, 5, 6, tzinfo=UTC))
    home = client_for(researcher).get(reverse("research-home")).content.decode()
    assert "This campaign closed at 2020-03-04 05:06 (UTC)." in home


def test_the_campaign_builder_sets_the_deadlines_or_names_the_problem(researcher, annotator1):  # type: ignore[no-untyped-def]
    from tests.annotate.test_research_area import builder_post

    dataset = make_dataset(owner=researcher, items=2, systems=2)
    client = client_for(researcher)
    url = reverse("research-campaign-new")
    page = client.get(url, {"dataset": dataset.pk}).content.decode()
    assert 'name="opens_at"' in page and 'type="datetime-local"' in page
    backwards = builder_post(dataset, annotator1, opens_at="2099-02-01T00:00", closes_at="2099-01-01T00:00")
    refused = client.post(url, backwards)
    assert (
        refused.status_code in (200, 400)
        and "The closing time must be after the opening time." in refused.content.decode()
    )
    assert not Campaign.objects.filter(name="pilot").exists()
    client.post(url, builder_post(dataset, annotator1, opens_at="2099-01-01T00:00", closes_at="2099-02-01T00:00"))
    created = Campaign.objects.get(name="pilot")
    assert created.opens_at == datetime(2099, 1, 1, tzinfo=UTC) and created.closes_at == datetime(
        2099, 2, 1, tzinfo=UTC
    )

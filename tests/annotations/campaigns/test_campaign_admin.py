"""Researchers run campaigns from the admin: adding builds the tasks, the pool edit revokes leases, scope holds."""

import pytest
from django.test import Client
from django.urls import reverse

from annotations.campaigns.claims import assignment_claim
from annotations.models import Assignment, AssignmentStatus, Campaign
from tests.annotate.factories import make_campaign, make_dataset
from tests.conftest import CAST_PASSWORD

pytestmark = pytest.mark.django_db


def admin_client(user) -> Client:  # type: ignore[no-untyped-def]
    user.is_superuser = True  # model permissions; the querysets still scope by dataset ownership
    user.save()
    client = Client()
    assert client.login(username=user.username, password=CAST_PASSWORD)
    return client


def form_data(dataset, annotators, **extra) -> dict:  # type: ignore[no-untyped-def]
    data = {
        "name": "Admin campaign",
        "dataset": dataset.pk,
        "is_active": "on",
        "raters_per_item": "2",
        "candidates_per_task": "",
        "guidelines": "Rate carefully.",
        "show_context": "on",
        "ask_preference": "on",
        "rationale_required": "on",
        "lease_minutes": "30",
        "annotators": [a.pk for a in annotators],
    }
    data.update(extra)
    return data


def test_adding_a_campaign_in_the_admin_builds_tasks(researcher, annotator1, annotator2):
    dataset = make_dataset(owner=researcher, items=3)
    client = admin_client(researcher)
    response = client.post(reverse("admin:annotations_campaign_add"), form_data(dataset, [annotator1, annotator2]))
    assert response.status_code == 302, response.content.decode()[:2000]
    campaign = Campaign.objects.get(name="Admin campaign")
    assert campaign.tasks.count() == 3 and Assignment.objects.filter(campaign=campaign).count() == 6
    assert campaign.aspects.count() == 2 and campaign.created_by == researcher and campaign.shuffle_seed
    change = client.get(reverse("admin:annotations_campaign_change", args=[campaign.pk]))
    assert (
        change.status_code == 200
        and reverse("campaign-progress", args=[campaign.pk])
        in client.get(reverse("admin:annotations_campaign_changelist")).content.decode()
    )


def test_admin_refuses_aspects_of_another_dataset(researcher, annotator1):
    dataset = make_dataset(owner=researcher, items=1)
    other = make_dataset("other", owner=researcher, items=1)
    foreign = other.aspects.first()
    client = admin_client(researcher)
    response = client.post(
        reverse("admin:annotations_campaign_add"), form_data(dataset, [annotator1], aspects=[foreign.pk])
    )
    assert response.status_code == 200 and "not aspects of" in response.content.decode()
    assert not Campaign.objects.exists()


def test_removing_from_the_pool_in_the_admin_releases_the_lease(researcher, annotator1, annotator2):
    campaign = make_campaign(make_dataset(owner=researcher, items=1), [annotator1, annotator2], raters_per_item=1)
    lease = assignment_claim(campaign=campaign, user=annotator1)
    client = admin_client(researcher)
    data = form_data(campaign.dataset, [annotator2], name=campaign.name)
    data["aspects"] = list(campaign.aspects.values_list("pk", flat=True))
    response = client.post(reverse("admin:annotations_campaign_change", args=[campaign.pk]), data)
    assert response.status_code == 302
    lease.refresh_from_db()
    assert lease.status == AssignmentStatus.FREE and lease.annotator is None
    assert campaign.raters_per_item == Campaign.objects.get(pk=campaign.pk).raters_per_item  # fixed after creation


def test_admin_hides_campaigns_of_other_researchers(researcher, annotator1, django_user_model):
    from django.contrib.auth.models import Permission

    campaign = make_campaign(make_dataset(owner=researcher, items=1), [annotator1], name="Secret Campaign Zeta")
    stranger = django_user_model.objects.create_user("stranger", password=CAST_PASSWORD, is_staff=True)
    stranger.user_permissions.add(*Permission.objects.filter(codename__in=["view_campaign", "change_campaign"]))
    client = Client()
    client.login(username="stranger", password=CAST_PASSWORD)
    listing = client.get(reverse("admin:annotations_campaign_changelist"))
    assert listing.status_code == 200 and "Secret Campaign Zeta" not in listing.content.decode()
    assert client.get(reverse("admin:annotations_campaign_change", args=[campaign.pk])).status_code == 302

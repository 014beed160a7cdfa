"""Every number a researcher types into the research area has a documented range that fits its column: the
campaign builder, the crowd link settings and the create_campaign command refuse a value outside it with a message
naming the field, and write nothing. A probe found lease_minutes of 2^31 and candidates_per_task of 32768 answered
500 ("integer out of range", "smallint out of range")."""

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotations.campaigns.settings import MAX_CANDIDATES_PER_TASK, MAX_LEASE_MINUTES, MAX_RATERS_PER_ITEM
from annotations.models import Campaign, RecruitmentLink
from annotations.recruitment.models import MAX_QUOTA
from tests.annotate.factories import make_campaign, make_dataset
from tests.annotate.test_research_area import builder_post, signed_in

pytestmark = pytest.mark.django_db

BEYOND_COLUMNS = {
    "lease_minutes": [str(2**31), str(MAX_LEASE_MINUTES + 1), "9" * 400],
    "candidates_per_task": ["32768", str(MAX_CANDIDATES_PER_TASK + 1)],
    "raters_per_item": ["32768", str(MAX_RATERS_PER_ITEM + 1)],
    "tasks_per_session": [str(2**31), str(MAX_QUOTA + 1)],
    "tasks_per_worker": [str(2**31)],
}


@pytest.mark.parametrize(
    ("field", "value"), [(field, value) for field, values in BEYOND_COLUMNS.items() for value in values]
)
def test_the_builder_refuses_a_number_beyond_its_range(researcher: User, annotator1: User, field: str, value: str):
    dataset = make_dataset(owner=researcher, items=2, systems=2)
    body = builder_post(dataset, annotator1, create="1", crowd_platform="prolific", **{field: value})
    response = signed_in(researcher).post(reverse("research-campaign-new"), body)
    assert response.status_code == 400
    assert "less than or equal to" in response.content.decode()
    assert not Campaign.objects.filter(name="pilot").exists() and not RecruitmentLink.objects.exists()


def test_the_builder_accepts_the_largest_values(researcher: User, annotator1: User):
    dataset = make_dataset(owner=researcher, items=2, systems=2)
    top = {
        "lease_minutes": str(MAX_LEASE_MINUTES),
        "candidates_per_task": str(MAX_CANDIDATES_PER_TASK),
        "tasks_per_session": str(MAX_QUOTA),
    }
    body = builder_post(dataset, annotator1, create="1", crowd_platform="prolific", **top)
    response = signed_in(researcher).post(reverse("research-campaign-new"), body)
    assert response.status_code == 302, response.content.decode()[:2000]
    campaign = Campaign.objects.get(name="pilot")
    assert (campaign.lease_minutes, campaign.candidates_per_task) == (MAX_LEASE_MINUTES, MAX_CANDIDATES_PER_TASK)


@pytest.mark.parametrize(
    "field", ["tasks_per_session", "tasks_per_worker", "min_tasks_to_complete", "skips_per_session"]
)
def test_the_link_settings_refuse_a_quota_beyond_the_column(researcher: User, annotator1: User, field: str):
    campaign = make_campaign(make_dataset(owner=researcher, items=2, systems=2), [annotator1])
    client = signed_in(researcher)
    response = client.post(
        reverse("crowd-link-create", args=[campaign.pk]), {"platform": "prolific", field: str(2**31)}, follow=True
    )
    assert response.status_code == 200
    assert "less than or equal to 100000" in response.content.decode()
    assert not RecruitmentLink.objects.exists()


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--lease-minutes", str(2**31), f"between 1 and {MAX_LEASE_MINUTES}"),
        ("--lease-minutes", "0", f"between 1 and {MAX_LEASE_MINUTES}"),
        ("--candidates-per-task", "32768", f"between 1 and {MAX_CANDIDATES_PER_TASK}"),
        ("--raters-per-item", "32768", f"between 1 and {MAX_RATERS_PER_ITEM}"),
    ],
)
def test_the_command_refuses_a_number_beyond_its_range(researcher: User, option: str, value: str, message: str):
    make_dataset("cmd set", owner=researcher, items=2)
    with pytest.raises(CommandError, match=message):
        call_command("create_campaign", "bounded", "--dataset", "cmd set", option, value)
    assert not Campaign.objects.exists()

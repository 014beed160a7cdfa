"""Admin user pickers offer a researcher only their own pool (docs/security.md): the annotators and researchers
they already work with, or share a group with. Superusers see every account. A forged id from outside the pool
is refused like any invalid choice, and nothing is written."""

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import reverse

from annotations.campaigns.setup import campaign_create
from annotations.models import Campaign
from annotations.roles import researcher_grant
from tests.judging.factories import make_dataset

pytestmark = pytest.mark.django_db


@pytest.fixture
def researcher_b(db: None) -> User:
    return User.objects.create_user("researcher-b", password="x-password-123", is_staff=True)


@pytest.fixture
def world(researcher: User, researcher_b: User, annotator1: User, annotator2: User, annotator3: User) -> dict:
    """A works with annotator1 (a campaign on A's dataset); B shares a group with annotator2; annotator3 is
    nobody's yet."""
    dataset_a = make_dataset(owner=researcher, items=1, name="a-data")
    campaign_create(name="a-pilot", dataset=dataset_a, raters_per_item=1, annotators=[annotator1])
    dataset_b = make_dataset(owner=researcher_b, items=1, name="b-data")
    # Both are researchers the usual way: the role group holds every researcher, and must not make them one pool.
    for user in (researcher, researcher_b):
        researcher_grant(user=user)
    lab = Group.objects.create(name="lab-b")
    lab.user_set.add(researcher_b, annotator2)
    return {"dataset_a": dataset_a, "dataset_b": dataset_b}


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _offered(user: User, url: str, field: str) -> set[str]:
    response = _client(user).get(url)
    assert response.status_code == 200
    queryset = response.context["adminform"].form.fields[field].queryset
    return set(queryset.values_list("username", flat=True))


def test_campaign_annotator_picker_shows_only_the_researchers_pool(  # type: ignore[no-untyped-def]
    world, researcher: User, researcher_b: User
) -> None:
    url = reverse("admin:annotations_campaign_add")
    assert _offered(researcher, url, "annotators") == {"annotator1"}
    assert _offered(researcher_b, url, "annotators") == {"annotator2"}
    root = User.objects.create_superuser("root", password="x-password-123")
    assert _offered(root, url, "annotators") >= {"annotator1", "annotator2", "annotator3"}
    page = _client(researcher_b).get(url).content.decode()
    assert "annotator1" not in page and "annotator3" not in page


def test_a_forged_annotator_id_from_another_pool_is_refused(  # type: ignore[no-untyped-def]
    world, researcher_b: User, annotator1: User
) -> None:
    response = _client(researcher_b).post(
        reverse("admin:annotations_campaign_add"),
        {
            "name": "b-forged",
            "dataset": world["dataset_b"].pk,
            "is_active": "on",
            "raters_per_item": 1,
            "lease_minutes": 30,
            "annotators": [annotator1.pk],
        },
    )
    assert response.status_code == 200
    assert "annotators" in response.context["adminform"].form.errors
    assert not Campaign.objects.filter(name="b-forged").exists()


def test_dataset_member_picker_shows_only_the_researchers_pool(  # type: ignore[no-untyped-def]
    world, researcher: User, researcher_b: User
) -> None:
    assert _offered(
        researcher_b, reverse("admin:annotations_dataset_change", args=[world["dataset_b"].pk]), "members"
    ) == {"researcher-b"}
    assert "researcher" not in _offered(
        researcher_b, reverse("admin:annotations_dataset_change", args=[world["dataset_b"].pk]), "members"
    )
    world["dataset_a"].members.add(researcher_b)
    # Sharing makes them colleagues: each now sees the other.
    assert _offered(
        researcher_b, reverse("admin:annotations_dataset_change", args=[world["dataset_b"].pk]), "members"
    ) == {
        "researcher",
        "researcher-b",
    }


def test_a_forged_member_id_is_refused(world, researcher: User, researcher_b: User) -> None:  # type: ignore[no-untyped-def]
    dataset = world["dataset_b"]
    response = _client(researcher_b).post(
        reverse("admin:annotations_dataset_change", args=[dataset.pk]),
        {"name": dataset.name, "members": [researcher.pk]},
    )
    assert response.status_code == 200
    assert "members" in response.context["adminform"].form.errors
    assert not dataset.members.exists()

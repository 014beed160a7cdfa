"""The writes the admin keeps go through services that refuse what the importer or campaign_create would refuse."""

import pytest
from django.contrib.auth.models import User

from annotations.campaigns.errors import CampaignError
from annotations.campaigns.setup import campaign_update
from annotations.datasets.editing import dataset_delete, dataset_update
from annotations.errors import DatasetEditError
from annotations.models import Campaign, Dataset
from tests.annotate.factories import make_campaign, make_dataset

pytestmark = pytest.mark.django_db


@pytest.fixture
def colleague(db: None) -> User:
    return User.objects.create_user(username="colleague", is_staff=True)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "1 to 200"),
        ("x" * 201, "1 to 200"),
        ("a\x00b", "NUL"),
        ("a\ud800b", "surrogate"),
        ("other", "already has another"),
    ],
)
def test_dataset_update_refuses_names_the_importer_refuses(researcher: User, name: str, message: str) -> None:
    dataset = make_dataset(owner=researcher, items=1)
    make_dataset("other", owner=researcher, items=1)
    with pytest.raises(DatasetEditError, match=message):
        dataset_update(dataset=dataset, name=name, owner=researcher, members=[])
    dataset.refresh_from_db()
    assert dataset.name == "lfqa"


def test_dataset_update_shares_only_with_researchers(researcher: User, colleague: User, annotator1: User) -> None:
    dataset = make_dataset(owner=researcher, items=1)
    with pytest.raises(DatasetEditError, match="annotator1"):
        dataset_update(dataset=dataset, name="lfqa", owner=researcher, members=[colleague, annotator1])
    with pytest.raises(DatasetEditError, match="annotator1"):
        dataset_update(dataset=dataset, name="lfqa", owner=annotator1, members=[])
    assert not dataset.members.exists()
    dataset_update(dataset=dataset, name="renamed", owner=researcher, members=[colleague])
    dataset.refresh_from_db()
    assert dataset.name == "renamed" and list(dataset.members.all()) == [colleague]


def test_dataset_delete_takes_everything_under_it(researcher: User, annotator1: User) -> None:
    dataset = make_dataset(owner=researcher, items=2)
    make_campaign(dataset, [annotator1])
    kept = make_dataset("kept", owner=researcher, items=1)
    dataset_delete(dataset=dataset)
    assert list(Dataset.objects.all()) == [kept] and not Campaign.objects.exists()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"name": ""}, "name"),
        ({"name": "a\x00b"}, "NUL"),
        ({"guidelines": "a\x00b"}, "NUL"),
        ({"lease_minutes": 0}, "minutes to finish a task must be between 1 and 10080"),
        ({"name": "taken"}, "already has a campaign named"),
    ],
)
def test_campaign_update_refuses_what_campaign_create_refuses(
    researcher: User, annotator1: User, change: dict, message: str
) -> None:
    dataset = make_dataset(owner=researcher, items=1)
    campaign = make_campaign(dataset, [annotator1])
    make_campaign(dataset, [annotator1], name="taken")
    settings = {"name": campaign.name, "annotators": [annotator1], "guidelines": "", "lease_minutes": 30, **change}
    with pytest.raises(CampaignError, match=message):
        campaign_update(campaign=campaign, **settings)
    stored = Campaign.objects.get(pk=campaign.pk)
    assert (stored.name, stored.guidelines, stored.lease_minutes) == ("campaign", campaign.guidelines, 30)


def test_campaign_update_refuses_aspects_of_another_dataset(researcher: User, annotator1: User) -> None:
    campaign = make_campaign(make_dataset(owner=researcher, items=1), [annotator1])
    foreign = make_dataset("other", owner=researcher, items=1).aspects.first()
    assert foreign is not None
    with pytest.raises(CampaignError, match="another dataset"):
        campaign_update(campaign=campaign, name=campaign.name, annotators=[annotator1], aspects=[foreign])
    assert set(campaign.aspects.all()) == set(campaign.dataset.aspects.all())

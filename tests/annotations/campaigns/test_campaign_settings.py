"""A campaign's settings are one typed value: its list of names is the one the services, the annotator pages' read,
the research builder and the admin use, its defaults are the model's, and it refuses what cannot be stored."""

import math
from typing import Any

import pytest

from annotations.campaigns.errors import CampaignError
from annotations.campaigns.selectors import CAMPAIGN_COLUMNS
from annotations.campaigns.settings import SETTING_NAMES, CampaignSettings, CampaignSettingsError
from annotations.campaigns.setup import campaign_create, campaign_update
from annotations.models import Campaign
from annotations.research.forms import CampaignBuilderForm
from tests.annotate.factories import make_dataset


def test_every_setting_is_a_campaign_column_with_the_same_default() -> None:
    defaults = CampaignSettings().as_options()
    assert tuple(defaults) == SETTING_NAMES
    for name, default in defaults.items():
        assert Campaign._meta.get_field(name).get_default() == default, name
    assert set(SETTING_NAMES) <= set(CAMPAIGN_COLUMNS)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"colour": "red"}, "unknown campaign options: colour"),
        ({"lease_minutes": 0}, "the minutes to finish a task must be between 1 and 10080"),
        ({"lease_minutes": 10081}, "the minutes to finish a task must be between 1 and 10080"),
        ({"lease_minutes": True}, "lease_minutes must be a int, not True"),
        ({"lease_minutes": "30"}, "lease_minutes must be a int, not '30'"),
        ({"gold_rate": 0.6}, "the gold rate must be between 0 and 0.5"),
        ({"gold_rate": math.nan}, "the gold rate must be between 0 and 0.5"),
        ({"guidelines": "a\x00b"}, "text with a NUL character cannot be stored"),
        ({"guidelines": "a\ud800b"}, "text with an unpaired surrogate cannot be stored"),
        ({"show_reference": "yes"}, "show_reference must be a bool, not 'yes'"),
    ],
)
def test_the_type_refuses_what_cannot_be_stored(options, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(CampaignSettingsError) as refused:
        CampaignSettings.from_options(options)
    assert str(refused.value) == message


@pytest.mark.django_db
def test_services_refuse_through_the_type_and_write_nothing(researcher) -> None:  # type: ignore[no-untyped-def]
    dataset = make_dataset(owner=researcher, items=1, systems=2)
    with pytest.raises(CampaignError, match=r"the gold rate must be between 0 and 0\.5"):
        campaign_create(name="c", dataset=dataset, gold_rate=0.9)
    assert not Campaign.objects.exists()
    campaign = campaign_create(name="c", dataset=dataset, gold_rate=0.25, lease_minutes=45)
    with pytest.raises(CampaignError, match="lease_minutes must be a int"):
        campaign_update(campaign=campaign, name="c", annotators=[], lease_minutes=1.5)
    campaign.refresh_from_db()
    assert (campaign.gold_rate, campaign.lease_minutes) == (0.25, 45)


@pytest.mark.django_db
@pytest.mark.parametrize("field", ["name", "guidelines"])
def test_a_lone_surrogate_in_a_campaign_is_refused_and_nothing_is_written(researcher, field) -> None:  # type: ignore[no-untyped-def]
    dataset = make_dataset(owner=researcher, items=1, systems=2)
    texts: dict[str, Any] = {"name": "c", "guidelines": "read me", field: "guide \udfff"}
    with pytest.raises(CampaignError, match=r"^text with an unpaired surrogate cannot be stored$"):
        campaign_create(dataset=dataset, **texts)
    assert not Campaign.objects.exists()
    campaign = campaign_create(name="c", dataset=dataset, guidelines="read me")
    with pytest.raises(CampaignError, match=r"^text with an unpaired surrogate cannot be stored$"):
        campaign_update(campaign=campaign, annotators=[], **texts)
    campaign.refresh_from_db()
    assert (campaign.name, campaign.guidelines) == ("c", "read me")


@pytest.mark.django_db
def test_the_builder_asks_for_every_setting_but_the_active_switch(researcher) -> None:  # type: ignore[no-untyped-def]
    form = CampaignBuilderForm(dataset=make_dataset(owner=researcher, items=1, systems=2), user=researcher)
    asked = [name for name in SETTING_NAMES if name in form.fields]
    assert asked == [name for name in SETTING_NAMES if name != "is_active"]

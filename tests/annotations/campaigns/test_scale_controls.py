"""How the task page draws a scale: a row of radio buttons up to seven values, a drop-down beyond or when the
campaign asks for drop-downs; both post the same form the server checks."""

import re

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from annotations.admin.campaigns import CampaignForm
from annotations.campaigns.claims import assignment_claim
from annotations.campaigns.setup import campaign_update
from annotations.models import Aspect, Campaign, Rating, RatingOrigin, Submission
from annotations.rubrics import task_sheet as sheets
from tests.annotate.factories import make_campaign, make_dataset
from tests.conftest import CAST_PASSWORD

pytestmark = pytest.mark.django_db


@pytest.fixture
def campaign(researcher, annotators):
    return make_campaign(make_dataset(owner=researcher, items=2, systems=3), annotators, raters_per_item=1)


def task_page(campaign, user) -> str:  # type: ignore[no-untyped-def]
    client = Client()
    assert client.login(username=user.username, password=CAST_PASSWORD)
    lease = assignment_claim(campaign=campaign, user=user)
    response = client.get(reverse("annotate-task", args=[campaign.pk, lease.task_id]))
    assert response.status_code == 200
    return response.content.decode()


def button_row(body: str, field: str) -> str:
    match = re.search(rf'<div class="scale-buttons" role="radiogroup" id="{field}".*?</div>', body, re.S)
    assert match, f"no button row for {field}"
    return match.group(0)


def test_short_scales_are_rows_of_radio_buttons_one_per_value(campaign, annotator1):
    body = task_page(campaign, annotator1)
    assert "<select" not in body.split('id="task-form"')[1].split('class="skip')[0]
    for number in (1, 2, 3):
        factuality = button_row(body, f"r-{number}-1")
        assert f'aria-labelledby="label-r-{number}-1"' in factuality and 'aria-required="true"' in factuality
        values = re.findall(rf'<input type="radio" name="r-{number}-1" value="([^"]+)" data-key="([^"]*)">', factuality)
        assert values == [("0", "0"), ("1", "1"), ("2", "2"), ("3", "3")]  # no N/A: the aspect does not allow it
        assert ">0 · inaccurate</span>" in factuality and ">3 · accurate</span>" in factuality
        amount = button_row(body, f"r-{number}-2")
        assert "data-signed" in amount
        values = re.findall(rf'<input type="radio" name="r-{number}-2" value="([^"]+)" data-key="([^"]*)">', amount)
        assert values == [("-1", "-"), ("0", "0"), ("1", "+"), ("na", "n")]
        # a key that is not the value itself is shown on the button
        assert '<kbd aria-hidden="true">-</kbd> -1 · too little' in amount
        assert '<kbd aria-hidden="true">+</kbd> 1 · too much' in amount
    assert body.count('name="r-') == 3 * (4 + 4) and body.count('id="r-') == 6  # one id per score, unique


def test_long_scales_and_campaigns_that_ask_for_them_use_drop_downs(campaign, researcher, annotator1, annotator2):
    Aspect.objects.filter(dataset=campaign.dataset, name="factuality").update(max_value=7)  # 8 values
    body = task_page(campaign, annotator1)
    assert re.search(r'<select id="r-1-1" name="r-1-1"', body)
    assert button_row(body, "r-1-2")

    campaign_update(campaign=campaign, name=campaign.name, annotators=[annotator1, annotator2], scale_dropdowns=True)
    body = task_page(campaign, annotator2)
    assert 'role="radiogroup"' not in body
    assert re.search(r'<select id="r-1-2" name="r-1-2" data-aspect-control[^>]* data-signed', body)


def test_the_buttons_post_the_fields_the_server_already_checks(campaign, annotator1):
    body = task_page(campaign, annotator1)
    lease = campaign.assignments.get(annotator=annotator1, submission__isnull=True)
    # what a browser sends for checked radios: one value per name
    form = {"idempotency_key": "buttons-0001", "preference": "1", "rationale": "fine"}
    for number in (1, 2, 3):
        form[f"r-{number}-1"] = "2"
        form[f"r-{number}-2"] = "na" if number == 3 else "-1"
    assert all(f'name="{name}" value="{value}"' in body for name, value in form.items() if name.startswith("r-"))
    client = Client()
    client.login(username=annotator1.username, password=CAST_PASSWORD)
    response = client.post(reverse("annotate-submit", args=[campaign.pk, lease.task_id]), form)
    assert response.status_code == 303
    assert Submission.objects.count() == 1
    app = Rating.objects.filter(origin=RatingOrigin.APP)
    assert app.count() == 6 and app.filter(is_missing=True).count() == 1


def test_the_command_line_and_the_admin_form_set_drop_downs(researcher, annotator1):
    make_dataset("cmd set", owner=researcher, items=1)
    call_command("create_campaign", "Plain", "--dataset", "cmd set", "--annotators", "annotator1")
    call_command(
        "create_campaign", "Selects", "--dataset", "cmd set", "--annotators", "annotator1", "--scale-dropdowns"
    )
    assert dict(Campaign.objects.values_list("name", "scale_dropdowns")) == {"Plain": False, "Selects": True}
    assert "scale_dropdowns" in CampaignForm._meta.fields  # type: ignore[operator]


@pytest.mark.parametrize("dropdowns", [False, True])
def test_an_empty_cell_is_the_markup_its_template_renders_for_it(campaign, dropdowns):
    """The empty cells share one rendering per scale, given their field id and candidate number afterwards; it is the
    cell template's own output, even where an aspect's text holds what the stand-ins look like."""
    aspect = campaign.aspects.order_by("position", "pk").first()
    aspect.description = "Mind <r-field> and <r-row>, __field__ too."
    aspect.save()
    campaign.scale_dropdowns = dropdowns
    scales = sheets.campaign_scales(Campaign.objects.get(pk=campaign.pk))
    candidates = [sheets.Candidate(number=n, response_id=n, text="") for n in (1, 2, 12)]
    sheet = sheets.task_sheet(campaign, scales, candidates, values={"r-2-1": scales[0].options[0].token}, errors={})
    fragments = sheets.scale_fragments(scales, dropdowns=dropdowns)
    for row in sheet:
        for cell in row.cells:
            alone = sheets.Cell(
                scale=cell.scale,
                field_id=cell.field_id,
                value=cell.value,
                error=cell.error,
                popover=cell.popover,
                blank_options=fragments[cell.scale.index].blank_for(cell.field_id),
                buttons=cell.buttons,
            )
            assert cell.markup == sheets._cell_markup(alone, str(row.candidate.number))
            assert "<r-field>" not in cell.markup and "<r-row>" not in cell.markup
            if cell.scale.index == 1:
                assert "Mind &lt;r-field&gt; and &lt;r-row&gt;, __field__ too." in cell.markup

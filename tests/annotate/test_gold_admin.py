"""Marking gold items by hand in the admin: scoped to the researcher's datasets, validated by the service, converting
the item's unrated tasks of built campaigns, refused once a campaign handed the item out."""

import json

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from annotations.campaigns.claims import assignment_claim
from annotations.gold.services import GoldError, gold_item_remove, gold_item_set
from annotations.models import Assignment, Campaign, GoldItem, GoldKind, Item, Task
from annotations.slots import slot_personal_lease
from annotations.slots.campaign_slots import CAMPAIGN_SLOTS
from tests.annotate.factories import make_campaign, make_dataset
from tests.annotate.test_research_area import signed_in
from tests.conftest import CAST_PASSWORD

pytestmark = pytest.mark.django_db

EXPECTED = {"sys_alpha": {"factuality": 3}}


@pytest.fixture
def item(researcher) -> Item:  # type: ignore[no-untyped-def]
    dataset = make_dataset(owner=researcher, items=3, systems=2)
    return Item.objects.get(dataset=dataset, position=0)


def add_url() -> str:
    return reverse("admin:annotations_golditem_add")


def body(item: Item, **extra) -> dict:  # type: ignore[no-untyped-def]
    return {"item": item.pk, "kind": "gold", "expected": json.dumps(EXPECTED), "tolerance": "0.5", **extra}


def test_researcher_marks_an_item_as_gold(researcher, item):
    client = signed_in(researcher)
    page = client.get(add_url(), {"item": item.pk})
    html = page.content.decode()
    assert page.status_code == 200 and "Expected values" in html
    assert "<code>sys_alpha</code>, <code>sys_beta</code>" in html and "<code>amount_info</code> -1–1" in html
    response = client.post(add_url(), body(item))
    assert response.status_code == 302, response.content.decode()[:3000]
    gold = GoldItem.objects.get(item=item)
    assert (gold.kind, gold.expected, gold.tolerance, gold.created_by) == (GoldKind.GOLD, EXPECTED, 0.5, researcher)
    change = client.get(reverse("admin:annotations_golditem_change", args=[gold.pk])).content.decode()
    assert "sys_alpha" in change and "sys_beta" in change and "factuality" in change and "0–3" in change
    item_page = client.get(reverse("admin:annotations_item_change", args=[item.pk])).content.decode()
    assert reverse("admin:annotations_golditem_change", args=[gold.pk]) in item_page


def test_researcher_marks_an_attention_check_and_changes_it(researcher, item):
    client = signed_in(researcher)
    response = client.post(add_url(), body(item, kind="attention", instruction="Choose 3 for Factuality."))
    assert response.status_code == 302
    gold = GoldItem.objects.get(item=item)
    assert gold.kind == GoldKind.ATTENTION and gold.instruction == "Choose 3 for Factuality."
    change = reverse("admin:annotations_golditem_change", args=[gold.pk])
    response = client.post(
        change, {"kind": "gold", "expected": json.dumps({"sys_beta": {"amount_info": -1}}), "tolerance": "0"}
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    gold.refresh_from_db()
    assert (gold.kind, gold.expected, gold.instruction) == (GoldKind.GOLD, {"sys_beta": {"amount_info": -1}}, "")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"expected": json.dumps({"sys_alpha": {"factuality": 9}})},
            "expected.sys_alpha.factuality: expected a number from 0 to 3",
        ),
        (
            {"expected": json.dumps({"sys_zeta": {"factuality": 1}})},
            "expected.sys_zeta: expected a system that answered this item",
        ),
        (
            {"expected": json.dumps({"sys_alpha": {"fluency": 1}})},
            "expected.sys_alpha.fluency: expected an aspect of the rubric",
        ),
        ({"tolerance": "-1"}, "tolerance: expected a number of at least 0"),
        ({"kind": "attention"}, "instruction: expected an instruction for an attention check"),
        ({"expected": "not json"}, "Enter a valid JSON."),
    ],
)
def test_invalid_marks_are_refused_with_the_problem_named(researcher, item, extra, message):
    client = signed_in(researcher)
    response = client.post(add_url(), body(item, **extra))
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not GoldItem.objects.exists()


def test_other_researchers_and_annotators_cannot_mark_or_see(researcher, item, annotator1):
    gold = gold_item_set(item=item, kind="gold", expected=EXPECTED, by=researcher)
    other = User.objects.create_user("researcher_b", password=CAST_PASSWORD, is_staff=True)
    client = signed_in(other)
    assert "sys_alpha" not in client.get(add_url(), {"item": item.pk}).content.decode()
    response = client.post(add_url(), body(Item.objects.get(dataset=item.dataset, position=1)))
    assert response.status_code == 200 and "Select a valid choice" in response.content.decode()
    assert client.get(reverse("admin:annotations_golditem_change", args=[gold.pk])).status_code == 302  # not found
    # The listing's rows, not its text: a short id such as "q0" may occur inside the page's random CSRF token.
    listing = client.get(reverse("admin:annotations_golditem_changelist"))
    assert listing.status_code == 200 and list(listing.context["cl"].result_list) == []
    delete = reverse("admin:annotations_golditem_delete", args=[gold.pk])
    client.post(delete, {"post": "yes"})
    annotator = signed_in(annotator1)
    assert annotator.post(add_url(), body(item)).status_code == 302  # to the admin login
    assert GoldItem.objects.count() == 1
    with pytest.raises(GoldError):
        gold_item_set(item=item, kind="gold", expected=EXPECTED, by=other)
    with pytest.raises(GoldError):
        gold_item_remove(item=item, by=annotator1)


def test_get_of_the_delete_page_changes_nothing(researcher, item):
    gold = gold_item_set(item=item, kind="gold", expected=EXPECTED, by=researcher)
    client = signed_in(researcher)
    assert client.get(reverse("admin:annotations_golditem_delete", args=[gold.pk])).status_code == 200
    assert GoldItem.objects.filter(pk=gold.pk).exists()


def test_marking_converts_unrated_tasks_and_unmarking_restores_them(researcher, item, annotator1):
    campaign = make_campaign(item.dataset, [annotator1], raters_per_item=2)
    task = Task.objects.get(campaign=campaign, turn__item=item)
    assert task.assignments.count() == 2
    client = signed_in(researcher)
    assert client.post(add_url(), body(item)).status_code == 302
    task.refresh_from_db()
    assert task.is_gold and task.assignments.count() == 0
    gold = GoldItem.objects.get(item=item)
    response = client.post(reverse("admin:annotations_golditem_delete", args=[gold.pk]), {"post": "yes"})
    assert response.status_code == 302
    task.refresh_from_db()
    assert not task.is_gold and sorted(task.assignments.values_list("slot", flat=True)) == [1, 2]
    assert not GoldItem.objects.exists()


def test_marking_an_item_already_handed_out_is_refused(researcher, annotator1):
    dataset = make_dataset(owner=researcher, items=2, systems=2)
    campaign: Campaign = make_campaign(dataset, [annotator1], raters_per_item=1)
    leased = assignment_claim(campaign=campaign, user=annotator1)
    item = Item.objects.get(turns__campaign_tasks=leased.task_id)
    client = signed_in(researcher)
    response = client.post(add_url(), body(item))
    assert response.status_code == 200
    assert "already handed out this item" in response.content.decode()
    assert not GoldItem.objects.exists() and not Task.objects.filter(is_gold=True).exists()
    assert Assignment.objects.get(pk=leased.pk).annotator == annotator1


def test_unmarking_a_gold_item_handed_out_is_refused(researcher, annotator1):
    dataset = make_dataset(owner=researcher, items=2, systems=2)
    item = Item.objects.get(dataset=dataset, position=0)
    gold = gold_item_set(item=item, kind="gold", expected=EXPECTED, by=researcher)
    campaign = make_campaign(dataset, [annotator1], raters_per_item=1, gold_rate=0.5)
    slot_personal_lease(pool=CAMPAIGN_SLOTS, campaign=campaign, task=Task.objects.get(is_gold=True), user=annotator1)
    client = signed_in(researcher)
    response = client.post(reverse("admin:annotations_golditem_delete", args=[gold.pk]), {"post": "yes"})
    assert response.status_code == 403
    assert GoldItem.objects.filter(pk=gold.pk).exists()
    with pytest.raises(GoldError, match="already handed out this gold item"):
        gold_item_remove(item=item, by=researcher)


def test_the_item_admins_gold_column_leads_to_the_research_item_page(item, researcher):  # type: ignore[no-untyped-def]
    from annotations.admin.gold import gold_link

    page = reverse("research-item", args=[item.dataset_id, item.pk])
    assert gold_link(item) == f'<a href="{page}">mark as gold</a>'
    assert signed_in(researcher).get(page).status_code == 200
    gold_item_set(item=item, kind="gold", expected=EXPECTED, by=researcher)
    assert gold_link(item) == f'<a href="{page}">gold</a>'

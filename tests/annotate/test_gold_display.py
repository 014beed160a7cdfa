"""A gold task looks like any other task in the page and the annotator API; an attention check shows its
instruction inside the task, next to the answers it names."""

import json
import re

import pytest
from django.urls import reverse

from annotations import slots
from annotations.campaigns.claims import assignment_claim
from annotations.models import Assignment, GoldItem, GoldKind, Item, Rating, Submission, Task
from annotations.slots.campaign_slots import CAMPAIGN_SLOTS
from annotations.text.opaque import opaque_pk
from tests.annotate.factories import full_answer, make_campaign, make_dataset, submit_answer
from tests.annotate.test_annotator_api import token_client

pytestmark = pytest.mark.django_db

INSTRUCTION = "Attention: choose 3 for Factuality on this answer."


@pytest.fixture
def campaign(researcher, annotators):  # type: ignore[no-untyped-def]
    dataset = make_dataset(owner=researcher, items=4, systems=2)
    items = list(Item.objects.filter(dataset=dataset).order_by("position"))
    GoldItem.objects.create(item=items[0], kind=GoldKind.GOLD, expected={"sys_alpha": {"factuality": 3}})
    GoldItem.objects.create(
        item=items[1], kind=GoldKind.ATTENTION, expected={"sys_beta": {"factuality": 3}}, instruction=INSTRUCTION
    )
    return make_campaign(dataset, annotators, raters_per_item=1)


def lease_gold(campaign, user, *, kind: str) -> Assignment:  # type: ignore[no-untyped-def]
    task = Task.objects.get(campaign=campaign, is_gold=True, turn__item__gold__kind=kind)
    return slots.slot_personal_lease(pool=CAMPAIGN_SLOTS, campaign=campaign, task=task, user=user)


def page_shape(html: str) -> list[str]:
    """The page's element ids, classes and names with numbers blanked: what differs between two tasks' pages only
    through their content is gone."""
    return [re.sub(r"\d+", "#", value) for value in re.findall(r'(?:id|class|name)="([^"]*)"', html)]


def test_gold_task_page_looks_like_any_other(client, campaign, annotator1, annotator2):
    regular = assignment_claim(campaign=campaign, user=annotator1)
    assert regular is not None and not regular.is_gold
    gold = lease_gold(campaign, annotator2, kind=GoldKind.GOLD)
    client.force_login(annotator1)
    regular_html = client.get(reverse("annotate-task", args=[campaign.pk, regular.task_id])).content.decode()
    client.force_login(annotator2)
    response = client.get(reverse("annotate-task", args=[campaign.pk, gold.task_id]))
    assert response.status_code == 200
    gold_html = response.content.decode()
    assert "gold" not in gold_html.lower() and "attention" not in gold_html.lower()
    assert page_shape(gold_html) == page_shape(regular_html)
    assert "task-instruction" not in gold_html


def test_next_leads_to_a_gold_task_through_the_usual_urls(client, campaign, annotator2):
    gold = lease_gold(campaign, annotator2, kind=GoldKind.GOLD)
    client.force_login(annotator2)
    response = client.post(reverse("annotate-next", args=[campaign.pk]))
    assert response.status_code == 303
    assert response["Location"] == reverse("annotate-task", args=[campaign.pk, gold.task_id])


def test_gold_task_in_the_api_looks_like_any_other(campaign, annotator1, annotator2):
    regular = token_client(annotator1).post(reverse("api-annotate-next", args=[campaign.pk])).json()
    lease_gold(campaign, annotator2, kind=GoldKind.GOLD)
    gold = token_client(annotator2).post(reverse("api-annotate-next", args=[campaign.pk])).json()
    gold_task, regular_task = (Task.objects.get(pk=opaque_pk("task", doc["task"])) for doc in (gold, regular))
    assert gold_task.is_gold and not regular_task.is_gold
    assert set(gold) == set(regular)
    assert [set(c) for c in gold["candidates"]] == [set(c) for c in regular["candidates"]]
    assert {c["instruction"] for c in gold["candidates"]} == {""}
    text = json.dumps(gold).lower()
    assert "gold" not in text and "attention" not in text and "expected" not in text


def test_attention_instruction_is_shown_with_the_answer_it_names(client, campaign, annotator3):
    check = lease_gold(campaign, annotator3, kind=GoldKind.ATTENTION)
    client.force_login(annotator3)
    html = client.get(reverse("annotate-task", args=[campaign.pk, check.task_id])).content.decode()
    assert html.count(INSTRUCTION) == 1
    payload = token_client(annotator3).get(reverse("api-annotate-task", args=[campaign.pk, check.task_id])).json()
    shown = [c for c in payload["candidates"] if c["instruction"]]
    assert [c["instruction"] for c in shown] == [INSTRUCTION]
    # The answer it names is the sys_beta one.
    beta = Item.objects.get(gold__kind=GoldKind.ATTENTION).turns.get().responses.get(system__key="sys_beta")
    assert shown[0]["text"] == beta.text
    section = html.split(INSTRUCTION)[0].rsplit('<section class="candidate"', 1)[1]
    assert beta.text in section


def test_attention_instruction_naming_no_system_is_shown_with_every_answer(client, campaign, annotator3):
    GoldItem.objects.filter(kind=GoldKind.ATTENTION).update(expected={})
    check = lease_gold(campaign, annotator3, kind=GoldKind.ATTENTION)
    client.force_login(annotator3)
    html = client.get(reverse("annotate-task", args=[campaign.pk, check.task_id])).content.decode()
    assert html.count(INSTRUCTION) == 2


def test_gold_submission_and_revisit_store_ratings_through_the_normal_path(client, campaign, annotator2):
    gold = lease_gold(campaign, annotator2, kind=GoldKind.GOLD)
    gold.task = Task.objects.select_related("turn").get(pk=gold.task_id)
    submit_answer(campaign, gold, annotator2, "gold-submit-0001", full_answer(gold, annotator2, value=3))
    assert Submission.objects.get(assignment=gold).version == 1
    ratings = Rating.objects.filter(rater__user=annotator2, aspect__name="factuality")
    assert ratings.count() == 2 and set(ratings.values_list("value", flat=True)) == {3.0}
    submit_answer(campaign, gold, annotator2, "gold-submit-0002", full_answer(gold, annotator2, value=1))
    assert Submission.objects.get(assignment=gold).version == 2
    assert set(ratings.values_list("value", flat=True)) == {1.0}
    client.force_login(annotator2)
    assert client.get(reverse("annotate-task", args=[campaign.pk, gold.task_id])).status_code == 200

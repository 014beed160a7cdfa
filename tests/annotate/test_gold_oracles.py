"""Gold tasks cannot be told apart from regular ones by anything the annotator sees.

Each test plays one way a worker could tell them apart: the progress count, the hidden lease field, the task's
address (whose id said where the item sat in the file, and gold items usually come last), and how long a hand-out
takes. Gold items sit at the end of the file here, the usual layout."""

import json

import pytest
from django.core import signing
from django.core.cache import cache
from django.urls import reverse

from annotations.campaigns.claims import assignment_claim
from annotations.campaigns.progress import annotator_progress
from annotations.models import Assignment, AssignmentStatus, Campaign, GoldItem, GoldKind, Item, Task
from annotations.recruitment.models import Platform
from annotations.recruitment.services import link_create
from tests.annotate.factories import full_answer, make_campaign, make_dataset, submit_answer
from tests.annotate.test_recruitment import joined_worker, next_task, submit_current
from tests.conftest import login

pytestmark = pytest.mark.django_db


def gold_last_campaign(owner, annotators, *, regular: int, gold: int, rate: float = 1 / 3, **kwargs) -> Campaign:  # type: ignore[no-untyped-def]
    dataset = make_dataset(owner=owner, items=regular + gold, systems=2)
    for item in Item.objects.filter(dataset=dataset).order_by("-position")[:gold]:
        GoldItem.objects.create(item=item, kind=GoldKind.GOLD, expected={"sys_alpha": {"factuality": 3}}, tolerance=0)
    return make_campaign(dataset, annotators, gold_rate=rate, **kwargs)


def submit(campaign: Campaign, assignment: Assignment, user) -> None:  # type: ignore[no-untyped-def]
    submit_answer(campaign, assignment, user, f"key-{assignment.pk:06d}-{user.pk:04d}", full_answer(assignment, user))


# --- the counter -------------------------------------------------------------------------------------------------


def test_counter_oracle_the_total_never_moves_when_gold_is_served(researcher, annotator1):
    campaign = gold_last_campaign(researcher, [annotator1], regular=12, gold=4, raters_per_item=1)
    totals, kinds = [annotator_progress(campaign=campaign, user=annotator1).total], []
    while (assignment := assignment_claim(campaign=campaign, user=annotator1)) is not None:
        kinds.append(assignment.is_gold)
        totals.append(annotator_progress(campaign=campaign, user=annotator1).total)
        submit(campaign, assignment, annotator1)
        totals.append(annotator_progress(campaign=campaign, user=annotator1).total)
    assert kinds.count(True) >= 3 and kinds.count(False) == 12  # gold was served among the regular tasks
    assert set(totals) == {len(kinds)}, (
        totals
    )  # "X of Y": Y is the number of tasks the annotator will do, from the start


def test_counter_oracle_on_the_pages(researcher, annotator1):
    campaign = gold_last_campaign(researcher, [annotator1], regular=6, gold=3, raters_per_item=1)
    client = login(annotator1)
    seen = set()
    kinds = []
    for _ in range(20):
        response = client.post(reverse("annotate-next", args=[campaign.pk]))
        if "/tasks/" not in response["Location"]:
            break
        page = client.get(response["Location"]).content.decode()
        seen.add(page.split(" tasks done", 1)[0].rsplit(" of ", 1)[1])
        held = Assignment.objects.get(campaign=campaign, annotator=annotator1, status=AssignmentStatus.LEASED)
        kinds.append(held.is_gold)
        submit(campaign, held, annotator1)
    assert True in kinds and False in kinds
    assert seen == {str(len(kinds))}


def test_counter_oracle_a_crowd_worker_with_a_quota_of_three_sees_of_three(researcher, annotator1):
    cache.clear()
    campaign = gold_last_campaign(researcher, [annotator1], regular=9, gold=3, rate=0.5, raters_per_item=1)
    link = link_create(campaign=campaign, platform=Platform.PROLIFIC, created_by=researcher, tasks_per_worker=3)
    client, worker = joined_worker(link)
    pages = [client.get(reverse("annotate-campaign", args=[campaign.pk])).content.decode()]
    kinds = []
    for _ in range(3):
        next_task(client, campaign)
        held = Assignment.objects.get(campaign=campaign, annotator=worker, status=AssignmentStatus.LEASED)
        kinds.append(held.is_gold)
        pages.append(client.get(reverse("annotate-task", args=[campaign.pk, held.task_id])).content.decode())
        submit_current(client, campaign, worker)
    assert True in kinds
    for number, page in enumerate(pages):
        done = max(0, number - 1) if number else 0
        assert f"{done} of 3 tasks done" in page, page.split("tasks done")[0][-40:]
    cache.clear()


# --- the lease field ---------------------------------------------------------------------------------------------


def _payload(signed: str) -> object:
    """What anyone can read from a signed value without the key: its first part, base64 of JSON."""
    head = signed.split(":", 1)[0]
    return json.loads(signing.b64_decode(head.encode()))


def test_lease_decode_oracle_the_lease_field_carries_no_slot_id(researcher, annotator1):
    campaign = gold_last_campaign(researcher, [annotator1], regular=6, gold=3, raters_per_item=1)
    client = login(annotator1)
    decoded: list[tuple[bool, object]] = []
    for _ in range(9):
        response = client.post(reverse("annotate-next", args=[campaign.pk]))
        if "/tasks/" not in response["Location"]:
            break
        page = client.get(response["Location"]).content.decode()
        lease = page.split('name="lease" value="', 1)[1].split('"', 1)[0]
        held = Assignment.objects.get(campaign=campaign, annotator=annotator1, status=AssignmentStatus.LEASED)
        value = _payload(lease)
        assert value != held.pk and not str(value).isdigit(), (value, held.pk)
        decoded.append((held.is_gold, value))
        submit(campaign, held, annotator1)
    assert {gold for gold, _ in decoded} == {True, False}
    # The opaque values do not order the gold slots (appended at hand-out) after the regular ones.
    assert all(isinstance(value, str) and len(value) == 13 for _, value in decoded)


def test_a_forged_or_foreign_lease_reclaims_nothing(researcher, annotator1):
    campaign = gold_last_campaign(researcher, [annotator1], regular=3, gold=1, raters_per_item=1)
    held = assignment_claim(campaign=campaign, user=annotator1)
    url = reverse("annotate-submit", args=[campaign.pk, held.task_id])
    forged = signing.dumps(held.pk, salt=f"annotate-lease:{annotator1.pk}")  # the old, readable form
    client = login(annotator1)
    Assignment.objects.filter(pk=held.pk).update(annotator=None, status=AssignmentStatus.FREE)
    response = client.post(url, {"idempotency_key": "forged-lease-01", "lease": forged, "rationale": "x"})
    assert response.status_code == 403


# --- the task's address -----------------------------------------------------------------------------------------


def test_id_order_oracle_addresses_carry_neither_ids_nor_file_order(researcher, annotator1):
    campaign = gold_last_campaign(researcher, [annotator1], regular=20, gold=10, raters_per_item=1)
    tasks = list(Task.objects.filter(campaign=campaign))
    refs = {
        task.pk: reverse("annotate-task", args=[campaign.pk, task.pk]).rstrip("/").rsplit("/", 1)[1] for task in tasks
    }
    for task in tasks:
        assert refs[task.pk] != str(task.pk) and not refs[task.pk].isdigit()
    gold = {task.pk for task in tasks if task.is_gold}
    # By id the gold tasks are the last ten (the end of the file); by reference, and by hand-out order, they are not.
    assert sorted(refs, key=lambda pk: pk)[-10:] == sorted(gold)
    assert set(sorted(refs, key=refs.get)[-10:]) != gold
    assert set(sorted(refs, key=refs.get)[:10]) != gold
    by_position = [task.pk for task in sorted(tasks, key=lambda task: task.position)]
    assert set(by_position[-10:]) != gold and set(by_position[:10]) != gold
    # What the worker is sent: the address after "next", and the API's task field.
    client = login(annotator1)
    location = client.post(reverse("annotate-next", args=[campaign.pk]))["Location"]
    held = Assignment.objects.get(campaign=campaign, annotator=annotator1, status=AssignmentStatus.LEASED)
    assert location == f"/annotate/{campaign.pk}/tasks/{refs[held.task_id]}/"
    api_task = client.get(reverse("api-annotate-task", args=[campaign.pk, held.task_id])).json()
    assert api_task["task"] == refs[held.task_id]
    assert client.get(f"/annotate/{campaign.pk}/tasks/{held.task_id}/").status_code == 404  # ids are not addresses

"""Racing "next" requests of one annotator when their next task is gold: one personal slot, one open lease."""

import threading

import pytest
from django.contrib.auth.models import User

from annotations.campaigns.claims import assignment_claim
from annotations.gold.selectors import gold_is_due
from annotations.models import Assignment, AssignmentStatus, GoldItem, Item
from tests.annotate.factories import make_campaign, make_dataset
from tests.annotations.campaigns.test_concurrency import _run_threads, claims_at_once

pytestmark = pytest.mark.django_db(transaction=True)

THREADS = 12


def test_racing_claims_of_one_annotator_append_a_single_gold_slot():
    owner = User.objects.create_user("owner", is_staff=True)
    user = User.objects.create_user("eager")
    dataset = make_dataset(owner=owner, items=6, systems=2)
    for item in Item.objects.filter(dataset=dataset).order_by("position")[:3]:
        GoldItem.objects.create(item=item, expected={"sys_alpha": {"factuality": 1}})
    campaign = make_campaign(dataset, [user], raters_per_item=1, gold_rate=0.5)
    # A seed under which this annotator's first task is gold, so every racing request tries to append one.
    seed = 0
    while not gold_is_due(campaign=campaign, user_id=user.pk, handed_out=0):
        campaign.shuffle_seed = f"seed{seed}"
        seed += 1
    campaign.save()
    got = claims_at_once(campaign, user, THREADS)
    assert len(set(got)) == 1 and got[0] != -1
    held = Assignment.objects.filter(annotator=user)
    assert held.count() == 1
    only = held.get()
    assert only.is_gold and only.status == AssignmentStatus.LEASED and only.task.is_gold
    assert Assignment.objects.filter(is_gold=True).count() == 1


def test_racing_annotators_on_one_gold_task_each_get_their_own_slot():
    owner = User.objects.create_user("owner", is_staff=True)
    people = [User.objects.create_user(f"racer{i}") for i in range(THREADS)]
    dataset = make_dataset(owner=owner, items=2, systems=2)
    GoldItem.objects.create(item=Item.objects.get(dataset=dataset, position=0), expected={})
    campaign = make_campaign(dataset, people, raters_per_item=THREADS, gold_rate=0.5)
    seed = 0
    while sum(gold_is_due(campaign=campaign, user_id=p.pk, handed_out=0) for p in people) < 2:
        campaign.shuffle_seed = f"seed{seed}"
        seed += 1
    campaign.save()
    gold: list[int] = []
    lock = threading.Lock()

    def claim(index: int) -> None:
        assignment = assignment_claim(campaign=campaign, user=people[index])
        if assignment is not None and assignment.is_gold:
            with lock:
                gold.append(people[index].pk)

    assert _run_threads(claim, THREADS) == []
    due = [p.pk for p in people if gold_is_due(campaign=campaign, user_id=p.pk, handed_out=0)]
    assert sorted(gold) == sorted(due)
    slots = Assignment.objects.filter(is_gold=True)
    assert sorted(slots.values_list("slot", flat=True)) == list(range(1, len(due) + 1))
    assert sorted(slots.values_list("annotator_id", flat=True)) == sorted(due)

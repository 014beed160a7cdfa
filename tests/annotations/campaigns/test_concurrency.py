"""Many annotators, real threads, one database connection each: no task may ever get more than N raters."""

import threading
from collections import Counter

import pytest
from django.contrib.auth.models import User
from django.db import connections
from django.utils import timezone

from annotations import slots
from annotations.campaigns.claims import assignment_claim
from annotations.models import Assignment, AssignmentStatus, Rating, RatingOrigin, Submission
from annotations.slots.campaign_slots import CAMPAIGN_SLOTS
from tests.annotate.factories import full_answer, make_campaign, make_dataset, submit_answer
from tests.annotations.campaigns.test_slots import CLAIM_PATHS

# Runs on both databases CI uses: row locking between real connections on Postgres, and the ORM path's
# serialised (IMMEDIATE) write transactions on SQLite.
pytestmark = pytest.mark.django_db(transaction=True)

THREADS = 16


def _run_threads(target, count: int) -> list[BaseException]:  # type: ignore[no-untyped-def]
    errors: list[BaseException] = []
    barrier = threading.Barrier(count)

    def wrapper(index: int) -> None:
        try:
            barrier.wait()
            target(index)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=wrapper, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return errors


def claims_at_once(campaign, user, count: int) -> list[int]:  # type: ignore[no-untyped-def]
    """The assignment each of `count` simultaneous claims by one annotator got (-1 for none)."""
    got: list[int] = []
    lock = threading.Lock()

    def claim(_index: int) -> None:
        assignment = assignment_claim(campaign=campaign, user=User.objects.get(pk=user.pk))
        with lock:
            got.append(assignment.pk if assignment else -1)

    assert _run_threads(claim, count) == []
    return got


def campaign_for(usernames: list[str], items: int, raters_per_item: int):  # type: ignore[no-untyped-def]
    """A campaign on `items` items of two systems with the named annotators in its pool, and those annotators."""
    owner = User.objects.create_user("owner", is_staff=True)
    people = [User.objects.create_user(username) for username in usernames]
    dataset = make_dataset(owner=owner, items=items, systems=2)
    return make_campaign(dataset, people, raters_per_item=raters_per_item), people


def crowded_campaign(items: int, raters_per_item: int, prefix: str = "worker"):  # type: ignore[no-untyped-def]
    return campaign_for([f"{prefix}{i}" for i in range(THREADS)], items, raters_per_item)


def assert_each_task_rated_by_distinct(campaign, raters_per_item: int) -> None:  # type: ignore[no-untyped-def]
    for task in campaign.tasks.all():
        raters = list(task.assignments.filter(status=AssignmentStatus.SUBMITTED).values_list("annotator", flat=True))
        assert len(raters) == raters_per_item and len(set(raters)) == raters_per_item


def test_concurrent_annotators_fill_every_task_exactly_n_times():
    campaign, people = crowded_campaign(items=6, raters_per_item=3)
    submitted: Counter[int] = Counter()
    lock = threading.Lock()

    def annotate(index: int) -> None:
        user = people[index]
        while True:
            assignment = assignment_claim(campaign=campaign, user=user)
            if assignment is None:
                return
            submit_answer(
                campaign,
                assignment,
                user,
                f"task{assignment.task_id}-user{user.pk}",
                full_answer(assignment, user, preference=1),
            )
            with lock:
                submitted[assignment.task_id] += 1

    errors = _run_threads(annotate, THREADS)
    assert errors == []
    assert sum(submitted.values()) == 6 * 3
    assert_each_task_rated_by_distinct(campaign, 3)
    assert Submission.objects.count() == 18
    assert Rating.objects.filter(origin=RatingOrigin.APP).count() == 18 * 2 * 2


def test_racing_claims_for_one_remaining_slot_give_it_to_exactly_one():
    campaign, people = crowded_campaign(items=1, raters_per_item=1, prefix="racer")
    winners: list[int] = []
    lock = threading.Lock()

    def claim(index: int) -> None:
        assignment = assignment_claim(campaign=campaign, user=people[index])
        if assignment is not None:
            with lock:
                winners.append(people[index].pk)

    assert _run_threads(claim, THREADS) == []
    assert len(winners) == 1
    slot = Assignment.objects.get(campaign=campaign)
    assert slot.annotator_id == winners[0] and slot.status == AssignmentStatus.LEASED


def test_one_annotator_hammering_next_gets_a_single_lease():
    campaign, (user,) = campaign_for(["eager"], items=5, raters_per_item=2)
    got = claims_at_once(campaign, user, 8)
    assert len(set(got)) == 1 and got[0] != -1
    assert Assignment.objects.filter(annotator=user, status=AssignmentStatus.LEASED).count() == 1


def test_concurrent_double_submit_writes_once():
    campaign, (user,) = campaign_for(["doubleclicker"], items=1, raters_per_item=1)
    assignment = assignment_claim(campaign=campaign, user=user)
    replays: list[bool] = []
    lock = threading.Lock()

    def submit(_index: int) -> None:
        result = submit_answer(campaign, assignment, user, "double-click-key", full_answer(assignment, user))
        with lock:
            replays.append(result.replayed)

    errors = _run_threads(submit, 6)
    assert errors == []
    assert sorted(replays) == [False, True, True, True, True, True]
    assert Submission.objects.count() == 1
    assert Rating.objects.filter(origin=RatingOrigin.APP).count() == 2 * 2


@pytest.mark.parametrize("claim_path", CLAIM_PATHS, ids=lambda p: p.__name__)
def test_every_claim_path_fills_every_task_exactly_n_times(claim_path):  # type: ignore[no-untyped-def]
    campaign, people = crowded_campaign(items=5, raters_per_item=3)
    completed: Counter[int] = Counter()
    lock = threading.Lock()

    def work(index: int) -> None:
        user = people[index]
        while (
            claim := claim_path(pool=CAMPAIGN_SLOTS, campaign=campaign, user=user, now=None, details=slots.NO_DETAILS)
        ) is not None:
            assert slots.slot_complete(
                pool=CAMPAIGN_SLOTS, slot=claim.slot, user=user, now=timezone.now(), seconds_spent=1.0
            )
            with lock:
                completed[claim.slot.task_id] += 1

    assert _run_threads(work, THREADS) == []
    assert sorted(completed.values()) == [3] * 5
    assert_each_task_rated_by_distinct(campaign, 3)

"""The slot-and-lease engine itself: the claim rule is the same on every path, and the progress count follows it.

Every claim path the database offers runs the same scenarios: on Postgres both the one-statement claim and the
portable one (which SQLite and other databases use), elsewhere the portable one.
"""

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from annotations import slots
from annotations.models import Assignment, AssignmentStatus, Campaign, GoldItem, GoldKind, Item, Skip, Task
from annotations.slots import claiming, rules
from annotations.slots.campaign_slots import CAMPAIGN_SLOTS
from tests.annotate.factories import make_campaign, make_dataset

pytestmark = pytest.mark.django_db(transaction=True)

CLAIM_PATHS = [claiming._claim_portable]
if connection.vendor == "postgresql":
    CLAIM_PATHS.append(claiming._claim_in_one_statement)


@pytest.fixture(params=CLAIM_PATHS, ids=lambda path: path.__name__)
def claim(request):  # type: ignore[no-untyped-def]
    path = request.param

    def claim_next(campaign, user, now=None):  # type: ignore[no-untyped-def]
        return path(pool=CAMPAIGN_SLOTS, campaign=campaign, user=user, now=now, details=slots.NO_DETAILS)

    return claim_next


def test_claim_rule_resume_order_skip_and_expiry(claim, researcher, annotator1, annotator2, annotator3):  # type: ignore[no-untyped-def]
    campaign = make_campaign(
        make_dataset(owner=researcher, items=3, systems=2), [annotator1, annotator2], raters_per_item=1
    )
    first = claim(campaign, annotator1)
    assert first.resumed is False and first.slot.task_position == 0 and first.slot.status == AssignmentStatus.LEASED
    again = claim(campaign, annotator1)
    assert again.resumed is True and again.slot.pk == first.slot.pk  # one open lease, extended
    second = claim(campaign, annotator2)
    assert second.slot.task_position == 1  # the lowest claimable slot: task 0 has its one rater
    slots.slot_skip(pool=CAMPAIGN_SLOTS, slot=second.slot, user=annotator2, reason="other")
    third = claim(campaign, annotator2)
    assert third.slot.task_position == 2  # never the skipped task again
    later = timezone.now() + timedelta(minutes=campaign.lease_minutes + 1)
    slots.slot_release(pool=CAMPAIGN_SLOTS, slot_id=first.slot.pk, user=annotator1)
    Assignment.objects.filter(pk=third.slot.pk).update(lease_expires_at=timezone.now())
    taken = claim(campaign, annotator1, now=later)
    assert taken.slot.task_position == 0  # released, then the lowest again
    assert claim(campaign, annotator1, now=later).slot.pk == taken.slot.pk
    with pytest.raises(slots.NotInPool):
        claim(campaign, annotator3)


def test_expired_lease_goes_to_the_next_person(claim, researcher, annotator1, annotator2):  # type: ignore[no-untyped-def]
    campaign = make_campaign(
        make_dataset(owner=researcher, items=1, systems=2), [annotator1, annotator2], raters_per_item=1
    )
    held = claim(campaign, annotator1)
    assert claim(campaign, annotator2) is None  # the only slot is leased
    later = timezone.now() + timedelta(minutes=campaign.lease_minutes + 1)
    taken = claim(campaign, annotator2, now=later)
    assert taken.slot.pk == held.slot.pk and taken.slot.annotator_id == annotator2.pk
    # The one who lost it cannot take the task back while someone else holds it.
    assert claim(campaign, annotator1, now=later) is None


def test_progress_counts_what_the_claim_would_hand_out(claim, researcher, annotator1, annotator2):  # type: ignore[no-untyped-def]
    campaign = make_campaign(
        make_dataset(owner=researcher, items=4, systems=2), [annotator1, annotator2], raters_per_item=1
    )
    counts = slots.slot_counts(pool=CAMPAIGN_SLOTS, campaign=campaign, user=annotator1)
    assert (counts.done, counts.leased, counts.available) == (0, 0, 4)
    taken = claim(campaign, annotator2)
    slots.slot_skip(pool=CAMPAIGN_SLOTS, slot=claim(campaign, annotator1).slot, user=annotator1, reason="other")
    counts = slots.slot_counts(pool=CAMPAIGN_SLOTS, campaign=campaign, user=annotator1)
    assert (counts.done, counts.leased, counts.available) == (0, 0, 2)  # one leased by annotator2, one skipped
    handed_out = 0
    while (next_claim := claim(campaign, annotator1)) is not None:
        assert slots.slot_complete(
            pool=CAMPAIGN_SLOTS, slot=next_claim.slot, user=annotator1, now=timezone.now(), seconds_spent=1.0
        )
        handed_out += 1
    assert handed_out == 2
    counts = slots.slot_counts(pool=CAMPAIGN_SLOTS, campaign=campaign, user=annotator1)
    assert (counts.done, counts.leased, counts.available) == (2, 0, 0)
    assert Skip.objects.filter(annotator=annotator1).count() == 1
    assert Assignment.objects.get(pk=taken.slot.pk).status == AssignmentStatus.LEASED


def test_complete_needs_the_open_lease_and_the_pool(claim, researcher, annotator1, annotator2):  # type: ignore[no-untyped-def]
    campaign = make_campaign(
        make_dataset(owner=researcher, items=2, systems=2), [annotator1, annotator2], raters_per_item=1
    )
    mine = claim(campaign, annotator1).slot
    now = timezone.now()
    assert not slots.slot_complete(pool=CAMPAIGN_SLOTS, slot=mine, user=annotator2, now=now, seconds_spent=1.0)
    campaign.annotators.remove(annotator1)
    assert not slots.slot_complete(pool=CAMPAIGN_SLOTS, slot=mine, user=annotator1, now=now, seconds_spent=1.0)
    assert slots.slots_release_outside_pool(pool=CAMPAIGN_SLOTS, campaign=campaign) == 1
    assert Assignment.objects.get(pk=mine.pk).status == AssignmentStatus.FREE


def _windowed(campaign, *, opens_at=None, closes_at=None):  # type: ignore[no-untyped-def]
    Campaign.objects.filter(pk=campaign.pk).update(opens_at=opens_at, closes_at=closes_at)
    campaign.refresh_from_db()
    return campaign


def test_no_task_is_handed_out_before_the_opening_or_from_the_closing(claim, researcher, annotator1):  # type: ignore[no-untyped-def]
    now = timezone.now()
    campaign = make_campaign(make_dataset(owner=researcher, items=3, systems=2), [annotator1], raters_per_item=1)
    opens_at, closes_at = now + timedelta(hours=1), now + timedelta(hours=2)
    _windowed(campaign, opens_at=opens_at, closes_at=closes_at)
    assert claim(campaign, annotator1, now=now) is None
    assert slots.slot_counts(pool=CAMPAIGN_SLOTS, campaign=campaign, user=annotator1, now=now).available == 0
    # The pages' reading of the window agrees with the claim rule's at both boundaries and around them.
    for moment in (now, opens_at, opens_at + timedelta(minutes=1), closes_at - timedelta(microseconds=1), closes_at):
        shown = slots.hand_out_window(opens_at=opens_at, closes_at=closes_at, now=moment)
        claimable = slots.slot_window_open(pool=CAMPAIGN_SLOTS, campaign=campaign, now=moment)
        assert (shown == slots.HandOut.OPEN) == claimable
    first = claim(campaign, annotator1, now=opens_at)  # the opening moment itself is inside the window
    assert first is not None and first.resumed is False
    assert slots.slot_counts(pool=CAMPAIGN_SLOTS, campaign=campaign, user=annotator1, now=opens_at).available == 2
    assert slots.slot_complete(pool=CAMPAIGN_SLOTS, slot=first.slot, user=annotator1, now=opens_at, seconds_spent=1.0)
    assert claim(campaign, annotator1, now=closes_at) is None  # the closing moment is outside
    assert slots.slot_counts(pool=CAMPAIGN_SLOTS, campaign=campaign, user=annotator1, now=closes_at).available == 0
    assert not Assignment.objects.filter(annotator=annotator1, status=AssignmentStatus.LEASED).exists()


def test_a_lease_taken_before_the_close_is_finished_until_it_ends(claim, researcher, annotator1, annotator2):  # type: ignore[no-untyped-def]
    now = timezone.now()
    campaign = make_campaign(
        make_dataset(owner=researcher, items=3, systems=2), [annotator1, annotator2], raters_per_item=1
    )
    closes_at = now + timedelta(hours=1)
    _windowed(campaign, closes_at=closes_at)
    lease = timedelta(minutes=campaign.lease_minutes)
    before = closes_at - timedelta(minutes=1)
    mine = claim(campaign, annotator1, now=before)
    theirs = claim(campaign, annotator2, now=before)
    after = closes_at + timedelta(minutes=1)
    resumed = claim(campaign, annotator1, now=after)
    assert resumed.resumed is True and resumed.slot.pk == mine.slot.pk
    # Resumed but not extended: the lease still ends when it ended before the close.
    assert Assignment.objects.get(pk=mine.slot.pk).lease_expires_at == before + lease
    assert slots.slot_complete(pool=CAMPAIGN_SLOTS, slot=mine.slot, user=annotator1, now=after, seconds_spent=1.0)
    assert claim(campaign, annotator1, now=after) is None  # finished: nothing new after the close
    ended = before + lease + timedelta(seconds=1)
    assert claim(campaign, annotator2, now=ended) is None  # its lease ran out after the close
    assert not slots.slot_complete(pool=CAMPAIGN_SLOTS, slot=theirs.slot, user=annotator2, now=ended, seconds_spent=1)


def test_the_database_refuses_a_campaign_that_closes_before_it_opens(researcher, annotator1):  # type: ignore[no-untyped-def]
    from django.db import IntegrityError, transaction

    campaign = make_campaign(make_dataset(owner=researcher, items=1, systems=2), [annotator1], raters_per_item=1)
    now = timezone.now()
    with pytest.raises(IntegrityError), transaction.atomic():
        Campaign.objects.filter(pk=campaign.pk).update(opens_at=now, closes_at=now)


def test_a_stopped_campaign_hands_out_neither_a_shared_nor_a_gold_task(claim, researcher, annotator1, annotator2):  # type: ignore[no-untyped-def]
    dataset = make_dataset(owner=researcher, items=3, systems=2)
    item = Item.objects.filter(dataset=dataset).order_by("position").first()
    GoldItem.objects.create(item=item, kind=GoldKind.GOLD, expected={"sys_alpha": {"factuality": 3}})
    campaign = make_campaign(dataset, [annotator1, annotator2], raters_per_item=1)
    gold = Task.objects.get(campaign=campaign, is_gold=True)
    # Before the stop both kinds are handed out, so what follows is the stop's doing and nothing else's.
    assert slots.slot_personal_lease(pool=CAMPAIGN_SLOTS, campaign=campaign, task=gold, user=annotator2) is not None
    assert slots.slot_counts(pool=CAMPAIGN_SLOTS, campaign=campaign, user=annotator1).available > 0
    assert slots.slot_handing_out(pool=CAMPAIGN_SLOTS, campaign=campaign)
    Campaign.objects.filter(pk=campaign.pk).update(stopped_at=timezone.now())
    assert not slots.slot_handing_out(pool=CAMPAIGN_SLOTS, campaign=campaign)
    assert slots.slot_window_open(pool=CAMPAIGN_SLOTS, campaign=campaign)  # the window alone is still open
    assert slots.slot_counts(pool=CAMPAIGN_SLOTS, campaign=campaign, user=annotator1).available == 0
    assert claim(campaign, annotator1) is None
    assert slots.slot_personal_lease(pool=CAMPAIGN_SLOTS, campaign=campaign, task=gold, user=annotator1) is None
    if connection.vendor == "postgresql":
        assert slots.slot_personal_claim(pool=CAMPAIGN_SLOTS, campaign=campaign, user=annotator1) is None
    assert not Assignment.objects.filter(annotator=annotator1).exists()


def test_the_claim_asks_the_rated_rule_of_one_slot_at_a_time(researcher, annotator1):  # type: ignore[no-untyped-def]
    """As a join, the rule can read all of the user's ratings in the dataset on every claim (the plan Postgres picks
    for a large campaign); as a subplan run per slot, it reads only the answers of the slots the claim looks at."""
    campaign = make_campaign(make_dataset(owner=researcher, items=3, systems=2), [annotator1], raters_per_item=1)
    params = {"campaign": campaign.pk, "user": annotator1.pk, "now": timezone.now()}
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"EXPLAIN {rules._pick_sql(CAMPAIGN_SLOTS, True)}", params)
            plan = "\n".join(row[0] for row in cursor.fetchall())
            assert "Anti Join" not in plan, plan
            assert "annotations_rating" in plan and re.search(r"NOT \(SubPlan \d+\)", plan), plan
        else:
            cursor.execute(f"EXPLAIN QUERY PLAN {rules._pick_sql(CAMPAIGN_SLOTS, False)}", params)
            plan = "\n".join(str(row[-1]) for row in cursor.fetchall())
            assert re.search(r"CORRELATED \w+ SUBQUERY", plan), plan

"""Gold tasks mixed into each annotator's queue: built without slots, served as personal slots at the campaign's
gold rate, never claimed by anyone else."""

import io

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotations import slots
from annotations.campaigns import claims
from annotations.campaigns.claims import assignment_claim, assignment_skip
from annotations.campaigns.errors import CampaignError
from annotations.gold.selectors import gold_block_size, gold_is_due
from annotations.models import Assignment, AssignmentStatus, Campaign, GoldItem, GoldKind, Item, Rating, Task
from annotations.slots.campaign_slots import CAMPAIGN_SLOTS
from tests.annotate.factories import full_answer, make_campaign, make_dataset, submit_answer
from tests.annotations.campaigns.test_slots import CLAIM_PATHS

pytestmark = pytest.mark.django_db


@pytest.fixture(params=CLAIM_PATHS, ids=lambda path: path.__name__)
def claim_path(request, monkeypatch):  # type: ignore[no-untyped-def]
    """Runs assignment_claim's regular claim through each of the engine's paths (the one-statement claim exists on
    Postgres only)."""
    path = request.param

    def claim(**kwargs):  # type: ignore[no-untyped-def]
        return path(**kwargs)

    monkeypatch.setattr(claims, "slot_claim", claim)
    return path


def gold_campaign(owner, annotators, *, items: int = 9, gold: int = 3, rate: float = 1 / 3, **kwargs):  # type: ignore[no-untyped-def]
    dataset = make_dataset(owner=owner, items=items + gold, systems=2)
    for item in Item.objects.filter(dataset=dataset).order_by("position")[:gold]:
        GoldItem.objects.create(item=item, kind=GoldKind.GOLD, expected={"sys_alpha": {"factuality": 3}}, tolerance=0)
    return make_campaign(dataset, annotators, gold_rate=rate, **kwargs)


def work_through(campaign: Campaign, user) -> list[bool]:  # type: ignore[no-untyped-def]
    """Claims and submits until nothing is left; the gold flag of each task in the order it was handed out."""
    handed: list[bool] = []
    while (assignment := assignment_claim(campaign=campaign, user=user)) is not None:
        handed.append(assignment.is_gold)
        assert assignment.task.is_gold == assignment.is_gold
        submit_answer(
            campaign, assignment, user, f"key-{assignment.task_id:04d}-{user.pk:04d}", full_answer(assignment, user)
        )
    return handed


def test_build_gives_gold_tasks_no_slots(researcher, annotator1):
    campaign = gold_campaign(researcher, [annotator1], items=4, gold=2, raters_per_item=3)
    assert Task.objects.filter(campaign=campaign, is_gold=True).count() == 2
    assert not Assignment.objects.filter(task__is_gold=True).exists()
    assert Assignment.objects.filter(campaign=campaign).count() == 4 * 3
    gold_turns = set(Task.objects.filter(campaign=campaign, is_gold=True).values_list("turn__item__gold", flat=True))
    assert gold_turns == set(GoldItem.objects.values_list("pk", flat=True))


def test_gold_rate_outside_range_is_refused(researcher):
    with pytest.raises(CampaignError, match="gold rate"):
        make_campaign(make_dataset(owner=researcher, items=2, systems=2), [], gold_rate=0.6)


def test_gold_is_served_at_the_seeded_positions_of_each_block(claim_path, researcher, annotator1, annotator2):
    campaign = gold_campaign(researcher, [annotator1, annotator2], items=12, gold=3, rate=1 / 3, raters_per_item=2)
    assert gold_block_size(campaign.gold_rate) == 3
    for user in (annotator1, annotator2):
        handed = work_through(campaign, user)
        assert len(handed) == 15 and sum(handed) == 3
        # One gold task in each of the first three blocks of three, at the position the seeded rule names for this
        # annotator; then the gold tasks are used up and only regular ones follow.
        assert not any(handed[9:])
        for block in range(3):
            expected = [gold_is_due(campaign=campaign, user_id=user.pk, handed_out=block * 3 + i) for i in range(3)]
            assert sum(expected) == 1
            assert handed[block * 3 : block * 3 + 3] == expected
        gold_slots = Assignment.objects.filter(annotator=user, is_gold=True)
        assert gold_slots.count() == 3 and all(slot.status == AssignmentStatus.SUBMITTED for slot in gold_slots)
    # Every annotator rated every gold task; regular tasks still have exactly N raters.
    for task in Task.objects.filter(campaign=campaign, is_gold=True):
        assert sorted(task.assignments.values_list("slot", flat=True)) == [1, 2]
        assert task.assignments.filter(status=AssignmentStatus.SUBMITTED).count() == 2
    for task in Task.objects.filter(campaign=campaign, is_gold=False):
        assert task.assignments.filter(status=AssignmentStatus.SUBMITTED).count() == 2


def test_the_rule_is_reproducible_and_differs_between_annotators(researcher, annotator1, annotator2):
    campaign = gold_campaign(researcher, [annotator1], items=2, gold=1, rate=0.1)
    first = [gold_is_due(campaign=campaign, user_id=annotator1.pk, handed_out=n) for n in range(200)]
    assert first == [gold_is_due(campaign=campaign, user_id=annotator1.pk, handed_out=n) for n in range(200)]
    assert sum(first) == 20
    other = [gold_is_due(campaign=campaign, user_id=annotator2.pk, handed_out=n) for n in range(200)]
    assert sum(other) == 20 and other != first


def test_gold_stored_as_ratings_of_the_annotators_rater(researcher, annotator1):
    campaign = gold_campaign(researcher, [annotator1], items=3, gold=3, rate=0.5, raters_per_item=1)
    work_through(campaign, annotator1)
    gold_ratings = Rating.objects.filter(response__turn__item__gold__isnull=False, rater__user=annotator1)
    assert gold_ratings.exists()
    assert {slot.task.is_gold for slot in Assignment.objects.filter(annotator=annotator1, is_gold=True)} == {True}


def test_no_gold_when_rate_is_zero(claim_path, researcher, annotator1):
    campaign = gold_campaign(researcher, [annotator1], items=4, gold=2, rate=0, raters_per_item=1)
    handed = work_through(campaign, annotator1)
    assert handed == [False] * 4
    assert not Assignment.objects.filter(task__is_gold=True).exists()


def test_no_gold_once_regular_tasks_are_exhausted(claim_path, researcher, annotator1):
    # Rate 0.5 with many gold items: gold comes only while a regular task is left, never on its own.
    campaign = gold_campaign(researcher, [annotator1], items=2, gold=6, rate=0.5, raters_per_item=1)
    handed = work_through(campaign, annotator1)
    assert handed.count(False) == 2
    assert handed[-1] is False
    assert handed.count(True) <= 2


def test_gold_slot_is_never_claimed_by_someone_else(claim_path, researcher, annotator1, annotator2):
    campaign = gold_campaign(researcher, [annotator1, annotator2], items=4, gold=2, rate=0.5, raters_per_item=2)
    # Advance annotator1 to their first gold task and let its lease expire.
    while True:
        assignment = assignment_claim(campaign=campaign, user=annotator1)
        assert assignment is not None
        if assignment.is_gold:
            break
        submit_answer(
            campaign, assignment, annotator1, f"key-a-{assignment.task_id:04d}", full_answer(assignment, annotator1)
        )
    Assignment.objects.filter(pk=assignment.pk).update(lease_expires_at=timezone.now() - timezone.timedelta(hours=1))
    campaign.gold_rate = 0
    campaign.save()
    taken = []
    while (other := assignment_claim(campaign=campaign, user=annotator2)) is not None:
        assert other.pk != assignment.pk and not other.is_gold
        taken.append(other.pk)
        submit_answer(campaign, other, annotator2, f"key-b-{other.task_id:04d}", full_answer(other, annotator2))
    assert len(taken) == 4
    # Its owner resumes it.
    assert assignment_claim(campaign=campaign, user=annotator1).pk == assignment.pk


def test_skipped_gold_task_is_not_offered_again(researcher, annotator1):
    campaign = gold_campaign(researcher, [annotator1], items=4, gold=2, rate=0.5, raters_per_item=1)
    while not (assignment := assignment_claim(campaign=campaign, user=annotator1)).is_gold:
        submit_answer(
            campaign, assignment, annotator1, f"key-s-{assignment.task_id:04d}", full_answer(assignment, annotator1)
        )
    assignment_skip(assignment=assignment, user=annotator1, reason="other")
    following = assignment_claim(campaign=campaign, user=annotator1)
    assert following is not None and following.task_id != assignment.task_id


def test_outside_the_pool_no_gold_slot_is_appended(researcher, annotator1, outsider):
    campaign = gold_campaign(researcher, [annotator1], items=2, gold=2, rate=0.5)
    task = Task.objects.filter(campaign=campaign, is_gold=True).first()
    with pytest.raises(slots.NotInPool):
        slots.slot_personal_lease(pool=CAMPAIGN_SLOTS, campaign=campaign, task=task, user=outsider)
    assert not Assignment.objects.filter(task=task).exists()


def test_create_campaign_command_sets_the_gold_rate(researcher, annotator1):
    dataset = make_dataset("cmd gold", owner=researcher, items=3, systems=2)
    GoldItem.objects.create(item=Item.objects.get(dataset=dataset, position=0), expected={})
    call_command("create_campaign", "gold pilot", "--dataset", "cmd gold", "--gold-rate", "0.25", stdout=io.StringIO())
    campaign = Campaign.objects.get(name="gold pilot")
    assert campaign.gold_rate == 0.25
    assert Task.objects.filter(campaign=campaign, is_gold=True).count() == 1
    with pytest.raises(CommandError, match=r"gold rate must be between 0 and 0\.5"):
        call_command("create_campaign", "too much", "--dataset", "cmd gold", "--gold-rate", "0.7")
    assert not Campaign.objects.filter(name="too much").exists()


def test_handing_out_gold_costs_a_few_queries(claim_path, researcher, annotator1, django_assert_max_num_queries):
    campaign = gold_campaign(researcher, [annotator1], items=4, gold=2, rate=0.5, raters_per_item=1)
    while not gold_is_due(campaign=campaign, user_id=annotator1.pk, handed_out=0):
        campaign.shuffle_seed += "x"
    campaign.save()
    # The state read, the gold task, the pool check, the slot number, the insert (in a savepoint) and the read back.
    with django_assert_max_num_queries(9):
        gold = assignment_claim(campaign=campaign, user=annotator1)
    assert gold is not None and gold.is_gold
    # Resuming costs one read more than in a campaign without gold.
    with CaptureQueriesContext(connection) as with_gold:
        assert assignment_claim(campaign=campaign, user=annotator1).pk == gold.pk
    plain = make_campaign(make_dataset("plain", owner=researcher, items=2, systems=2), [annotator1], name="plain")
    assert assignment_claim(campaign=plain, user=annotator1) is not None
    with CaptureQueriesContext(connection) as without_gold:
        assert assignment_claim(campaign=plain, user=annotator1) is not None
    assert len(with_gold) == len(without_gold) + 1

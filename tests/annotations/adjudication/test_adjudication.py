"""Adjudication: a dispute is found when a task's last counting rating arrives, once, even when the last raters
submit together; an adjudicator records final values beside the raw ratings, which stay as they were."""

import threading
import uuid

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import IntegrityError, connections, transaction

from annotations.adjudication.selectors import dispute_queue, dispute_view
from annotations.adjudication.services import (
    AdjudicationError,
    adjudication_rule_set,
    campaign_disputes_find,
    dispute_find,
    dispute_resolve,
)
from annotations.campaigns.claims import assignment_claim
from annotations.campaigns.submissions import submission_create
from annotations.campaigns.tasks import task_candidates
from annotations.models import Adjudication, AdjudicationRule, Aspect, Dispute, Rating, Task
from annotations.quality.services import rater_exclude
from tests.annotate.factories import disputed_campaign, full_answer, make_campaign, make_dataset, rate_all

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def campaign(researcher, annotators, adjudicator):  # type: ignore[no-untyped-def]
    """Two tasks of two answers each, three raters per task; factuality disputed beyond a spread of 1."""
    return disputed_campaign(make_dataset(owner=researcher, items=2, systems=2), annotators, adjudicator)


def test_no_dispute_before_the_last_counting_rating(campaign, annotators):  # type: ignore[no-untyped-def]
    rate_all(campaign, annotators[0], value=0)
    rate_all(campaign, annotators[1], value=3)
    assert not Dispute.objects.exists()  # 2 of 3 ratings: a spread of 3 already, but not every rater has spoken


def test_the_last_rating_finds_the_dispute_with_each_spread(campaign, annotators):  # type: ignore[no-untyped-def]
    rate_all(campaign, annotators[0], value=0)
    rate_all(campaign, annotators[1], value=3)
    rate_all(campaign, annotators[2], value=2)
    factuality = Aspect.objects.get(dataset=campaign.dataset, name="factuality")
    disputes = list(Dispute.objects.order_by("task__position"))
    assert [d.task.position for d in disputes] == [0, 1]
    for dispute in disputes:
        # factuality 0, 3, 2: spread 3 > 1 on both answers; amount_info is 0 for everyone (or N/A): no spread.
        assert {(e["aspect_id"], e["spread"]) for e in dispute.spreads} == {(factuality.pk, 3.0)}
        assert len(dispute.spreads) == 2
        assert dispute.resolved_at is None and not dispute.preference_split


def test_agreement_within_the_spread_is_no_dispute(campaign, annotators):  # type: ignore[no-untyped-def]
    for user, value in zip(annotators, (2, 3, 3), strict=True):
        rate_all(campaign, user, value=value)
    assert not Dispute.objects.exists()  # spread 1 is not beyond 1


def test_preference_split_is_a_dispute_when_the_rule_says_so(researcher, annotators):  # type: ignore[no-untyped-def]
    made = make_campaign(make_dataset(owner=researcher, items=1, systems=2), annotators, raters_per_item=3)
    adjudication_rule_set(campaign=made, max_spread=None, preference_splits=True)
    preferred = []
    for index, user in enumerate(annotators):
        assignment = assignment_claim(campaign=made, user=user)
        assert assignment is not None
        # Each rater sees the answers in an order of their own: pick by answer, alternating between the two.
        shown = sorted(task_candidates(assignment=assignment, user_id=user.pk), key=lambda c: c.response_id)
        result = submission_create(
            campaign=made, task_id=assignment.task_id, user=user, idempotency_key=uuid.uuid4().hex,
            answer=full_answer(assignment, user, value=2, preference=shown[index % 2].number),
        )  # fmt: skip
        preferred.append(result.submission.preferred_response_id)
    assert len(set(preferred)) == 2, "the raters were meant to split"
    dispute = Dispute.objects.get()
    assert dispute.preference_split and dispute.spreads == []


def test_excluded_raters_do_not_count(campaign, annotators, researcher):  # type: ignore[no-untyped-def]
    rate_all(campaign, annotators[0], value=0)
    rate_all(campaign, annotators[1], value=3)
    rate_all(campaign, annotators[2], value=3)
    assert Dispute.objects.count() == 2
    from annotations.models import Rater

    rater_exclude(
        rater=Rater.objects.get(dataset=campaign.dataset, user=annotators[0]), reason="careless", by=researcher,
        campaign=campaign,
    )  # fmt: skip
    # The rule is applied again: two counting raters of three are not enough, and they agree; the open disputes go.
    assert campaign_disputes_find(campaign=campaign) == 0


def test_excluding_and_revoking_decide_the_disputes_again_at_once(campaign, annotators, researcher):  # type: ignore[no-untyped-def]
    from annotations.models import Rater
    from annotations.quality.services import rater_exclusion_revoke

    rate_all(campaign, annotators[0], value=0)
    rate_all(campaign, annotators[1], value=3)
    rate_all(campaign, annotators[2], value=3)
    assert Dispute.objects.count() == 2
    rater = Rater.objects.get(dataset=campaign.dataset, user=annotators[0])
    exclusion = rater_exclude(rater=rater, reason="careless", by=researcher, campaign=campaign)
    assert Dispute.objects.count() == 0  # no find_disputes run: the exclusion itself decided again
    rater_exclusion_revoke(exclusion=exclusion, by=researcher)
    assert Dispute.objects.filter(campaign=campaign).count() == 2


def test_resolve_stores_values_beside_the_raw_ratings(campaign, annotators, adjudicator):  # type: ignore[no-untyped-def]
    for user, value in zip(annotators, (0, 3, 2), strict=True):
        rate_all(campaign, user, value=value)
    raw_before = sorted(Rating.objects.values_list("id", "raw", "value"))
    dispute = Dispute.objects.order_by("task__position").first()
    assert dispute is not None
    values = {(e["response_id"], e["aspect_id"]): "2" for e in dispute.spreads}
    dispute_resolve(dispute=dispute, adjudicator=adjudicator, values=values, reason="two raters of three said 2-3")
    dispute.refresh_from_db()
    assert dispute.resolved_at is not None and dispute.resolved_by == adjudicator
    assert sorted(Adjudication.objects.values_list("value", "raw")) == [(2.0, 2), (2.0, 2)]
    assert sorted(Rating.objects.values_list("id", "raw", "value")) == raw_before
    with pytest.raises(AdjudicationError, match="settled already"):
        dispute_resolve(dispute=dispute, adjudicator=adjudicator, values=values, reason="again")
    assert [row.dispute.pk for row in dispute_queue(adjudicator)] != [dispute.pk]
    assert [row.dispute.pk for row in dispute_queue(adjudicator, resolved=True)] == [dispute.pk]


@pytest.mark.parametrize(
    ("token", "message"),
    [("7", "must be a value of its scale"), ("1.5", "must be a value of its scale"), ("", "Choose a final value")],
)
def test_resolve_refuses_values_off_the_scale_and_writes_nothing(  # type: ignore[no-untyped-def]
    campaign, annotators, adjudicator, token, message
):
    for user, value in zip(annotators, (0, 3, 2), strict=True):
        rate_all(campaign, user, value=value)
    dispute = Dispute.objects.order_by("task__position").first()
    assert dispute is not None
    first, second = ((e["response_id"], e["aspect_id"]) for e in dispute.spreads)
    with pytest.raises(AdjudicationError, match=message):
        dispute_resolve(dispute=dispute, adjudicator=adjudicator, values={first: "1", second: token}, reason="r")
    assert not Adjudication.objects.exists()
    dispute.refresh_from_db()
    assert dispute.resolved_at is None


def test_resolve_needs_a_reason(campaign, annotators, adjudicator):  # type: ignore[no-untyped-def]
    for user, value in zip(annotators, (0, 3, 2), strict=True):
        rate_all(campaign, user, value=value)
    dispute = Dispute.objects.first()
    assert dispute is not None
    values = {(e["response_id"], e["aspect_id"]): "1" for e in dispute.spreads}
    with pytest.raises(AdjudicationError, match="Reason"):
        dispute_resolve(dispute=dispute, adjudicator=adjudicator, values=values, reason="   ")


def test_the_database_refuses_a_second_adjudication_and_a_value_off_the_scale(  # type: ignore[no-untyped-def]
    campaign, annotators, adjudicator
):
    for user, value in zip(annotators, (0, 3, 2), strict=True):
        rate_all(campaign, user, value=value)
    dispute = Dispute.objects.first()
    assert dispute is not None
    entry = dispute.spreads[0]
    common = {"dispute": dispute, "task": dispute.task, "response_id": entry["response_id"],
              "aspect_id": entry["aspect_id"], "scale_min": 0, "scale_max": 3}  # fmt: skip
    Adjudication.objects.create(value=1, raw=1, **common)
    with pytest.raises(IntegrityError), transaction.atomic():
        Adjudication.objects.create(value=2, raw=2, **common)
    other = {**common, "response_id": dispute.spreads[1]["response_id"]}
    with pytest.raises(IntegrityError), transaction.atomic():
        Adjudication.objects.create(value=4, raw=4, **other)


def test_dispute_view_shows_each_rater_by_pseudonym(campaign, annotators):  # type: ignore[no-untyped-def]
    for user, value in zip(annotators, (0, 3, 2), strict=True):
        rate_all(campaign, user, value=value)
    dispute = Dispute.objects.order_by("task__position").first()
    assert dispute is not None
    view = dispute_view(dispute)
    assert len(view.raters) == 3
    assert all(r.pseudonym.startswith("annotator-") for r in view.raters)
    assert {tuple(sorted(cell.rater_values)) for cell in view.cells} == {(0, 2, 3)}


def test_command_finds_disputes_of_a_campaign_that_ran_without_a_rule(researcher, annotators):  # type: ignore[no-untyped-def]
    made = make_campaign(make_dataset(owner=researcher, items=2, systems=2), annotators, raters_per_item=3)
    for user, value in zip(annotators, (0, 3, 2), strict=True):
        rate_all(made, user, value=value)
    assert not Dispute.objects.exists()
    AdjudicationRule.objects.create(campaign=made, max_spread=2)
    call_command("find_disputes", str(made.pk))
    assert Dispute.objects.filter(campaign=made).count() == 2
    call_command("find_disputes", str(made.pk))  # safe to run twice
    assert Dispute.objects.filter(campaign=made).count() == 2


def test_the_last_two_raters_at_once_find_one_dispute(campaign, annotators):  # type: ignore[no-untyped-def]
    rate_all(campaign, annotators[0], value=0)
    task = Task.objects.filter(campaign=campaign).order_by("position").first()
    assert task is not None
    leases = {}
    for user in annotators[1:]:
        assignment = assignment_claim(campaign=campaign, user=user)
        assert assignment is not None and assignment.task_id == task.pk
        leases[user.pk] = assignment
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def submit(user: User, value: float) -> None:
        try:
            barrier.wait()
            submission_create(
                campaign=campaign, task_id=task.pk, user=user, idempotency_key=uuid.uuid4().hex,
                answer=full_answer(leases[user.pk], user, value=value),
            )  # fmt: skip
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=submit, args=(u, v)) for u, v in zip(annotators[1:], (3, 3), strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert Dispute.objects.filter(task=task).count() == 1
    dispute_find(task_id=task.pk)
    assert Dispute.objects.filter(task=task).count() == 1

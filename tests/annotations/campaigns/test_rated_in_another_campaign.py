"""Two campaigns on one dataset share the annotator's rater, and a rater keeps one rating per answer and aspect. A
task whose answer the annotator already rated in the other campaign can never be submitted, so the claim never hands
it out, an open lease on it is given back on "next", and the submit refuses it: one rule for all three, on every
claim path the database offers (the one-statement claim on Postgres and the portable one everywhere), on the pages
and in the annotator API."""

from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse

from annotations import slots
from annotations.campaigns.answers import TaskAnswer
from annotations.campaigns.claims import assignment_claim
from annotations.campaigns.errors import AlreadyRated
from annotations.campaigns.submissions import submission_create
from annotations.campaigns.tasks import task_candidates
from annotations.models import Assignment, AssignmentStatus, Campaign, Rating
from annotations.rubrics.task_sheet import campaign_scales
from annotations.slots import claiming
from annotations.slots.campaign_slots import CAMPAIGN_SLOTS
from tests.annotate.factories import make_campaign, make_dataset
from tests.annotate.test_annotator_api import token_client
from tests.conftest import CAST_PASSWORD

pytestmark = pytest.mark.django_db

CLAIM_PATHS = [claiming._claim_portable]
if connection.vendor == "postgresql":
    CLAIM_PATHS.append(claiming._claim_in_one_statement)


def _path_claim(path: Any) -> Any:
    def claim(campaign: Campaign, user: Any) -> Assignment | None:
        taken = path(pool=CAMPAIGN_SLOTS, campaign=campaign, user=user, now=None, details=slots.NO_DETAILS)
        return taken.slot if taken is not None else None

    claim.__name__ = path.__name__
    return claim


def _service_claim(campaign: Campaign, user: Any) -> Assignment | None:
    return assignment_claim(campaign=campaign, user=user)


@pytest.fixture(params=[*map(_path_claim, CLAIM_PATHS), _service_claim], ids=lambda claim: claim.__name__)
def claim(request: Any) -> Any:
    return request.param


def two_campaigns(owner: Any, people: list[Any], *, items: int) -> tuple[Campaign, Campaign]:
    dataset = make_dataset("shared", owner=owner, items=items, systems=2)
    first = make_campaign(dataset, people, name="first", raters_per_item=1)
    second = make_campaign(dataset, people, name="second", raters_per_item=1)
    return first, second


def full_answer(slot: Assignment, user: Any) -> TaskAnswer:
    slot = Assignment.objects.select_related("task__turn", "campaign").get(pk=slot.pk)
    numbers = [c.number for c in task_candidates(assignment=slot, user_id=user.pk)]
    scales = campaign_scales(slot.campaign)
    return TaskAnswer(
        ratings={(n, s.index): s.aspect.min_value for n in numbers for s in scales}, preference=1, rationale="why"
    )


def submit(slot: Assignment, user: Any, key: str) -> Any:
    campaign = Campaign.objects.get(pk=slot.campaign_id)
    return submission_create(
        campaign=campaign, task_id=slot.task_id, user=user, idempotency_key=key, answer=full_answer(slot, user)
    )


def turn_of(slot: Assignment) -> int:
    return Assignment.objects.get(pk=slot.pk).task.turn_id


def test_claim_never_hands_out_an_answer_rated_in_the_other_campaign(claim, researcher, annotator1) -> None:  # type: ignore[no-untyped-def]
    first, second = two_campaigns(researcher, [annotator1], items=3)
    rated = claim(first, annotator1)
    submit(rated, annotator1, "rated-in-first-1")
    handed_out: list[int] = []
    while (slot := claim(second, annotator1)) is not None:
        assert turn_of(slot) != turn_of(rated), "a task the annotator cannot submit was handed out"
        submit(slot, annotator1, f"second-{len(handed_out)}".ljust(12, "0"))  # each one goes through
        handed_out.append(turn_of(slot))
    assert len(handed_out) == 2  # "next" progressed through every other task and then stopped
    counts = slots.slot_counts(pool=CAMPAIGN_SLOTS, campaign=second, user=annotator1)
    assert (counts.done, counts.leased, counts.available) == (2, 0, 0)


def test_a_lease_that_became_unsubmittable_is_given_back(claim, researcher, annotator1) -> None:  # type: ignore[no-untyped-def]
    first, second = two_campaigns(researcher, [annotator1], items=2)
    held_first = claim(first, annotator1)
    held_second = claim(second, annotator1)
    # Both campaigns hand out their first task of their own order; make the second one hold the same turn.
    if turn_of(held_second) != turn_of(held_first):
        slots.slot_release(pool=CAMPAIGN_SLOTS, slot_id=held_second.pk, user=annotator1)
        same = Assignment.objects.get(campaign=second, task__turn_id=turn_of(held_first))
        Assignment.objects.filter(pk=same.pk).update(
            annotator=annotator1, status=AssignmentStatus.LEASED, leased_at=held_second.leased_at,
            lease_expires_at=held_second.lease_expires_at,
        )  # fmt: skip
        held_second = Assignment.objects.get(pk=same.pk)
    submit(held_first, annotator1, "first-held-01")
    stored = Rating.objects.filter(rater__user=annotator1).count()
    with pytest.raises(AlreadyRated):
        submit(held_second, annotator1, "second-held1")
    assert Rating.objects.filter(rater__user=annotator1).count() == stored  # nothing of the refused answer
    moved_on = claim(second, annotator1)
    assert moved_on is not None and turn_of(moved_on) != turn_of(held_first)
    assert Assignment.objects.get(pk=held_second.pk).status == AssignmentStatus.FREE


def _login(user: Any) -> Client:
    client = Client()
    assert client.login(username=user.username, password=CAST_PASSWORD)
    return client


def _form(slot: Assignment, user: Any, key: str) -> dict[str, str]:
    answer = full_answer(slot, user)
    data = {"idempotency_key": key, "preference": "1", "rationale": "why"}
    data.update({f"r-{n}-{i}": str(value) for (n, i), value in answer.ratings.items()})
    return data


def test_task_page_moves_on_after_a_refused_answer(researcher, annotator1) -> None:  # type: ignore[no-untyped-def]
    first, second = two_campaigns(researcher, [annotator1], items=1)
    held_first = assignment_claim(campaign=first, user=annotator1)
    held_second = assignment_claim(campaign=second, user=annotator1)
    assert held_first is not None and held_second is not None  # one item: the same answers in both
    client = _login(annotator1)
    submitted = client.post(
        reverse("annotate-submit", args=[first.pk, held_first.task_id]), _form(held_first, annotator1, "page-first-1")
    )
    assert submitted.status_code == 303
    refused = client.post(
        reverse("annotate-submit", args=[second.pk, held_second.task_id]),
        _form(held_second, annotator1, "page-second1"),
        follow=True,
    )
    body = refused.content.decode()
    assert "already rated one of these answers in another campaign" in body
    assert "There are no more tasks for you in this campaign" in body  # not the same task again
    assert client.post(reverse("annotate-next", args=[second.pk])).status_code == 303
    assert assignment_claim(campaign=second, user=annotator1) is None


def test_annotator_api_never_hands_out_and_moves_on(researcher, annotator1) -> None:  # type: ignore[no-untyped-def]
    first, second = two_campaigns(researcher, [annotator1], items=2)
    client = token_client(annotator1)

    def body(task: dict[str, Any], key: str) -> dict[str, Any]:
        aspects = [a["name"] for a in task["aspects"]]
        ratings = {str(c["number"]): dict.fromkeys(aspects, 1) for c in task["candidates"]}
        return {"idempotency_key": key, "ratings": ratings, "preference": 1, "rationale": "why"}

    def next_task(campaign: Campaign) -> dict[str, Any] | None:
        response = client.post(reverse("api-annotate-next", args=[campaign.pk]))
        assert response.status_code in (200, 204)
        return response.json() if response.status_code == 200 else None

    def submit_task(campaign: Campaign, task: dict[str, Any], key: str) -> Any:
        return client.post(reverse("api-annotate-submit", args=[campaign.pk, task["task"]]), body(task, key), "json")

    in_first = next_task(first)
    assert in_first is not None
    assert submit_task(first, in_first, "api-first-01").status_code == 201
    in_second = next_task(second)
    assert in_second is not None and in_second["prompt"] != in_first["prompt"]
    assert submit_task(second, in_second, "api-secnd-01").status_code == 201
    assert next_task(first) is None and next_task(second) is None  # each rated the other's remaining task


def test_annotator_api_refuses_an_unsubmittable_lease_and_moves_on(researcher, annotator1) -> None:  # type: ignore[no-untyped-def]
    first, second = two_campaigns(researcher, [annotator1], items=1)
    client = token_client(annotator1)
    tasks = [client.post(reverse("api-annotate-next", args=[c.pk])).json() for c in (first, second)]
    answers = []
    for campaign, task, key in ((first, tasks[0], "api-held-001"), (second, tasks[1], "api-held-002")):
        aspects = [a["name"] for a in task["aspects"]]
        ratings = {str(c["number"]): dict.fromkeys(aspects, 1) for c in task["candidates"]}
        url = reverse("api-annotate-submit", args=[campaign.pk, task["task"]])
        payload = {"idempotency_key": key, "ratings": ratings, "preference": 1, "rationale": "why"}
        answers.append(client.post(url, payload, format="json"))
    assert answers[0].status_code == 201
    assert answers[1].status_code == 409 and "another campaign" in answers[1].json()["detail"]
    assert client.post(reverse("api-annotate-next", args=[second.pk])).status_code == 204  # not the same task again

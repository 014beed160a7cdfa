"""A crowd worker's quota is checked in the transaction that stores the answer, on every path: a stale task page
sent after its lease expired and went to someone else (the reclaim), the form, and the annotator API."""

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotations.campaigns.claims import assignment_claim, assignment_skip
from annotations.models import Assignment, AssignmentStatus, SkipReason, Submission
from annotations.recruitment.models import Platform
from annotations.recruitment.selectors import worker_tasks_left
from annotations.recruitment.services import link_create
from tests.annotate.factories import make_campaign, make_dataset
from tests.annotate.test_recruitment import joined_worker, next_task, submit_current
from tests.annotate.test_views import complete_form

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_counters")]


@pytest.fixture
def campaign(researcher, annotator1, annotator2):
    dataset = make_dataset(owner=researcher, items=6, systems=2)
    return make_campaign(dataset, [annotator1, annotator2], raters_per_item=2)


@pytest.fixture
def link(campaign, researcher):
    return link_create(
        campaign=campaign,
        platform=Platform.PROLIFIC,
        created_by=researcher,
        completion_code="C0DE42",
        tasks_per_worker=3,
    )


def lease_token(client: Client, campaign, slot) -> str:  # type: ignore[no-untyped-def]
    page = client.get(reverse("annotate-task", args=[campaign.pk, slot.task_id])).content.decode()
    return page.split('name="lease" value="', 1)[1].split('"', 1)[0]


def submitted(campaign, user) -> int:  # type: ignore[no-untyped-def]
    return Assignment.objects.filter(campaign=campaign, annotator=user, status=AssignmentStatus.SUBMITTED).count()


def test_quota_through_reclaim_cannot_store_one_more(link, campaign, annotator1, annotator2):
    client, worker = joined_worker(link)
    next_task(client, campaign)
    stale = Assignment.objects.get(campaign=campaign, annotator=worker, status=AssignmentStatus.LEASED)
    stale_form = complete_form(
        stale, worker, idempotency_key="stale-page-0001", lease=lease_token(client, campaign, stale)
    )
    # The task's other slot is taken; the worker's lease expires and goes to someone else too, so the task is full
    # while the worker does their three tasks; afterwards the other lease is given up (a skip), leaving a free slot
    # the stale page could reclaim.
    other = assignment_claim(campaign=campaign, user=annotator2)
    assert other.task_id == stale.task_id
    Assignment.objects.filter(pk=stale.pk).update(lease_expires_at=timezone.now() - timedelta(minutes=1))
    assert assignment_claim(campaign=campaign, user=annotator1).pk == stale.pk
    for _ in range(3):
        next_task(client, campaign)
        assert submit_current(client, campaign, worker).status_code == 303
    assignment_skip(assignment=other, user=annotator2, reason=SkipReason.values[0])
    assert submitted(campaign, worker) == 3 and worker_tasks_left(campaign, worker) == 0
    response = client.post(reverse("annotate-submit", args=[campaign.pk, stale.task_id]), stale_form)
    assert response.status_code == 303 and response["Location"] == reverse("crowd-done")
    assert submitted(campaign, worker) == 3
    assert Submission.objects.filter(assignment__annotator=worker).count() == 3
    free = Assignment.objects.filter(task_id=stale.task_id, status=AssignmentStatus.FREE)
    assert free.count() == 1  # the slot the stale page would have taken is still open to others


@pytest.mark.parametrize("path", ["form", "api"])
def test_a_lease_held_past_the_quota_stores_nothing(link, campaign, path):
    link.tasks_per_worker = 4
    link.save()
    client, worker = joined_worker(link)
    for _ in range(3):
        next_task(client, campaign)
        submit_current(client, campaign, worker)
    next_task(client, campaign)
    held = Assignment.objects.get(campaign=campaign, annotator=worker, status=AssignmentStatus.LEASED)
    link.tasks_per_worker = 3  # the researcher lowers the quota while the fourth task is open
    link.save()
    if path == "form":
        response = submit_current(client, campaign, worker)
        assert response.status_code == 303 and response["Location"] == reverse("crowd-done")
    else:
        ratings = {"1": {"factuality": 2, "amount_info": "NA"}, "2": {"factuality": 2, "amount_info": "NA"}}
        body = {"idempotency_key": "api-over-quota", "ratings": ratings, "preference": 1, "rationale": "x"}
        url = reverse("api-annotate-submit", args=[campaign.pk, held.task_id])
        response = client.post(url, body, content_type="application/json")
        assert response.status_code == 409 and "every task" in response.json()["detail"]
    assert submitted(campaign, worker) == 3
    assert Assignment.objects.get(pk=held.pk).status == AssignmentStatus.FREE  # back to the pool

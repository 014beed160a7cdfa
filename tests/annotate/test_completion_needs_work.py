"""Completing a crowd session means work: a worker who skips every task (or finds none) gets the link's
no-more-tasks code, never the completion code, the Prolific redirect or MTurk's automatic submission; skips are
capped per session, counted, and shown in the payment export."""

import csv
import io

import pytest
from django.test import Client
from django.urls import reverse

from annotations.models import Assignment, AssignmentStatus, Skip
from annotations.recruitment.models import CrowdSession, CrowdWorker, Platform
from annotations.recruitment.services import link_create
from tests.annotate.factories import make_campaign, make_dataset
from tests.annotate.test_recruitment import join, joined_worker, mturk_url, next_task, prolific_url, submit_current
from tests.conftest import login

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_counters")]

TASKS = 4
PROLIFIC_COMPLETION = "https://app.prolific.com/submissions/complete?cc=PAYME-42"


@pytest.fixture
def campaign(researcher, annotator1):
    return make_campaign(make_dataset(owner=researcher, items=TASKS), [annotator1], raters_per_item=1)


def skip_current(client: Client, campaign, user):  # type: ignore[no-untyped-def]
    slot = Assignment.objects.get(campaign=campaign, annotator=user, status=AssignmentStatus.LEASED)
    return client.post(reverse("annotate-skip", args=[campaign.pk, slot.task_id]), {"reason": "not_qualified"})


def skip_everything(client: Client, campaign, user):  # type: ignore[no-untyped-def]
    response = next_task(client, campaign)
    for _ in range(TASKS):
        response = skip_current(client, campaign, user)
    return response


def joined(link, campaign):  # type: ignore[no-untyped-def]
    """A Prolific worker who joined through the link and holds their first task: their client and account."""
    client, worker = joined_worker(link)
    next_task(client, campaign)
    return client, worker


@pytest.mark.parametrize("platform", [Platform.PROLIFIC, Platform.MTURK])
def test_zero_work_completion_is_refused(campaign, researcher, platform):
    link = link_create(
        campaign=campaign,
        platform=platform,
        created_by=researcher,
        completion_code="PAYME-42",
        completion_url="https://app.prolific.com/submissions/complete?cc=PAYME-42"
        if platform == Platform.PROLIFIC
        else "",
        skips_per_session=TASKS,
    )
    client = Client()
    url = prolific_url(link) if platform == Platform.PROLIFIC else mturk_url(link, turkSubmitTo="https://www.mturk.com")
    assert join(client, url).status_code == 303
    worker = CrowdWorker.objects.get().user
    last = skip_everything(client, campaign, worker)
    assert last.status_code == 303 and last["Location"] == reverse("crowd-done")
    session = CrowdSession.objects.get()
    assert session.completed_at is None and session.ran_out_at is not None
    page = client.get(reverse("crowd-done"))
    body = page.content.decode()
    assert page.status_code == 200
    assert "PAYME-42" not in body and "NOTASKS" in body  # the code the researcher recognises
    assert 'http-equiv="refresh"' not in body and "prolific.com" not in body  # no redirect to Prolific
    assert "externalSubmit" not in body and "crowd_submit.js" not in body  # no MTurk auto-submit
    # The payment export counts the skips and the session that ran out, and no completed session.
    csv_body = login(researcher).get(reverse("campaign-payment-csv", args=[campaign.pk])).content.decode()
    row = next(csv.DictReader(io.StringIO(csv_body)))
    assert (row["tasks_done"], row["sessions_completed"], row["sessions_out_of_tasks"], row["skips"]) == (
        "0",
        "0",
        "1",
        str(TASKS),
    )


def test_running_out_after_the_minimum_completes(campaign, researcher):
    link = link_create(
        campaign=campaign, platform=Platform.PROLIFIC, created_by=researcher, completion_code="PAYME-42",
        min_tasks_to_complete=2, skips_per_session=TASKS,
    )  # fmt: skip
    client, worker = joined(link, campaign)
    submit_current(client, campaign, worker)
    submit_current(client, campaign, worker)
    skip_current(client, campaign, worker)
    last = skip_current(client, campaign, worker)
    assert last["Location"] == reverse("crowd-done")
    assert CrowdSession.objects.get().completed_at is not None
    assert "PAYME-42" in client.get(reverse("crowd-done")).content.decode()


def test_running_out_below_the_minimum_gets_the_no_tasks_code(campaign, researcher):
    link = link_create(
        campaign=campaign, platform=Platform.PROLIFIC, created_by=researcher, completion_code="PAYME-42",
        min_tasks_to_complete=3, skips_per_session=TASKS, no_tasks_code="OUT-OF-TASKS",
    )  # fmt: skip
    client, worker = joined(link, campaign)
    submit_current(client, campaign, worker)
    submit_current(client, campaign, worker)
    skip_current(client, campaign, worker)
    assert skip_current(client, campaign, worker)["Location"] == reverse("crowd-done")
    body = client.get(reverse("crowd-done")).content.decode()
    assert "OUT-OF-TASKS" in body and "PAYME-42" not in body


def test_skips_are_capped_per_session(campaign, researcher):
    link = link_create(campaign=campaign, platform=Platform.PROLIFIC, created_by=researcher, skips_per_session=2)
    client, worker = joined(link, campaign)
    skip_current(client, campaign, worker)
    skip_current(client, campaign, worker)
    refused = skip_current(client, campaign, worker)
    held = Assignment.objects.get(campaign=campaign, annotator=worker, status=AssignmentStatus.LEASED)
    assert refused["Location"] == reverse("annotate-task", args=[campaign.pk, held.task_id])
    assert Skip.objects.filter(annotator=worker).count() == 2
    page = client.get(refused["Location"]).content.decode()
    assert "You have used every skip this session allows" in page

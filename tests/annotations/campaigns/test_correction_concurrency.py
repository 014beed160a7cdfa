"""Ten corrections of one submitted answer at once, each on its own database connection through the whole request
stack: every one is applied in turn, none is a 500, and the history holds each replaced version once, in order."""

import itertools
from functools import partial

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from annotations.campaigns.claims import assignment_claim
from annotations.campaigns.tasks import task_candidates
from annotations.models import Rating, Submission, SubmissionRevision
from tests.annotate.factories import full_answer, make_campaign, make_dataset, submit_answer
from tests.concurrency import statuses_at_once

pytestmark = pytest.mark.django_db(transaction=True)

CORRECTIONS = 10


def test_ten_parallel_corrections_apply_one_after_another_without_a_500():
    owner = User.objects.create_user("owner", is_staff=True)
    rater = User.objects.create_user("rater", password="pw-for-the-test")
    campaign = make_campaign(make_dataset(owner=owner, items=1, systems=2), [rater], raters_per_item=1)
    assignment = assignment_claim(campaign=campaign, user=rater)
    submit_answer(campaign, assignment, rater, "first-answer-key", full_answer(assignment, rater, value=1))
    numbers = [c.number for c in task_candidates(assignment=assignment, user_id=rater.pk)]
    url = reverse("annotate-submit", args=[campaign.pk, assignment.task_id])
    clients = []
    for _ in range(CORRECTIONS):
        client = Client(raise_request_exception=False)
        assert client.login(username="rater", password="pw-for-the-test")
        clients.append(client)

    def correction(index: int) -> dict[str, str]:
        form = {"idempotency_key": f"correction-key-{index:02d}", "preference": "1", "rationale": f"version {index}"}
        for number in numbers:
            form[f"r-{number}-1"] = "3"
            form[f"r-{number}-2"] = "na" if number == 1 else "0"
        return form

    statuses = statuses_at_once(
        [partial(client.post, url, correction(index)) for index, client in enumerate(clients)], timeout=120
    )
    assert sorted(statuses) == [303] * CORRECTIONS, statuses
    submission = Submission.objects.get(assignment=assignment)
    assert submission.version == 1 + CORRECTIONS
    revisions = list(SubmissionRevision.objects.filter(submission=submission).order_by("version"))
    assert [r.version for r in revisions] == list(range(1, CORRECTIONS + 1))
    for earlier, later in itertools.pairwise(revisions):
        assert later.submitted_at == earlier.replaced_at  # each version was written when the one before was replaced
    assert submission.revised_at == revisions[-1].replaced_at
    assert Rating.objects.filter(rater__user=rater).count() == len(numbers) * 2  # rewritten in place, never added

"""Many reviewers, real threads, one database connection each: no answer may ever get more than N reviewers."""

import threading
from collections import Counter

import pytest
from django.contrib.auth.models import User

from judging.factscore import services
from judging.factscore.models import FactReviewStatus
from tests.annotations.campaigns.test_concurrency import _run_threads

# Runs on both databases CI uses, like tests/annotations/campaigns/test_concurrency.py.
pytestmark = pytest.mark.django_db(transaction=True)

REVIEWERS = 8


def test_concurrent_reviewers_fill_every_answer_exactly_n_times(run):  # type: ignore[no-untyped-def]
    people = [User.objects.create_user(f"reviewer{i}") for i in range(REVIEWERS)]
    campaign = services.fact_review_campaign_create(name="race", run=run, raters_per_answer=3, annotators=people)
    submitted: Counter[int] = Counter()
    lock = threading.Lock()

    def review(index: int) -> None:
        user = people[index]
        while (assignment := services.fact_review_claim(campaign=campaign, user=user)) is not None:
            labels = {fact.pk: "supported" for fact in services.reviewer_facts(assignment)}
            services.fact_review_submit(assignment=assignment, user=user, labels=labels, seconds_spent=1)
            with lock:
                submitted[assignment.task_id] += 1

    assert _run_threads(review, REVIEWERS) == []
    assert sorted(submitted.values()) == [3] * campaign.tasks.count()
    for task in campaign.tasks.all():
        reviewers = list(task.assignments.filter(status=FactReviewStatus.SUBMITTED).values_list("annotator", flat=True))
        assert len(reviewers) == 3 and len(set(reviewers)) == 3

"""A task never holds more than N + 1 ratings that count, after any chain of excluding, reopening and revoking.

The chain that used to break it, on a task with N = 1: rater A submits; A is excluded and their slot reopened,
B takes the replacement; B is excluded and reopened, C takes that replacement; revoking A and then B would leave
A, B and C counting, three ratings for N = 1."""

import uuid

import pytest
from django.contrib.auth.models import User

from annotations.campaigns.claims import assignment_claim
from annotations.models import Assignment, AssignmentStatus, Campaign, Rater, RaterExclusion
from annotations.quality.services import ExclusionError, rater_exclude, rater_exclusion_revoke
from tests.annotate.factories import full_answer, make_campaign, make_dataset, submit_answer

pytestmark = pytest.mark.django_db


def rate_one(campaign: Campaign, user: User) -> Assignment:
    campaign.annotators.add(user)
    assignment = assignment_claim(campaign=campaign, user=user)
    assert assignment is not None
    submit_answer(campaign, assignment, user, uuid.uuid4().hex, full_answer(assignment, user))
    return assignment


def counting(campaign: Campaign) -> int:
    excluded = set(RaterExclusion.objects.filter(revoked_at__isnull=True).values_list("rater__user_id", flat=True))
    submitted = Assignment.objects.filter(campaign=campaign, status=AssignmentStatus.SUBMITTED)
    return sum(1 for user_id in submitted.values_list("annotator_id", flat=True) if user_id not in excluded)


def exclude(campaign: Campaign, user: User, by: User) -> RaterExclusion:
    rater = Rater.objects.get(dataset=campaign.dataset, user=user)
    return rater_exclude(rater=rater, reason="checked", by=by, campaign=campaign, reopen_slots=True)


def test_exclude_reopen_revoke_chain_keeps_counting_ratings_within_n_plus_one(
    researcher, annotator1, annotator2, annotator3
):
    campaign = make_campaign(make_dataset(owner=researcher, items=1, systems=2), [], raters_per_item=1)
    rate_one(campaign, annotator1)
    first = exclude(campaign, annotator1, researcher)
    rate_one(campaign, annotator2)  # takes the replacement of annotator1's slot
    assert counting(campaign) == 1
    second = exclude(campaign, annotator2, researcher)
    rate_one(campaign, annotator3)  # nothing counted any more, so a replacement was due; annotator3 takes it
    assert counting(campaign) == 1
    rater_exclusion_revoke(exclusion=first, by=researcher)
    assert counting(campaign) == 2  # N + 1: the stated bound
    with pytest.raises(ExclusionError, match="more than 2 ratings that count"):
        rater_exclusion_revoke(exclusion=second, by=researcher)
    assert counting(campaign) == 2
    assert RaterExclusion.objects.get(pk=second.pk).revoked_at is None  # refused whole


def test_reopening_adds_no_replacement_where_n_ratings_still_count(researcher, annotator1, annotator2, annotator3):
    campaign = make_campaign(make_dataset(owner=researcher, items=1, systems=2), [], raters_per_item=1)
    rate_one(campaign, annotator1)
    first = exclude(campaign, annotator1, researcher)
    rate_one(campaign, annotator2)
    rater_exclusion_revoke(exclusion=first, by=researcher)  # annotator1 and annotator2 count: N + 1
    exclude(campaign, annotator2, researcher)  # annotator1 still counts: no replacement is due
    assert not Assignment.objects.filter(campaign=campaign, status=AssignmentStatus.FREE).exists()
    campaign.annotators.add(annotator3)
    assert assignment_claim(campaign=campaign, user=annotator3) is None
    assert counting(campaign) == 1

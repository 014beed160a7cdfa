"""Drafts: what an annotator has entered on a leased task is kept on the server, restored on the task page, and
dropped when the task is submitted or given up. A draft is never a rating."""

from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotations.campaigns.answers import MAX_TEXT_CHARS, MAX_VALUE_CHARS, TaskAnswer
from annotations.campaigns.claims import assignment_claim, assignment_skip
from annotations.campaigns.drafts import assignment_draft_save
from annotations.campaigns.errors import DraftInvalid, SubmissionInvalid
from annotations.campaigns.setup import campaign_annotator_remove
from annotations.campaigns.tasks import assignment_draft_values, leased_assignment, task_candidates
from annotations.models import Assignment, AssignmentDraft, Rating, Submission
from annotations.slots import NotInPool
from tests.annotate.factories import make_campaign, make_dataset, submit_answer
from tests.conftest import CAST_PASSWORD

pytestmark = pytest.mark.django_db

HALF = {"r-1-1": "3", "r-2-2": "na", "preference": "2", "rationale": "Candidate 2 cites its sources"}


@pytest.fixture
def campaign(researcher, annotator1, annotator2):  # type: ignore[no-untyped-def]
    return make_campaign(make_dataset(owner=researcher, items=2, systems=3), [annotator1, annotator2])


@pytest.fixture
def leased(campaign, annotator1) -> Assignment:  # type: ignore[no-untyped-def]
    return assignment_claim(campaign=campaign, user=annotator1)


def save(campaign, assignment, user, values) -> None:  # type: ignore[no-untyped-def]
    assignment_draft_save(campaign=campaign, task_id=assignment.task_id, user=user, values=values)


def full_answer(assignment: Assignment, user) -> TaskAnswer:  # type: ignore[no-untyped-def]
    ratings = {}
    for candidate in task_candidates(assignment=assignment, user_id=user.pk):
        ratings[(candidate.number, 1)] = 3.0
        ratings[(candidate.number, 2)] = 0.0
    return TaskAnswer(ratings=ratings, preference=1, rationale="all fine")


# --- the service --------------------------------------------------------------------------------------------------


def test_save_stores_the_values_and_is_not_a_rating(campaign, leased, annotator1):
    ratings_before = Rating.objects.count()
    save(campaign, leased, annotator1, HALF | {"comment": "", "none_appropriate": ""})
    draft = AssignmentDraft.objects.get(assignment=leased)
    assert draft.annotator_id == annotator1.pk
    assert draft.values == HALF  # empty fields are not kept
    assert Rating.objects.count() == ratings_before
    assert not Submission.objects.exists()
    leased.refresh_from_db()
    assert leased.status == "leased"


def test_save_overwrites_the_earlier_draft(campaign, leased, annotator1):
    save(campaign, leased, annotator1, HALF)
    save(campaign, leased, annotator1, {"r-1-1": "1", "none_appropriate": "1"})
    assert AssignmentDraft.objects.filter(assignment=leased).count() == 1
    assert AssignmentDraft.objects.get(assignment=leased).values == {"r-1-1": "1", "none_appropriate": "1"}


@pytest.mark.parametrize(
    "values",
    [
        {"r-4-1": "3"},  # the task has three candidates
        {"r-1-3": "3"},  # and two aspects
        {"idempotency_key": "abcdefgh12"},
        {"rationale": "fine", "is_staff": "1"},
        {"rationale": "x" * (MAX_TEXT_CHARS + 1)},
        {"comment": "x" * (MAX_TEXT_CHARS + 1)},
        {"r-1-1": "3" * (MAX_VALUE_CHARS + 1)},
        {"preference": "2" * (MAX_VALUE_CHARS + 1)},
        {"r-1-1": 3},
        {"rationale": "a\x00b"},
        {"comment": "a\ud800b"},
    ],
)
def test_bad_drafts_are_refused_and_nothing_is_stored(campaign, leased, annotator1, values):
    save(campaign, leased, annotator1, HALF)
    with pytest.raises(DraftInvalid):
        save(campaign, leased, annotator1, values)
    assert AssignmentDraft.objects.get(assignment=leased).values == HALF


def test_the_longest_texts_the_form_allows_are_kept(campaign, leased, annotator1):
    values = {"rationale": "x" * MAX_TEXT_CHARS, "comment": "y" * MAX_TEXT_CHARS}
    save(campaign, leased, annotator1, values)
    assert AssignmentDraft.objects.get(assignment=leased).values == values


def test_only_the_lease_holder_may_save(campaign, leased, annotator1, annotator2, outsider):
    with pytest.raises(PermissionDenied):
        save(campaign, leased, annotator2, HALF)  # in the pool, but the task is leased to annotator1
    with pytest.raises(NotInPool):
        save(campaign, leased, outsider, HALF)
    other_task = campaign.tasks.exclude(pk=leased.task_id).first()
    with pytest.raises(PermissionDenied):
        assignment_draft_save(campaign=campaign, task_id=other_task.pk, user=annotator1, values=HALF)
    with pytest.raises(Http404):
        assignment_draft_save(campaign=campaign, task_id=10**9, user=annotator1, values=HALF)
    assert not AssignmentDraft.objects.exists()


def test_submit_deletes_the_draft_with_the_lease(campaign, leased, annotator1):
    save(campaign, leased, annotator1, HALF)
    submit_answer(campaign, leased, annotator1, "draft-submit-1", full_answer(leased, annotator1))
    assert not AssignmentDraft.objects.exists()
    # Submitted, the task takes drafts of a correction while the campaign allows corrections, and none once not.
    save(campaign, leased, annotator1, HALF)
    assert AssignmentDraft.objects.get().values == HALF
    AssignmentDraft.objects.all().delete()
    campaign.allow_revisit = False
    campaign.save(update_fields=["allow_revisit"])
    with pytest.raises(PermissionDenied):
        save(campaign, leased, annotator1, HALF)
    assert not AssignmentDraft.objects.exists()


def test_a_refused_submit_keeps_the_draft(campaign, leased, annotator1):
    save(campaign, leased, annotator1, HALF)
    with pytest.raises(SubmissionInvalid):
        submit_answer(campaign, leased, annotator1, "draft-submit-2", TaskAnswer(ratings={}))
    assert AssignmentDraft.objects.get(assignment=leased).values == HALF


def test_skip_and_removal_from_the_pool_delete_the_draft(campaign, leased, annotator1, annotator2):
    save(campaign, leased, annotator1, HALF)
    assignment_skip(assignment=leased, user=annotator1, reason="not_qualified")
    assert not AssignmentDraft.objects.exists()
    theirs = assignment_claim(campaign=campaign, user=annotator2)
    save(campaign, theirs, annotator2, HALF)
    campaign_annotator_remove(campaign=campaign, user=annotator2)
    assert not AssignmentDraft.objects.exists()


def test_a_slot_taken_over_after_expiry_does_not_show_the_first_holders_draft(researcher, annotator1, annotator2):
    campaign = make_campaign(make_dataset(owner=researcher, items=1), [annotator1, annotator2], raters_per_item=1)
    mine = assignment_claim(campaign=campaign, user=annotator1)
    save(campaign, mine, annotator1, HALF)
    later = timezone.now() + timedelta(minutes=campaign.lease_minutes + 1)
    theirs = assignment_claim(campaign=campaign, user=annotator2, now=later)
    assert theirs.pk == mine.pk
    lease = leased_assignment(campaign=campaign, task_id=theirs.task_id, user=annotator2)
    assert assignment_draft_values(assignment=lease, user=annotator2) == {}
    save(campaign, theirs, annotator2, {"r-1-1": "0"})
    lease = leased_assignment(campaign=campaign, task_id=theirs.task_id, user=annotator2)
    assert assignment_draft_values(assignment=lease, user=annotator2) == {"r-1-1": "0"}


def test_the_selector_reads_the_draft_loaded_with_the_lease(campaign, leased, annotator1, django_assert_num_queries):
    save(campaign, leased, annotator1, HALF)
    lease = leased_assignment(campaign=campaign, task_id=leased.task_id, user=annotator1)
    with django_assert_num_queries(0):
        assert assignment_draft_values(assignment=lease, user=annotator1) == HALF
    assert assignment_draft_values(assignment=Assignment.objects.get(pk=leased.pk), user=annotator1) == HALF


# --- the endpoint and the page ------------------------------------------------------------------------------------


def login(user) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    assert client.login(username=user.username, password=CAST_PASSWORD)
    return client


def draft_url(campaign, assignment) -> str:  # type: ignore[no-untyped-def]
    return reverse("annotate-draft", args=[campaign.pk, assignment.task_id])


def test_endpoint_saves_and_answers_204(campaign, leased, annotator1):
    client = login(annotator1)
    response = client.post(draft_url(campaign, leased), HALF)
    assert response.status_code == 204
    assert AssignmentDraft.objects.get(assignment=leased).values == HALF


def test_endpoint_accepts_the_token_in_the_body_as_a_beacon_sends_it(campaign, leased, annotator1):
    client = Client(enforce_csrf_checks=True)
    assert client.login(username=annotator1.username, password=CAST_PASSWORD)
    page = client.get(reverse("annotate-task", args=[campaign.pk, leased.task_id]))
    token = page.cookies["csrftoken"].value
    assert client.post(draft_url(campaign, leased), HALF).status_code == 403  # no token: CSRF refuses
    response = client.post(draft_url(campaign, leased), HALF | {"csrfmiddlewaretoken": token})
    assert response.status_code == 204
    assert AssignmentDraft.objects.get(assignment=leased).values == HALF


def test_endpoint_refuses_bad_input_with_a_message(campaign, leased, annotator1):
    response = login(annotator1).post(draft_url(campaign, leased), {"r-9-1": "3"})
    assert response.status_code == 400
    assert "not on this form" in response.content.decode()
    assert not AssignmentDraft.objects.exists()


def test_endpoint_wrong_method_is_405(campaign, leased, annotator1):
    assert login(annotator1).get(draft_url(campaign, leased)).status_code == 405


def test_endpoint_no_access(campaign, leased, annotator2, outsider):
    url = draft_url(campaign, leased)
    assert login(annotator2).post(url, HALF).status_code == 403  # another annotator of the campaign
    assert login(outsider).post(url, HALF).status_code == 404  # outside the pool the campaign does not exist
    anonymous = Client().post(url, HALF)
    assert anonymous.status_code == 302 and reverse("login") in anonymous["Location"]
    missing = reverse("annotate-draft", args=[campaign.pk, 10**9])
    assert login(annotator2).post(missing, HALF).status_code == 404
    assert not AssignmentDraft.objects.exists()


def test_task_page_restores_the_draft_and_changes_nothing(campaign, leased, annotator1):
    client = login(annotator1)
    client.post(draft_url(campaign, leased), HALF | {"comment": "<b>later</b>", "none_appropriate": "1"})
    before = AssignmentDraft.objects.get(assignment=leased)
    body = client.get(reverse("annotate-task", args=[campaign.pk, leased.task_id])).content.decode()
    assert '<input type="radio" name="r-1-1" value="3" data-key="3" checked>' in body
    assert '<input type="radio" name="r-2-2" value="na" data-key="n" checked>' in body
    assert 'name="preference" value="2" data-preference checked' in body
    assert 'name="none_appropriate" value="1" checked' in body
    assert ">Candidate 2 cites its sources</textarea>" in body
    assert ">&lt;b&gt;later&lt;/b&gt;</textarea>" in body
    assert 'id="draft-status" role="status"' in body and "Draft saved</span>" in body
    after = AssignmentDraft.objects.get(assignment=leased)
    assert (after.values, after.updated_at) == (before.values, before.updated_at)
    assert AssignmentDraft.objects.count() == 1


def test_task_page_without_a_draft_shows_an_empty_form(campaign, leased, annotator1):
    body = login(annotator1).get(reverse("annotate-task", args=[campaign.pk, leased.task_id])).content.decode()
    assert 'data-key="3" selected>' not in body and "checked" not in body
    assert "Draft saved</span>" not in body
    assert not AssignmentDraft.objects.exists()


def test_continue_finds_the_draft(campaign, leased, annotator1):
    client = login(annotator1)
    client.post(draft_url(campaign, leased), HALF)
    response = client.post(reverse("annotate-next", args=[campaign.pk]))
    assert response.status_code == 303
    assert ">Candidate 2 cites its sources</textarea>" in client.get(response["Location"]).content.decode()

"""Correcting a submitted task, a stale page sent again, and a submit after the lease expired: each branch stores
the answer or says why not, never drops it silently. Runs on Postgres and on SQLite (tests/run_all.sh)."""

from datetime import timedelta

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotations.campaigns.answers import TaskAnswer
from annotations.campaigns.claims import assignment_claim
from annotations.campaigns.drafts import assignment_draft_save
from annotations.campaigns.errors import LeaseLost, RevisitRefused
from annotations.campaigns.submissions import submission_create
from annotations.campaigns.tasks import task_candidates
from annotations.datasets.flat_export import iter_flat_rows
from annotations.models import Assignment, AssignmentDraft, AssignmentStatus, Rating, Submission, SubmissionRevision
from tests.annotate.factories import make_campaign, make_dataset
from tests.conftest import CAST_PASSWORD

pytestmark = pytest.mark.django_db


@pytest.fixture
def campaign(researcher, annotator1, annotator2):  # type: ignore[no-untyped-def]
    return make_campaign(
        make_dataset(owner=researcher, items=2, systems=2), [annotator1, annotator2], raters_per_item=1
    )


def answer(assignment, user, value: float, reason: str = "first reason") -> TaskAnswer:  # type: ignore[no-untyped-def]
    numbers = [c.number for c in task_candidates(assignment=assignment, user_id=user.pk)]
    return TaskAnswer(
        ratings={(n, 1): value for n in numbers} | {(n, 2): 0.0 for n in numbers},
        preference=1,
        rationale=reason,
    )


def submit(campaign, assignment, user, value: float, key: str, **kwargs):  # type: ignore[no-untyped-def]
    return submission_create(
        campaign=campaign,
        task_id=assignment.task_id,
        user=user,
        idempotency_key=key,
        answer=kwargs.pop("given", None) or answer(assignment, user, value, kwargs.pop("reason", "first reason")),
        **kwargs,
    )


def values(user) -> set[float]:  # type: ignore[no-untyped-def]
    """The user's values on the first aspect (the second, a signed scale, is always 0 here)."""
    return set(Rating.objects.filter(rater__user=user).exclude(value=0).values_list("value", flat=True))


def test_a_correction_replaces_the_answer_and_keeps_the_earlier_version(campaign, annotator1):
    leased = assignment_claim(campaign=campaign, user=annotator1)
    first = submit(campaign, leased, annotator1, 3, "first-key-01")
    assert not first.revised and values(annotator1) == {3.0}
    ratings = Rating.objects.filter(rater__user=annotator1).count()
    again = submit(campaign, leased, annotator1, 1, "second-key-01", reason="corrected")
    assert again.revised and not again.replayed
    assert values(annotator1) == {1.0} and Rating.objects.filter(rater__user=annotator1).count() == ratings
    submission = Submission.objects.get()
    assert (submission.version, submission.rationale, submission.idempotency_key) == (2, "corrected", "second-key-01")
    kept = SubmissionRevision.objects.get()
    assert (kept.version, kept.rationale, kept.idempotency_key) == (1, "first reason", "first-key-01")
    assert {r["value"] for r in kept.ratings} == {3.0, 0.0} and kept.replaced_at >= kept.submitted_at
    # The flat export reads the current answer; with history the first version follows, with its replacement time.
    current = [row for row in iter_flat_rows(dataset=campaign.dataset) if row["kind"] == "rating"]
    assert {row["value"] for row in current if row["rater"]} >= {1.0} and 3.0 not in {r["value"] for r in current}
    history = [row for row in iter_flat_rows(dataset=campaign.dataset, history=True) if row["replaced_at"]]
    assert {row["value"] for row in history if row["kind"] == "rating"} == {3.0, 0.0}
    assert [row["rationale"] for row in history if row["kind"] == "preference"] == ["first reason"]


def test_a_repeat_changes_nothing_and_a_stale_page_with_its_old_key_is_a_correction(campaign, annotator1):
    leased = assignment_claim(campaign=campaign, user=annotator1)
    submit(campaign, leased, annotator1, 3, "stale-key-001")
    assert submit(campaign, leased, annotator1, 3, "stale-key-001").replayed  # a double click
    assert submit(campaign, leased, annotator1, 3, "other-key-001").replayed  # the same answer from a second tab
    assert not SubmissionRevision.objects.exists()
    edited = submit(campaign, leased, annotator1, 2, "stale-key-001")  # Back, change, submit again
    assert edited.revised and values(annotator1) == {2.0}
    assert SubmissionRevision.objects.count() == 1


def test_a_correction_is_refused_when_the_campaign_does_not_allow_it(campaign, annotator1):
    campaign.allow_revisit = False
    campaign.save(update_fields=["allow_revisit"])
    leased = assignment_claim(campaign=campaign, user=annotator1)
    submit(campaign, leased, annotator1, 3, "closed-key-01")
    assert submit(campaign, leased, annotator1, 3, "closed-key-02").replayed  # the same answer is still a repeat
    with pytest.raises(RevisitRefused):
        submit(campaign, leased, annotator1, 1, "closed-key-03")
    assert values(annotator1) == {3.0} and not SubmissionRevision.objects.exists()


def test_an_expired_lease_still_held_is_accepted(campaign, annotator1):
    leased = assignment_claim(campaign=campaign, user=annotator1)
    later = timezone.now() + timedelta(minutes=campaign.lease_minutes + 5)
    result = submit(campaign, leased, annotator1, 3, "expired-key-1", now=later)
    assert not result.replayed and not result.reclaimed
    assert Assignment.objects.get(pk=leased.pk).status == AssignmentStatus.SUBMITTED


def _lose_the_lease(campaign, leased, taker):  # type: ignore[no-untyped-def]
    Assignment.objects.filter(pk=leased.pk).update(lease_expires_at=timezone.now() - timedelta(minutes=1))
    taken = assignment_claim(campaign=campaign, user=taker)
    assert taken.pk == leased.pk  # the expired slot went to the next annotator


def test_a_lost_lease_takes_another_open_slot_of_the_task(researcher, annotator1, annotator2):
    campaign = make_campaign(
        make_dataset("two-slots", owner=researcher, items=1, systems=2), [annotator1, annotator2], raters_per_item=2
    )
    leased = assignment_claim(campaign=campaign, user=annotator1)
    _lose_the_lease(campaign, leased, annotator2)
    result = submit(campaign, leased, annotator1, 3, "reclaim-key-1", former_slot_id=leased.pk)
    assert result.reclaimed
    mine = Assignment.objects.get(task_id=leased.task_id, annotator=annotator1)
    assert mine.pk != leased.pk and mine.status == AssignmentStatus.SUBMITTED
    assert Assignment.objects.get(pk=leased.pk).annotator == annotator2  # the other annotator keeps theirs


def test_a_lost_lease_with_no_slot_left_is_refused_and_kept_as_a_draft(campaign, annotator1, annotator2):
    leased = assignment_claim(campaign=campaign, user=annotator1)
    _lose_the_lease(campaign, leased, annotator2)
    with pytest.raises(LeaseLost):
        submit(campaign, leased, annotator1, 3, "lost-key-0001", former_slot_id=leased.pk)
    assert not Submission.objects.exists() and not Rating.objects.filter(rater__user=annotator1).exists()
    draft = AssignmentDraft.objects.get(annotator=annotator1)
    assert draft.assignment_id == leased.pk and draft.values["rationale"] == "first reason"
    assert draft.values["r-1-1"] == "3"


def login(user) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    assert client.login(username=user.username, password=CAST_PASSWORD)
    return client


def form(assignment, user, value: str, key: str, reason: str = "because") -> dict[str, str]:  # type: ignore[no-untyped-def]
    data = {"idempotency_key": key, "preference": "1", "rationale": reason}
    for candidate in task_candidates(assignment=assignment, user_id=user.pk):
        data[f"r-{candidate.number}-1"] = value
        data[f"r-{candidate.number}-2"] = "0"
    return data


def claimed_on_the_pages(campaign, user) -> tuple[Client, Assignment, str, str]:  # type: ignore[no-untyped-def]
    """The user logged in with a task of the campaign claimed; the client, the lease, the task's page and where its
    form posts."""
    client = login(user)
    leased = assignment_claim(campaign=campaign, user=user)
    task_url = reverse("annotate-task", args=[campaign.pk, leased.task_id])
    return client, leased, task_url, reverse("annotate-submit", args=[campaign.pk, leased.task_id])


def test_pages_list_reopen_and_correct_a_submitted_task(campaign, annotator1):
    client, leased, task_url, submit_url = claimed_on_the_pages(campaign, annotator1)
    assert client.post(submit_url, form(leased, annotator1, "3", "page-key-0001")).status_code == 303
    page = client.get(reverse("annotate-campaign", args=[campaign.pk])).content.decode()
    assert "Your submitted tasks" in page and task_url in page
    reopened = client.get(task_url)
    assert reopened.status_code == 200
    body = reopened.content.decode()
    assert "You are editing your submitted answer" in body and "because" in body
    assert 'value="3" selected' in body or "selected" in body
    response = client.post(submit_url, form(leased, annotator1, "1", "page-key-0002", "changed my mind"))
    assert response.status_code == 303 and response["Location"] == reverse("annotate-campaign", args=[campaign.pk])
    assert "Your correction is saved." in [str(m) for m in get_messages(response.wsgi_request)]
    assert values(annotator1) == {1.0} and SubmissionRevision.objects.count() == 1


def test_pages_refuse_plainly_when_corrections_are_off_or_the_campaign_closed(campaign, annotator1):
    client, leased, task_url, submit_url = claimed_on_the_pages(campaign, annotator1)
    client.post(submit_url, form(leased, annotator1, "3", "off-key-00001"))
    campaign.allow_revisit = False
    campaign.save(update_fields=["allow_revisit"])
    page = client.get(task_url)
    assert page.status_code == 200 and "You have submitted this task" in page.content.decode()
    refused = client.post(submit_url, form(leased, annotator1, "1", "off-key-00001"))
    assert refused.status_code == 303
    assert any("allows no changes" in str(m) for m in get_messages(refused.wsgi_request))
    campaign.is_active = False
    campaign.save(update_fields=["is_active"])
    closed = client.post(submit_url, form(leased, annotator1, "1", "off-key-00002"))
    assert closed.status_code == 303 and closed["Location"] == reverse("home")
    assert any("campaign is closed" in str(m) for m in get_messages(closed.wsgi_request))
    assert "This campaign is closed" in client.get(task_url).content.decode()
    assert values(annotator1) == {3.0}


def test_the_page_tells_a_lost_lease_and_restores_the_kept_answer(campaign, annotator1, annotator2):
    client = login(annotator1)
    leased = assignment_claim(campaign=campaign, user=annotator1)
    page = client.get(reverse("annotate-task", args=[campaign.pk, leased.task_id])).content.decode()
    lease = page.split('name="lease" value="', 1)[1].split('"', 1)[0]
    _lose_the_lease(campaign, leased, annotator2)
    data = form(leased, annotator1, "3", "lost-page-key1", "kept reason") | {"lease": lease}
    response = client.post(reverse("annotate-submit", args=[campaign.pk, leased.task_id]), data)
    assert response.status_code == 303
    assert any("kept as a draft" in str(m) for m in get_messages(response.wsgi_request))
    assert AssignmentDraft.objects.get(annotator=annotator1).values["rationale"] == "kept reason"
    # A forged or missing lease field reclaims nothing: the plain 403 answer for a task that is not yours.
    forged = form(leased, annotator1, "3", "lost-page-key2") | {"lease": "1:forged"}
    assert client.post(reverse("annotate-submit", args=[campaign.pk, leased.task_id]), forged).status_code == 403


def test_the_draft_view_takes_the_whole_form_the_page_sends(campaign, annotator1):
    client = login(annotator1)
    leased = assignment_claim(campaign=campaign, user=annotator1)
    page = client.get(reverse("annotate-task", args=[campaign.pk, leased.task_id])).content.decode()
    lease = page.split('name="lease" value="', 1)[1].split('"', 1)[0]
    body = {"r-1-1": "2", "rationale": "half", "lease": lease}
    response = client.post(reverse("annotate-draft", args=[campaign.pk, leased.task_id]), body)
    assert response.status_code == 204
    assert AssignmentDraft.objects.get(annotator=annotator1).values == {"r-1-1": "2", "rationale": "half"}


def test_the_token_api_saves_drafts_and_corrects_or_refuses_plainly(campaign, annotator1, outsider):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=annotator1)[0].key}")
    task = client.post(reverse("api-annotate-next", args=[campaign.pk])).json()
    base = f"/api/annotate/campaigns/{campaign.pk}/tasks/{task['task']}"
    assert client.post(f"{base}/draft/", {"r-1-1": "2", "rationale": "half"}, format="json").status_code == 204
    assert AssignmentDraft.objects.get(annotator=annotator1).values == {"r-1-1": "2", "rationale": "half"}
    assert client.post(f"{base}/draft/", {"r-9-1": "2"}, format="json").status_code == 400  # no candidate 9
    assert client.post(f"{base}/draft/", ["not", "an", "object"], format="json").status_code == 400
    stranger = APIClient()
    stranger.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=outsider)[0].key}")
    assert stranger.post(f"{base}/draft/", {"rationale": "x"}, format="json").status_code in {403, 404}

    def body(value: int, key: str) -> dict:
        ratings = {str(c["number"]): {"factuality": value, "amount_info": 0} for c in task["candidates"]}
        return {"idempotency_key": key, "ratings": ratings, "preference": 1, "rationale": "because"}

    assert client.post(f"{base}/submit/", body(3, "api-rev-0001"), format="json").status_code == 201
    assert not AssignmentDraft.objects.exists()
    corrected = client.post(f"{base}/submit/", body(1, "api-rev-0002"), format="json")
    assert corrected.status_code == 200 and corrected.json()["revised"] and values(annotator1) == {1.0}
    campaign.allow_revisit = False
    campaign.save(update_fields=["allow_revisit"])
    refused = client.post(f"{base}/submit/", body(2, "api-rev-0003"), format="json")
    assert refused.status_code == 409 and "does not allow changes" in refused.json()["detail"]
    assert values(annotator1) == {1.0}


def test_a_revisit_says_plainly_when_it_shows_unsaved_changes_instead_of_the_answer(campaign, annotator1):
    client, leased, task_url, submit_url = claimed_on_the_pages(campaign, annotator1)
    assert client.post(submit_url, form(leased, annotator1, "3", "page-key-0001")).status_code == 303
    plain = client.get(task_url).content.decode()
    assert "not your saved answer" not in plain
    assignment_draft_save(campaign=campaign, task_id=leased.task_id, user=annotator1, values={"rationale": "half"})
    body = client.get(task_url).content.decode()
    notice = body[body.index('id="unsaved-draft-notice"') :]
    assert "The form shows changes you have not saved yet, not your saved answer." in notice[: notice.index("</p>")]

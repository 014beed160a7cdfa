"""The annotator API under the same rules as the pages: token auth, leases, blinding, idempotency."""

import json

import pytest
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotations.models import Assignment, AssignmentStatus, Rating, RatingOrigin, Skip, Submission
from tests.annotate.factories import SYSTEM_NAMES, make_campaign, make_dataset

pytestmark = pytest.mark.django_db


def token_client(user) -> APIClient:  # type: ignore[no-untyped-def]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


@pytest.fixture
def campaign(researcher, annotators):
    return make_campaign(make_dataset(owner=researcher, items=2), annotators, name="api campaign", raters_per_item=2)


def next_url(campaign) -> str:  # type: ignore[no-untyped-def]
    return reverse("api-annotate-next", args=[campaign.pk])


def submit_body(task: dict, key: str = "api-key-0001", **extra) -> dict:  # type: ignore[no-untyped-def]
    ratings = {str(c["number"]): {"factuality": 2, "amount_info": "NA"} for c in task["candidates"]}
    return {"idempotency_key": key, "ratings": ratings, "preference": 1, "rationale": "because", **extra}


def test_campaign_list_shows_only_my_campaigns(campaign, annotator1, outsider):
    rows = token_client(annotator1).get(reverse("api-annotate-campaigns")).json()
    assert rows == [{"id": campaign.pk, "name": "api campaign", "done": 0, "available": 2, "has_open_task": False}]
    assert token_client(outsider).get(reverse("api-annotate-campaigns")).json() == []
    assert (
        APIClient().get(reverse("api-annotate-campaigns")).status_code == 403
    )  # unauthenticated: SessionAuthentication comes first
    assert token_client(annotator1).post(reverse("api-annotate-campaigns")).status_code == 405


def test_next_task_is_blinded(campaign, annotator1):
    response = token_client(annotator1).post(next_url(campaign))
    assert response.status_code == 200
    task = response.json()
    assert [c["number"] for c in task["candidates"]] == [1, 2, 3, 4]
    assert set(task["candidates"][0]) == {"number", "text", "earlier_answers", "instruction"}
    assert [a["name"] for a in task["aspects"]] == ["factuality", "amount_info"]
    assert task["aspects"][1]["allows_missing"] and not task["aspects"][0]["allows_missing"]
    text = json.dumps(task)
    for key, model in SYSTEM_NAMES.items():
        assert key not in text and model not in text
    assert "unieval" not in text and task["reference"] is None  # reference off by default


def test_next_task_roles_and_methods(campaign, annotator1, outsider, researcher):
    assert token_client(annotator1).get(next_url(campaign)).status_code == 405
    # outside the pool the campaign is out of scope: 404, not a hint that it exists
    assert token_client(outsider).post(next_url(campaign)).status_code == 404
    assert token_client(researcher).post(next_url(campaign)).status_code == 404
    assert APIClient().post(next_url(campaign)).status_code == 403  # unauthenticated: SessionAuthentication comes first
    assert token_client(annotator1).post(reverse("api-annotate-next", args=[campaign.pk + 99])).status_code == 404


def test_task_detail_only_for_the_lease_holder(campaign, annotator1, annotator2, outsider):
    task = token_client(annotator1).post(next_url(campaign)).json()
    url = reverse("api-annotate-task", args=[campaign.pk, task["task"]])
    assert token_client(annotator1).get(url).json()["candidates"] == task["candidates"]
    assert token_client(annotator2).get(url).status_code == 403
    assert token_client(outsider).get(url).status_code == 404
    assert token_client(annotator1).post(url).status_code == 405


def test_submit_idempotent_and_next(campaign, annotator1):
    client = token_client(annotator1)
    task = client.post(next_url(campaign)).json()
    url = reverse("api-annotate-submit", args=[campaign.pk, task["task"]])
    first = client.post(url, submit_body(task), format="json")
    assert first.status_code == 201 and first.json()["replayed"] is False
    again = client.post(url, submit_body(task), format="json")
    assert again.status_code == 200 and again.json()["replayed"] is True
    assert Submission.objects.count() == 1 and Rating.objects.filter(origin=RatingOrigin.APP).count() == 8
    assert client.post(next_url(campaign)).json()["task"] != task["task"]
    assert client.get(url).status_code == 405


def test_submit_reports_every_problem(campaign, annotator1):
    client = token_client(annotator1)
    task = client.post(next_url(campaign)).json()
    url = reverse("api-annotate-submit", args=[campaign.pk, task["task"]])
    body = {"idempotency_key": "api-bad-0001", "ratings": {"1": {"factuality": "NA", "amount_info": 5}}}
    response = client.post(url, body, format="json")
    assert response.status_code == 400
    fields = [p["field"] for p in response.json()["problems"]]
    assert fields[:2] == ["r-1-1", "r-1-2"] and "preference" in fields and "rationale" in fields
    unknown = client.post(url, {**body, "ratings": {"1": {"nope": 1}}}, format="json")
    assert unknown.status_code == 400 and unknown.json()["problems"][0]["message"] == "unknown aspect"
    assert not Submission.objects.exists()


def test_submit_rejects_over_posting_and_foreign_tasks(campaign, annotator1, annotator2):
    client = token_client(annotator1)
    task = client.post(next_url(campaign)).json()
    url = reverse("api-annotate-submit", args=[campaign.pk, task["task"]])
    response = client.post(url, submit_body(task, rater=5, annotator=annotator2.pk), format="json")
    assert response.status_code == 400 and "unexpected fields: annotator, rater" in response.json()["detail"]
    assert token_client(annotator2).post(url, submit_body(task, key="api-key-0002"), format="json").status_code == 403
    assert not Submission.objects.exists()


def test_skip(campaign, annotator1, annotator2):
    client = token_client(annotator1)
    task = client.post(next_url(campaign)).json()
    url = reverse("api-annotate-skip", args=[campaign.pk, task["task"]])
    assert client.post(url, {"reason": "nope"}, format="json").status_code == 400
    assert token_client(annotator2).post(url, {"reason": "other"}, format="json").status_code == 403
    assert client.post(url, {"reason": "unreadable", "note": "garbled"}, format="json").status_code == 204
    assert Skip.objects.get().note == "garbled"
    assert not Assignment.objects.filter(annotator=annotator1, status=AssignmentStatus.LEASED).exists()


@pytest.mark.parametrize("campaign_id", [0, 2**63, 10**30])
def test_a_campaign_id_no_row_can_have_is_a_404_on_every_endpoint(campaign, annotator1, campaign_id):
    client = token_client(annotator1)
    task = client.post(next_url(campaign)).json()
    for name, method in (
        ("api-annotate-next", "post"),
        ("api-annotate-task", "get"),
        ("api-annotate-submit", "post"),
        ("api-annotate-skip", "post"),
        ("api-annotate-draft", "post"),
    ):
        args = [campaign_id] if name == "api-annotate-next" else [campaign_id, task["task"]]
        response = getattr(client, method)(reverse(name, args=args), {}, format="json")
        assert response.status_code == 404, (name, response.status_code)


def test_session_post_needs_csrf(campaign, annotator1):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(annotator1)
    assert client.post(next_url(campaign)).status_code == 403


def test_annotator_api_answers_json_whatever_the_client_prefers(campaign, annotator1):
    client = token_client(annotator1)
    for accept in ("text/html,application/xhtml+xml,*/*;q=0.8", "application/json", "*/*"):
        response = client.get(reverse("api-annotate-campaigns"), HTTP_ACCEPT=accept)
        assert response.status_code == 200 and response["Content-Type"] == "application/json"
        assert "<html" not in response.content.decode()
    assert client.get(reverse("api-annotate-campaigns"), HTTP_ACCEPT="text/html").status_code == 406


def test_a_task_of_one_answer_asks_no_preference_through_the_api(campaign, researcher, annotator1):
    client = token_client(annotator1)
    assert client.post(next_url(campaign)).json()["ask_preference"] is True  # four candidates to choose from
    single = make_campaign(
        make_dataset(owner=researcher, items=1, systems=1, name="one system"), [annotator1], raters_per_item=1
    )
    task = client.post(next_url(single)).json()
    assert len(task["candidates"]) == 1 and task["ask_preference"] is False
    body = submit_body(task)
    del body["preference"]
    response = client.post(reverse("api-annotate-submit", args=[single.pk, task["task"]]), body, format="json")
    assert response.status_code == 201, response.json()

"""Query budgets of the annotator's hot path (next task, task page, submit; HTML pages and the API), and the
shortcuts that keep it cheap: they must answer exactly as the code they replace.

Budgets are for Postgres, where claim and submit run as one statement each (see annotations.campaigns); the ORM
path used by other databases gets a looser budget. Transactional tests, so no test-wrapping savepoints are
counted: the numbers are what a production request sends.
"""

import json
import uuid

import pytest
from django.conf import settings
from django.db import connection
from django.urls import reverse
from rest_framework.renderers import JSONRenderer
from rest_framework.settings import api_settings
from rest_framework.test import APIClient

from annotations.api.annotator import ANNOTATOR_AUTHENTICATION, AnnotatorTokenAuthentication, TaskOutput
from annotations.campaigns.claims import assignment_claim
from annotations.campaigns.progress import annotator_progress
from annotations.campaigns.selectors import campaign_for_annotator
from annotations.models import Assignment, AssignmentStatus, Rating, RatingOrigin, Submission
from annotations.services import rater_for_user
from tests.annotate.factories import make_campaign, make_dataset
from tests.annotate.test_annotator_api import token_client
from tests.conftest import login

pytestmark = pytest.mark.django_db(transaction=True)


def budget(postgres: int, other: int) -> int:
    return postgres if connection.vendor == "postgresql" else other


@pytest.fixture
def campaign(researcher, annotators):  # type: ignore[no-untyped-def]
    dataset = make_dataset(owner=researcher, items=4, turns=1)
    return make_campaign(dataset, annotators, name="budget", raters_per_item=2)


def api_answer(task: dict) -> dict:
    ratings = {
        str(c["number"]): {a["name"]: a["options"][0]["value"] for a in task["aspects"]} for c in task["candidates"]
    }
    return {"idempotency_key": uuid.uuid4().hex, "ratings": ratings, "preference": 1, "rationale": "fine"}


def api_round(client: APIClient, campaign) -> None:  # type: ignore[no-untyped-def]
    task = client.post(reverse("api-annotate-next", args=[campaign.pk])).json()
    url = reverse("api-annotate-submit", args=[campaign.pk, task["task"]])
    assert client.post(url, api_answer(task), format="json").status_code == 201


def test_api_next_task_budget(campaign, annotator1, django_assert_max_num_queries):  # type: ignore[no-untyped-def]
    client = token_client(annotator1)
    # token+user, campaign+pool+aspects, claim, candidates; the portable claim also reads the hand-out window
    with django_assert_max_num_queries(budget(4, 11)):
        response = client.post(reverse("api-annotate-next", args=[campaign.pk]))
    assert response.status_code == 200 and len(response.json()["candidates"]) == 4


def test_api_task_detail_budget(campaign, annotator1, django_assert_max_num_queries):  # type: ignore[no-untyped-def]
    client = token_client(annotator1)
    task = client.post(reverse("api-annotate-next", args=[campaign.pk])).json()
    with django_assert_max_num_queries(budget(4, 6)):  # token+user, campaign, lease with turn, candidates
        response = client.get(reverse("api-annotate-task", args=[campaign.pk, task["task"]]))
    assert response.json() == task | {"lease_expires_at": response.json()["lease_expires_at"]}


def test_api_submit_budget(campaign, annotator1, django_assert_max_num_queries):  # type: ignore[no-untyped-def]
    client = token_client(annotator1)
    api_round(client, campaign)  # a person's first submit also creates their pseudonymous rater (4 more queries)
    task = client.post(reverse("api-annotate-next", args=[campaign.pk])).json()
    body = api_answer(task)
    url = reverse("api-annotate-submit", args=[campaign.pk, task["task"]])
    with django_assert_max_num_queries(budget(4, 16)):  # token+user, campaign, state, one write statement
        response = client.post(url, body, format="json")
    assert response.status_code == 201
    with django_assert_max_num_queries(budget(5, 8)):  # a double click: + the stored submission
        again = client.post(url, body, format="json")
    assert again.status_code == 200 and again.json()["replayed"]
    assert Submission.objects.count() == 2
    assert Rating.objects.filter(origin=RatingOrigin.APP).count() == 2 * 4 * 2


def html_answer(page: str, campaign) -> dict[str, str]:  # type: ignore[no-untyped-def]
    import re

    key = re.search(r'name="idempotency_key" value="([^"]+)"', page)
    assert key is not None
    data = {"idempotency_key": key[1], "preference": "1", "rationale": "fine"}
    for field in set(re.findall(r'name="(r-\d+-\d+)"', page)):
        data[field] = "1" if field.endswith("-1") else "na"
    return data


def test_html_next_task_page_and_submit_budgets(campaign, annotator1, django_assert_max_num_queries):  # type: ignore[no-untyped-def]
    rater_for_user(dataset=campaign.dataset, user=annotator1)  # made by a person's first submit, counted above
    client = login(annotator1)
    # session, user, campaign+pool+aspects, claim (the session read comes from the cache when Redis is configured);
    # the portable claim also reads the hand-out window
    with django_assert_max_num_queries(budget(4, 11)):
        response = client.post(reverse("annotate-next", args=[campaign.pk]))
    assert response.status_code == 303
    page_url = response["Location"]
    # session, user, campaign, lease with turn, candidates, progress
    with django_assert_max_num_queries(budget(6, 8)):
        page = client.get(page_url)
    assert page.status_code == 200
    answer = html_answer(page.content.decode(), campaign)
    # session, user, campaign, state, one write statement, the next claim (which, portable, reads the window too)
    with django_assert_max_num_queries(budget(6, 25)):
        response = client.post(page_url + "submit/", answer)
    assert response.status_code == 303 and response["Location"] != page_url
    assert Assignment.objects.filter(annotator=annotator1, status=AssignmentStatus.SUBMITTED).count() == 1


# --- the shortcuts answer as the code they replace ------------------------------------------------------------------


def test_task_json_is_what_the_output_serializer_gives(campaign, annotator1):  # type: ignore[no-untyped-def]
    task = token_client(annotator1).post(reverse("api-annotate-next", args=[campaign.pk])).json()
    assert json.loads(JSONRenderer().render(TaskOutput(task).data)) == task


def test_annotator_api_authenticates_like_the_project_default(annotator1):  # type: ignore[no-untyped-def]
    defaults = settings.REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"]
    assert [c.__name__ for c in api_settings.DEFAULT_AUTHENTICATION_CLASSES] == [p.rsplit(".", 1)[1] for p in defaults]
    mirrored = [c.__mro__[1] if c is AnnotatorTokenAuthentication else c for c in ANNOTATOR_AUTHENTICATION]
    assert mirrored == list(api_settings.DEFAULT_AUTHENTICATION_CLASSES)


def test_token_lookup_refuses_unknown_tokens_and_inactive_users(campaign, annotator1):  # type: ignore[no-untyped-def]
    url = reverse("api-annotate-next", args=[campaign.pk])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token " + "0" * 40)
    assert client.post(url).status_code == 403  # SessionAuthentication first: 403 rather than 401, as elsewhere
    user_client = token_client(annotator1)
    assert user_client.post(url).status_code == 200
    annotator1.is_active = False
    annotator1.save(update_fields=["is_active"])
    assert user_client.post(url).status_code == 403


def test_campaign_read_scopes_like_before(campaign, annotator1, outsider):  # type: ignore[no-untyped-def]
    from django.http import Http404

    loaded = campaign_for_annotator(annotator1, campaign.pk)
    assert [s.aspect.name for s in loaded._scales_cache] == ["factuality", "amount_info"]  # type: ignore[attr-defined]
    assert loaded.shuffle_seed == campaign.shuffle_seed and loaded.created_at == campaign.created_at
    with pytest.raises(Http404):
        campaign_for_annotator(outsider, campaign.pk)
    with pytest.raises(Http404):
        campaign_for_annotator(annotator1, campaign.pk + 999)
    campaign.is_active = False
    campaign.save(update_fields=["is_active"])
    with pytest.raises(Http404):
        campaign_for_annotator(annotator1, campaign.pk)


def test_progress_counts_in_one_read(campaign, annotator1, annotator2, django_assert_num_queries):  # type: ignore[no-untyped-def]
    with django_assert_num_queries(1):
        before = annotator_progress(campaign=campaign, user=annotator1)
    assert (before.done, before.available, before.has_open_task) == (0, 4, False)
    mine = assignment_claim(campaign=campaign, user=annotator1)
    assert mine is not None
    other = annotator_progress(campaign=campaign, user=annotator2)
    assert (other.done, other.available) == (0, 4)  # a second slot of the leased task is still free
    after = annotator_progress(campaign=campaign, user=annotator1)
    assert (after.done, after.available, after.has_open_task) == (0, 4, True)

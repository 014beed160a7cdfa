"""Numbers are read in ASCII digits only, in every numeric field of the task form and of the annotator API.

Python's int() and float() read the digits of every script ("３", "٣") and str.isdigit() also accepts superscripts
and circled digits ("²", "③") that int() then refuses; each of these gets a refusal that names the field (the
form's 422 with its errors, the API's 400 in JSON), never a 500 and never a stored rating."""

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotations.campaigns.claims import assignment_claim
from annotations.campaigns.tasks import task_candidates
from annotations.models import AssignmentDraft, Rating, Submission
from tests.annotate.factories import make_campaign, make_dataset
from tests.conftest import CAST_PASSWORD

pytestmark = pytest.mark.django_db

# Superscript two, circled three, circled one, Arabic-Indic three, fullwidth three, Devanagari three, bold three.
UNICODE_DIGITS = ["²", "③", "①", "٣", "３", "३", "𝟑"]


@pytest.fixture
def campaign(researcher, annotator1):
    return make_campaign(make_dataset(owner=researcher, items=2, systems=3), [annotator1], raters_per_item=1)


@pytest.fixture
def leased(campaign, annotator1):
    return assignment_claim(campaign=campaign, user=annotator1)


def login(user) -> Client:  # type: ignore[no-untyped-def]
    client = Client(raise_request_exception=False)
    assert client.login(username=user.username, password=CAST_PASSWORD)
    return client


def full_form(assignment, user) -> dict[str, str]:  # type: ignore[no-untyped-def]
    data = {"idempotency_key": "form-key-0001", "preference": "2", "rationale": "fine"}
    for candidate in task_candidates(assignment=assignment, user_id=user.pk):
        data[f"r-{candidate.number}-1"] = "3"
        data[f"r-{candidate.number}-2"] = "na"
    return data


def ascii_to(digit: str, text: str) -> str:
    return text.replace("3", digit).replace("2", digit).replace("1", digit)


@pytest.mark.parametrize("digit", UNICODE_DIGITS)
@pytest.mark.parametrize("field", ["preference", "rating value", "rating name"])
def test_form_refuses_unicode_digits_in_every_numeric_field(campaign, leased, annotator1, digit, field):
    data = full_form(leased, annotator1)
    if field == "preference":
        data["preference"] = digit
        named = "Preference"
    elif field == "rating value":
        data["r-1-1"] = digit
        named = "Candidate 1"
    else:
        data[ascii_to(digit, "r-1-1")] = data.pop("r-1-1")
        named = "Candidate 1"
    url = reverse("annotate-submit", args=[campaign.pk, leased.task_id])
    response = login(annotator1).post(url, data)
    assert response.status_code == 422, response.status_code
    assert named in response.content.decode()
    assert not Submission.objects.exists() and not Rating.objects.filter(rater__user=annotator1).exists()


@pytest.mark.parametrize("digit", UNICODE_DIGITS)
def test_draft_refuses_unicode_digits_in_field_names(campaign, leased, annotator1, digit):
    url = reverse("annotate-draft", args=[campaign.pk, leased.task_id])
    response = login(annotator1).post(url, {ascii_to(digit, "r-1-1"): "3"})
    assert response.status_code == 400
    assert not AssignmentDraft.objects.exists()


def api_client(user) -> APIClient:  # type: ignore[no-untyped-def]
    client = APIClient(raise_request_exception=False)
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


def api_body(task: dict) -> dict:
    ratings = {str(c["number"]): {"factuality": 2, "amount_info": "NA"} for c in task["candidates"]}
    return {"idempotency_key": "api-key-0001", "ratings": ratings, "preference": 1, "rationale": "because"}


@pytest.mark.parametrize("digit", UNICODE_DIGITS)
@pytest.mark.parametrize("field", ["rating key", "rating value", "preference", "draft field"])
def test_api_refuses_unicode_digits_with_json(campaign, annotator1, digit, field):
    client = api_client(annotator1)
    task = client.post(reverse("api-annotate-next", args=[campaign.pk])).json()
    body = api_body(task)
    url = reverse("api-annotate-submit", args=[campaign.pk, task["task"]])
    if field == "rating key":
        body["ratings"][digit] = body["ratings"].pop("1")
    elif field == "rating value":
        body["ratings"]["1"]["factuality"] = digit
    elif field == "preference":
        body["preference"] = digit
    else:
        url = reverse("api-annotate-draft", args=[campaign.pk, task["task"]])
        body = {ascii_to(digit, "r-1-1"): "3"}
    response = client.post(url, body, format="json")
    assert response.status_code == 400, response.status_code
    assert response["Content-Type"] == "application/json"
    assert response.json()  # names the problem
    assert not Submission.objects.exists() and not AssignmentDraft.objects.exists()


def test_api_answers_json_for_an_unknown_address_and_a_failure(settings, annotator1):
    client = api_client(annotator1)
    missing = client.get("/api/annotate/campaigns/1/nowhere/")
    assert missing.status_code == 404 and missing.json() == {"detail": "Not found."}
    settings.ROOT_URLCONF = "tests.error_urls"
    failed = client.get("/api/test-only/fail/")
    assert failed.status_code == 500 and failed["Content-Type"] == "application/json"
    assert "secret-detail" not in failed.content.decode()
    page = client.get("/test-only/fail/")  # the pages keep their HTML error page
    assert page.status_code == 500 and "text/html" in page["Content-Type"]

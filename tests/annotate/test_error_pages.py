"""The 403, 404, 405 and 500 pages: in the site's layout, with a way back, in English and Japanese, and nothing
about what failed. A GET on a POST-only step of the annotator flow goes to the page that offers the step."""

import pytest
from django.test import Client
from django.urls import reverse

from annotations.campaigns.claims import assignment_claim
from annotations.models import Assignment
from evalsite import error_pages, urls
from tests.annotate.factories import make_campaign, make_dataset
from tests.conftest import CAST_PASSWORD

pytestmark = pytest.mark.django_db

NAV = '<nav aria-label="Main">'
NAV_JA = '<nav aria-label="メイン">'


def login(user, language: str = "en") -> Client:  # type: ignore[no-untyped-def]
    client = Client(HTTP_ACCEPT_LANGUAGE=language)
    assert client.login(username=user.username, password=CAST_PASSWORD)
    return client


@pytest.fixture
def campaign(researcher, annotator1, annotator2):
    return make_campaign(make_dataset(owner=researcher, items=2), [annotator1, annotator2], raters_per_item=1)


@pytest.fixture
def leased(campaign, annotator1):
    return assignment_claim(campaign=campaign, user=annotator1)


def step_url(campaign, assignment, step: str) -> str:  # type: ignore[no-untyped-def]
    return reverse(f"annotate-{step}", args=[campaign.pk, assignment.task_id])


def test_handlers_are_wired() -> None:
    assert urls.handler403 is error_pages.permission_denied
    assert urls.handler404 is error_pages.page_not_found
    assert urls.handler500 is error_pages.server_error


# --- 404 --------------------------------------------------------------------------------------------------------


def test_404_in_the_layout_with_a_way_home(annotator1, campaign):
    response = login(annotator1).get(reverse("annotate-campaign", args=[campaign.pk + 999]))
    body = response.content.decode()
    assert response.status_code == 404
    assert NAV in body and "Page not found" in body
    assert f'<a href="{reverse("home")}">Back to my work</a>' in body
    assert "no such campaign" not in body  # the exception's message stays on the server


def test_404_in_japanese(annotator1):
    response = login(annotator1, "ja").get("/no-such-page/")
    body = response.content.decode()
    assert response.status_code == 404
    assert '<html lang="ja">' in body and NAV_JA in body
    assert "ページが見つかりません" in body and "マイページに戻る" in body


def test_404_for_anonymous_still_has_the_layout():
    body = Client().get("/no-such-page/").content.decode()
    assert NAV in body and "Page not found" in body


# --- 403 --------------------------------------------------------------------------------------------------------


def test_403_on_a_task_leads_back_to_the_campaign(campaign, leased, annotator2):
    response = login(annotator2).get(step_url(campaign, leased, "task"))
    body = response.content.decode()
    assert response.status_code == 403
    assert NAV in body and "You do not have access to this page" in body
    assert f'<a href="{reverse("annotate-campaign", args=[campaign.pk])}">Back to the campaign</a>' in body
    assert "not leased to you" not in body


def test_403_elsewhere_leads_home(campaign, annotator1):
    response = login(annotator1).get(reverse("campaign-progress", args=[campaign.pk]))
    body = response.content.decode()
    assert response.status_code == 403
    assert NAV in body and f'<a href="{reverse("home")}">Back to my work</a>' in body
    assert "Back to the campaign" not in body


def test_403_in_japanese_by_the_language_cookie(campaign, leased, annotator2, settings):
    client = login(annotator2)
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "ja"
    response = client.get(step_url(campaign, leased, "task"))
    body = response.content.decode()
    assert response.status_code == 403
    assert NAV_JA in body and "このページにはアクセスできません" in body and "キャンペーンに戻る" in body


# --- 405 --------------------------------------------------------------------------------------------------------


def test_405_in_the_layout_keeps_its_allow_header(annotator1):
    response = login(annotator1).post(reverse("home"))
    body = response.content.decode()
    assert response.status_code == 405 and response["Allow"] == "GET"
    assert NAV in body and "This address cannot be opened this way" in body
    assert f'<a href="{reverse("home")}">Back to my work</a>' in body


def test_405_of_a_class_based_view_gets_the_page_too(annotator1):
    response = login(annotator1).get(reverse("logout"))
    assert response.status_code == 405 and NAV in response.content.decode()


def test_405_in_japanese(annotator1):
    response = login(annotator1, "ja").post(reverse("home"))
    body = response.content.decode()
    assert response.status_code == 405
    assert NAV_JA in body and "このアドレスはこの方法では開けません" in body and "マイページに戻る" in body


def test_405_under_the_api_stays_json(researcher):
    response = Client().get(reverse("api-token"))
    assert response.status_code == 405
    assert response["Content-Type"].startswith("application/json") and b"<nav" not in response.content


# --- 500 --------------------------------------------------------------------------------------------------------


@pytest.mark.urls("tests.error_urls")
@pytest.mark.parametrize(
    ("language", "nav", "title", "back"),
    [("en", NAV, "Something went wrong", "Back to my work"), ("ja", NAV_JA, "問題が発生しました", "マイページに戻る")],
)
def test_500_in_the_layout_without_details(annotator1, language, nav, title, back):
    client = login(annotator1, language)
    client.raise_request_exception = False
    response = client.get("/test-only/fail/")
    body = response.content.decode()
    assert response.status_code == 500
    assert nav in body and title in body and f'<a href="/">{back}</a>' in body
    assert "secret-detail-of-the-failure" not in body and "Traceback" not in body and "RuntimeError" not in body


# --- GET on the POST-only steps ---------------------------------------------------------------------------------


def test_get_on_next_goes_to_the_campaign_page_and_leases_nothing(campaign, annotator1, outsider):
    url = reverse("annotate-next", args=[campaign.pk])
    response = login(annotator1).get(url)
    assert response.status_code == 303 and response["Location"] == reverse("annotate-campaign", args=[campaign.pk])
    assert not Assignment.objects.filter(annotator=annotator1).exists()
    refused = login(outsider).get(url)
    assert refused.status_code == 404 and NAV in refused.content.decode()
    anonymous = Client().get(url)
    assert anonymous.status_code == 302 and reverse("login") in anonymous["Location"]


@pytest.mark.parametrize("step", ["submit", "skip"])
def test_get_on_a_task_step_goes_to_the_task_page(campaign, leased, annotator1, annotator2, outsider, step):
    url = step_url(campaign, leased, step)
    response = login(annotator1).get(url)
    assert response.status_code == 303 and response["Location"] == step_url(campaign, leased, "task")
    assert Assignment.objects.get(pk=leased.pk).status == leased.status  # a GET changes nothing

    other = login(annotator2).get(url)  # in the pool, but the task is not theirs
    assert other.status_code == 403
    assert f'<a href="{reverse("annotate-campaign", args=[campaign.pk])}">Back to the campaign</a>' in (
        other.content.decode()
    )
    outside = login(outsider).get(url)  # outside the pool: the campaign is not revealed
    assert outside.status_code == 404 and NAV in outside.content.decode()
    anonymous = Client().get(url)
    assert anonymous.status_code == 302 and reverse("login") in anonymous["Location"]


# --- 403 on a CSRF failure ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("language", "title"), [("en", "The form has expired"), ("ja", "フォームの有効期限が切れました")]
)
def test_a_form_sent_without_its_csrf_token_gets_the_layout_and_changes_nothing(
    campaign, leased, annotator1, language, title
):
    client = Client(enforce_csrf_checks=True, HTTP_ACCEPT_LANGUAGE=language)
    client.force_login(annotator1)
    response = client.post(step_url(campaign, leased, "skip"), {"reason": "other", "note": "x"})
    body = response.content.decode()
    assert response.status_code == 403
    assert (NAV if language == "en" else NAV_JA) in body and title in body
    assert "cookie not set" not in body  # Django's reason stays in the log
    leased.refresh_from_db()
    assert leased.status == "leased"

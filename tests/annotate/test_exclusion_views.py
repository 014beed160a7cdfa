"""The exclusion controls: POST only, a researcher of the campaign's dataset only, a rater of that dataset only."""

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from annotations.models import Assignment, Rater, RaterExclusion
from tests.annotate.factories import make_campaign, make_dataset
from tests.annotate.test_exclusions import rate_all

pytestmark = pytest.mark.django_db

CSRF_SECRET = "a1" * 16  # a well-formed secret, sent as cookie and as form field like a page would
ROUTES = ("rater-exclude", "rater-slots-reopen", "rater-exclusion-revoke")


@pytest.fixture
def world(researcher, annotator1, annotator2):  # type: ignore[no-untyped-def]
    campaign = make_campaign(make_dataset(owner=researcher, items=2, systems=2), [annotator1, annotator2])
    rate_all(campaign, annotator1)
    rater = Rater.objects.get(dataset=campaign.dataset, user=annotator1)
    return campaign, rater


def client_for(user: User | None) -> Client:
    client = Client(enforce_csrf_checks=True)
    if user is not None:
        client.force_login(user)
    return client


def post(client: Client, url: str, data: dict[str, str], **headers: str):  # type: ignore[no-untyped-def]
    """A POST with a valid CSRF token, as the page's form sends it."""
    client.cookies[settings.CSRF_COOKIE_NAME] = CSRF_SECRET
    return client.post(url, {**data, "csrfmiddlewaretoken": CSRF_SECRET}, **headers)


def url(name: str, campaign, rater) -> str:  # type: ignore[no-untyped-def]
    return reverse(name, args=[campaign.pk, rater.pk])


def test_exclude_with_reopen_redirects_back_with_a_message(world, researcher):  # type: ignore[no-untyped-def]
    campaign, rater = world
    client = client_for(researcher)
    response = post(client, url("rater-exclude", campaign, rater), {"reason": "straight-lining", "reopen": "on"})
    assert response.status_code == 303
    assert response["Location"] == reverse("campaign-progress", args=[campaign.pk])
    exclusion = RaterExclusion.objects.get()
    assert exclusion.reason == "straight-lining" and exclusion.campaign == campaign
    assert exclusion.excluded_by == researcher
    assert Assignment.objects.filter(campaign=campaign, replaces__isnull=False).count() == 2
    assert not campaign.annotators.filter(pk=rater.user_id).exists()
    page = client.get(response["Location"])
    assert "is excluded from the statistics; their tasks are reopened and they left the pool." in page.content.decode()


def test_htmx_exclude_answers_the_rows_controls(world, researcher):  # type: ignore[no-untyped-def]
    campaign, rater = world
    client = client_for(researcher)
    response = post(client, url("rater-exclude", campaign, rater), {"reason": "too fast"}, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 200 and "<html" not in body
    # The whole panel, recomputed: the row's controls and every other figure the exclusion changed.
    assert body.startswith('<section id="quality-panel"')
    assert f'id="exclusion-controls-{rater.pk}"' in body
    assert "Excluded from the statistics" in body and "too fast" in body
    assert f"{rater.user.username} is excluded from the statistics." in body
    assert url("rater-exclusion-revoke", campaign, rater) in body and "csrfmiddlewaretoken" in body
    assert not Assignment.objects.filter(replaces__isnull=False).exists()  # reopening was not asked
    reopened = post(client, url("rater-slots-reopen", campaign, rater), {}, HTTP_HX_REQUEST="true")
    assert reopened.status_code == 200 and "2 tasks of" in reopened.content.decode()
    assert Assignment.objects.filter(replaces__isnull=False).count() == 2
    revoked = post(client, url("rater-exclusion-revoke", campaign, rater), {}, HTTP_HX_REQUEST="true")
    body = revoked.content.decode()
    assert revoked.status_code == 200 and "counts in the statistics again" in body
    assert 'value="too fast"' in body  # the reason form again, prefilled
    assert RaterExclusion.objects.get().revoked_by == researcher
    assert not Assignment.objects.filter(replaces__isnull=False).exists()  # nobody had taken them


def test_refused_exclusion_is_a_422_partial_and_writes_nothing(world, researcher):  # type: ignore[no-untyped-def]
    campaign, rater = world
    client = client_for(researcher)
    response = post(client, url("rater-exclude", campaign, rater), {"reason": "  "}, HTTP_HX_REQUEST="true")
    assert response.status_code == 422
    # Only the row's controls, in place of the row's controls, so the rest of the panel is left as it was.
    assert response["HX-Retarget"] == f"#exclusion-controls-{rater.pk}" and 'id="quality-panel"' not in str(
        response.content
    )
    assert "Give a reason for excluding the rater." in response.content.decode()
    plain = post(client, url("rater-exclude", campaign, rater), {"reason": ""})
    assert plain.status_code == 303
    assert not RaterExclusion.objects.exists()
    refused = post(client, url("rater-slots-reopen", campaign, rater), {}, HTTP_HX_REQUEST="true")
    assert refused.status_code == 422 and "Exclude the rater in this campaign first." in refused.content.decode()


@pytest.mark.parametrize("name", ROUTES)
def test_wrong_method(world, researcher, name):  # type: ignore[no-untyped-def]
    campaign, rater = world
    assert client_for(researcher).get(url(name, campaign, rater)).status_code == 405


def test_csrf_is_required(world, researcher):  # type: ignore[no-untyped-def]
    campaign, rater = world
    response = client_for(researcher).post(url("rater-exclude", campaign, rater), {"reason": "x"})
    assert response.status_code == 403
    assert not RaterExclusion.objects.exists()


@pytest.mark.parametrize("name", ROUTES)
def test_no_access(world, annotator1, outsider, name):  # type: ignore[no-untyped-def]
    campaign, rater = world
    target = url(name, campaign, rater)
    anonymous = post(client_for(None), target, {"reason": "x"})
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]
    assert post(client_for(annotator1), target, {"reason": "x"}).status_code == 403
    assert post(client_for(outsider), target, {"reason": "x"}).status_code == 403
    other = User.objects.create_user("other-researcher", is_staff=True)
    assert post(client_for(other), target, {"reason": "x"}).status_code == 404
    assert not RaterExclusion.objects.exists()


@pytest.mark.parametrize("name", ROUTES)
def test_a_rater_of_another_dataset_is_not_found(world, researcher, annotator1, name):  # type: ignore[no-untyped-def]
    campaign, _rater = world
    elsewhere = make_campaign(make_dataset("mine too", owner=researcher, items=1), [annotator1], name="other")
    rate_all(elsewhere, annotator1)
    foreign = Rater.objects.get(dataset=elsewhere.dataset, user=annotator1)
    response = post(client_for(researcher), url(name, campaign, foreign), {"reason": "x"})
    assert response.status_code == 404
    assert post(client_for(researcher), reverse(name, args=[campaign.pk, 10**9]), {"reason": "x"}).status_code == 404
    assert not RaterExclusion.objects.exists()


def test_progress_page_states_the_excluded_raters(world, researcher):  # type: ignore[no-untyped-def]
    campaign, rater = world
    page = reverse("campaign-progress", args=[campaign.pk])
    client = client_for(researcher)
    assert 'id="progress-exclusions"' not in client.get(page).content.decode()
    post(client, url("rater-exclude", campaign, rater), {"reason": "too fast"})
    html = client.get(page).content.decode()
    assert "The tasks of 1 excluded rater do not count towards the raters a task needs:" in html
    assert rater.pseudonym in html


def test_the_answer_names_the_rater_as_the_panel_does(world, researcher):  # type: ignore[no-untyped-def]
    campaign, rater = world
    client = client_for(researcher)
    data = {"reason": "too fast", "names": "pseudonyms"}
    body = post(client, url("rater-exclude", campaign, rater), data, HTTP_HX_REQUEST="true").content.decode()
    assert f"{rater.pseudonym} is excluded from the statistics." in body
    assert f'<th scope="row">{rater.pseudonym}</th>' in body and rater.user.username not in body
    assert 'name="names" value="pseudonyms"' in body
    plain = post(client, url("rater-exclusion-revoke", campaign, rater), {"names": "pseudonyms"})
    assert plain["Location"] == reverse("campaign-progress", args=[campaign.pk]) + "?names=pseudonyms"

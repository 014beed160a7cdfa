"""Consent and screening on a Prolific link in real Chromium, in English and in Japanese: the participant agrees,
answers a screening question the study does not accept, and ends on the screened-out code without a task.
axe-core finds nothing serious on the consent, screening or end page.

Screenshots go to tests/artifacts/ (gitignored)."""

from collections.abc import Iterator
from urllib.parse import urlencode

import pytest
from django.core.cache import cache
from playwright.sync_api import Browser, Page, expect

from annotations.models import Assignment
from annotations.recruitment.models import CrowdWorker, Platform, ScreeningOutcome
from annotations.recruitment.services import link_create, link_screening_set
from tests.annotate.factories import make_campaign, make_dataset
from tests.browser.pages import ARTIFACTS, axe_violations, open_page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(params=["en-US", "ja-JP"])
def page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    cache.clear()  # the join rate limit counts per address
    with open_page(browser, locale=str(request.param), clean=True) as page:
        yield page


def shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    tag = page.locator("html").get_attribute("lang") or "x"
    page.screenshot(path=str(ARTIFACTS / f"screening-{tag}-{name}.png"), full_page=True)


def test_consent_then_screening_ends_on_the_screened_out_code(live_server, page: Page, researcher, annotator1) -> None:  # type: ignore[no-untyped-def]
    campaign = make_campaign(make_dataset(owner=researcher, items=2), [annotator1], name="Crowd study")
    link = link_create(campaign=campaign, platform=Platform.PROLIFIC, created_by=researcher, completion_code="OK1")
    link_screening_set(
        link=link,
        consent_text="By taking part you agree that your **ratings** are stored under a pseudonym.",
        questions_text="Are you a native English speaker? | *Yes | No",
        rule="all",
        screened_out_code="SCREENED-7",
    )
    query = urlencode({"PROLIFIC_PID": "pid-browser-1", "STUDY_ID": "study-1", "SESSION_ID": "session-1"})
    page.goto(f"{live_server.url}/join/{link.token}/?{query}")
    with page.expect_navigation():
        page.locator("form button[type=submit]").click()  # the start page's Start
    expect(page.locator("#consent-text strong")).to_have_text("ratings")
    assert axe_violations(page) == []
    shot(page, "consent")
    with page.expect_navigation():
        page.locator("#consent-agree").click()
    expect(page.locator(".screening-question legend")).to_have_text("Are you a native English speaker?")
    assert axe_violations(page) == []
    shot(page, "question")
    page.locator(".screening-question label.scale-button").nth(1).click()  # "No"
    with page.expect_navigation():
        page.locator("#screening-submit").click()
    expect(page.locator("#screened-out-code")).to_have_text("SCREENED-7")
    assert axe_violations(page) == []
    shot(page, "screened-out")
    assert ScreeningOutcome.objects.get().outcome == "screened_out"
    assert not CrowdWorker.objects.exists()
    assert not Assignment.objects.filter(campaign=campaign, annotator__isnull=False).exists()

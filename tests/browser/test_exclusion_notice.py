"""A researcher in real Chromium sees which excluded rater the agreement page leaves out, brings them back in with
one click, and the filters keep that choice.

Screenshots go to tests/artifacts/ (gitignored)."""

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from annotations.models import Rater
from annotations.quality.services import rater_exclude
from tests.annotate.factories import make_campaign, make_dataset
from tests.annotate.test_exclusions import rate_all
from tests.browser.pages import log_in, open_page, shooter

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


shot = shooter("exclusion")


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    with open_page(browser, clean=True) as page:
        yield page


def test_agreement_page_names_the_excluded_rater_and_brings_them_back(  # type: ignore[no-untyped-def]
    live_server, page: Page, researcher, annotator1, annotator2, annotator3
) -> None:
    campaign = make_campaign(
        make_dataset("excluded demo", owner=researcher, items=3, systems=2),
        [annotator1, annotator2, annotator3],
        raters_per_item=3,
    )
    for user in (annotator1, annotator2, annotator3):
        rate_all(campaign, user)
    rater = Rater.objects.get(dataset=campaign.dataset, user=annotator3)
    rater_exclude(rater=rater, reason="straight-lining", by=researcher, campaign=campaign)

    log_in(page, live_server.url, "researcher")
    page.goto(f"{live_server.url}/dashboard/{campaign.dataset.pk}/")
    notice = page.locator("#exclusion-notice")
    expect(notice).to_contain_text("Leaving out 1 excluded rater:")
    expect(notice).to_contain_text(f"{rater.pseudonym} (straight-lining)")
    expect(page.locator("#scope-label")).to_have_text("All ratings")
    shot(page, "left-out")

    with page.expect_navigation():
        notice.get_by_role("link", name="Show the statistics with them").click()
    expect(page.locator("#exclusion-notice")).to_contain_text("Including 1 excluded rater:")
    expect(page.locator("#scope-label")).to_have_text("All ratings, excluded raters included")
    assert "excluded=include" in page.url
    shot(page, "included")

    # Another aspect through htmx: the partial keeps the choice and the selector swapped out of band says so.
    page.locator("figcaption a").nth(1).click()
    expect(page).to_have_url(re.compile(r"aspect=.*excluded=include"))
    expect(page.locator("#scope-label")).to_have_text("All ratings, excluded raters included")

    with page.expect_navigation():
        page.locator("#exclusion-notice").get_by_role("link", name="Leave them out again").click()
    expect(page.locator("#exclusion-notice")).to_contain_text("Leaving out 1 excluded rater:")
    assert "excluded=include" not in page.url

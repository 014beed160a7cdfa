"""Campaign deadlines in real Chromium, in English and in Japanese: the researcher sets the opening and closing times
on the campaign's settings page with the browser's date-and-time inputs, a closing time before the opening is refused
with the problem named, the saved window is shown on the page, and an annotator of the campaign is told when it opens
instead of getting a task. Each page passes axe-core and scrolls no page sideways at 390 px or 1,280 px.

Screenshots go to tests/artifacts/ (gitignored)."""

from datetime import UTC, datetime

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from annotations.models import Assignment, Campaign
from tests.annotate.factories import make_campaign, make_dataset
from tests.browser import pages
from tests.browser.pages import log_in, new_page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WORDS = {
    "en": {"refused": "The closing time must be after the opening time.", "opens": "This campaign opens at"},
    "ja": {"refused": "締切時刻は開始時刻より後にしてください。", "opens": "に始まります"},
}


def check_layout(page: Page, name: str) -> None:
    pages.check_layout(page, f"deadlines-{name}")


def signed_in(browser: Browser, base: str, username: str, locale: str) -> tuple[BrowserContext, Page]:
    page = new_page(browser, locale=locale)
    log_in(page, base, username, by_label=False)
    return page.context, page


def save(page: Page) -> None:
    with page.expect_navigation():
        page.locator("form.campaign-settings-form button.primary").click()


@pytest.mark.parametrize("locale", ["en-US", "ja-JP"])
def test_deadlines_set_on_the_settings_page_reach_the_annotator(  # type: ignore[no-untyped-def]
    live_server, browser: Browser, researcher, annotator1, locale: str
) -> None:
    tag = locale[:2]
    campaign = make_campaign(make_dataset(owner=researcher, items=2), [annotator1], name="windowed", raters_per_item=1)
    context, page = signed_in(browser, live_server.url, researcher.username, locale)
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"pageerror: {exc}"))
    page.goto(f"{live_server.url}/research/campaigns/{campaign.pk}/settings/")
    expect(page.locator("#id_opens_at")).to_have_attribute("type", "datetime-local")

    page.locator("#id_opens_at").fill("2099-01-02T09:30")
    page.locator("#id_closes_at").fill("2099-01-01T09:30")
    save(page)
    expect(page.locator(".campaign-settings-form [role=alert]").first).to_have_text(WORDS[tag]["refused"])
    check_layout(page, f"settings-refused-{tag}")
    assert Campaign.objects.get(pk=campaign.pk).closes_at is None  # nothing saved

    page.locator("#id_closes_at").fill("2099-02-01T18:00")
    save(page)
    campaign.refresh_from_db()
    assert campaign.opens_at == datetime(2099, 1, 2, 9, 30, tzinfo=UTC)
    assert campaign.closes_at == datetime(2099, 2, 1, 18, 0, tzinfo=UTC)
    expect(page.locator("#campaign-window")).to_contain_text(WORDS[tag]["opens"])
    expect(page.locator("#campaign-window")).to_contain_text("2099-01-02 09:30")
    expect(page.locator("#campaign-window")).to_contain_text("UTC")
    expect(page.locator("#id_opens_at")).to_have_value("2099-01-02T09:30")
    check_layout(page, f"settings-saved-{tag}")
    context.close()

    context, page = signed_in(browser, live_server.url, annotator1.username, locale)
    page.goto(f"{live_server.url}/annotate/{campaign.pk}/")
    expect(page.locator("#campaign-window")).to_contain_text(WORDS[tag]["opens"])
    expect(page.locator("#campaign-window")).to_contain_text("2099-01-02 09:30")
    expect(page.locator(f"form[action='/annotate/{campaign.pk}/next/']")).to_have_count(0)
    check_layout(page, f"annotator-{tag}")
    assert not Assignment.objects.filter(annotator=annotator1).exists()
    assert problems == []
    context.close()

"""A researcher in real Chromium reads the quality panel of a crowd study: a flagged straight-liner first, the gold
accuracy chart, and the CSV downloads. Screenshots go to tests/artifacts/ (gitignored)."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from annotations.models import Rater
from tests.annotate.quality_world import careful, crowd_worker, one_value, rate, study
from tests.browser.pages import ARTIFACTS, log_in, open_page

CANARY = "CANARY-PID-7f3a9c"
GOLD = {"sys_alpha": {"factuality": 3}, "sys_beta": {"factuality": 0}}

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    with open_page(browser, height=800, accept_downloads=True) as page:
        yield page


def test_researcher_sees_the_flagged_worker_the_chart_and_downloads(live_server, page, researcher, annotators):
    annotator1, annotator2, _ = annotators
    campaign = study(researcher, [annotator1, annotator2], items=5, gold={5: GOLD, 6: GOLD})
    worker = crowd_worker(campaign, CANARY)
    for position in range(5):
        rate(campaign, position, annotator1, careful)
        rate(campaign, position, annotator2, careful)
        rate(campaign, position, worker, one_value(1))
    rate(campaign, 5, worker, one_value(1))
    rate(campaign, 6, annotator1, lambda p, s, a: (3 if s == "sys_alpha" else 0) if a == "factuality" else 0)
    pseudonym = Rater.objects.get(user=worker).pseudonym

    log_in(page, live_server.url, researcher.username)
    page.goto(f"{live_server.url}/campaigns/{campaign.pk}/progress/?names=pseudonyms")

    panel = page.locator("section.quality-panel")
    expect(panel.get_by_role("heading", name="Rater quality")).to_be_visible()
    expect(panel.locator(".flagged-raters li")).to_have_count(1)
    expect(panel.locator(".flagged-raters li")).to_contain_text(pseudonym)
    expect(panel.locator(".flagged-raters li")).to_contain_text("one value everywhere in 100% of submissions")
    first_row = panel.locator(".quality-table tbody tr").first
    expect(first_row.get_by_role("rowheader")).to_have_text(pseudonym)
    chart = panel.get_by_role("img", name="Share of gold answers within tolerance, per hour of submission")
    expect(chart).to_be_visible()
    expect(chart.locator("rect")).not_to_have_count(0)
    panel.get_by_text("Gold accuracy as a table").click()
    expect(panel.locator(".gold-accuracy-table tbody tr")).not_to_have_count(0)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    panel.screenshot(path=str(ARTIFACTS / "quality-panel.png"))
    page.screenshot(path=str(ARTIFACTS / "quality-progress-page.png"), full_page=True)
    assert CANARY not in page.content()

    with page.expect_download() as quality_download:
        panel.get_by_role("link", name="Download CSV").click()
    quality_csv = Path(quality_download.value.path()).read_text(encoding="utf-8")
    assert pseudonym in quality_csv and CANARY not in quality_csv
    with page.expect_download() as payment_download:
        panel.get_by_role("link", name="Payment export").click()
    assert CANARY in Path(payment_download.value.path()).read_text(encoding="utf-8")
    assert page.problems == []  # type: ignore[attr-defined]


def reversed_scores(position: int, system: str, aspect: str) -> float:
    """A careless worker who answers the opposite of a careful rater everywhere."""
    value = careful(position, system, aspect)
    return 3 - value if aspect == "factuality" else -value


def test_excluding_a_rater_updates_the_whole_panel_at_once(live_server, page, researcher, annotators):
    # The reversed worker cancels annotator2 out in annotator1's reference (their mean is flat), so annotator1's
    # agreement is undefined until the worker stops counting; then it is 1.00 against annotator2 alone.
    annotator1, annotator2, _ = annotators
    campaign = study(researcher, [annotator1, annotator2], items=5)
    worker = crowd_worker(campaign, CANARY)
    for position in range(5):
        rate(campaign, position, annotator1, careful)
        rate(campaign, position, annotator2, careful)
        rate(campaign, position, worker, reversed_scores)

    log_in(page, live_server.url, researcher.username)
    page.goto(f"{live_server.url}/campaigns/{campaign.pk}/progress/")
    panel = page.locator("section.quality-panel")
    # By default the panel names raters by account, as the annotators table above it does.
    worker_row = panel.locator(".quality-table tbody tr", has=page.get_by_role("rowheader", name=worker.username))
    careful_row = panel.locator(".quality-table tbody tr", has=page.get_by_role("rowheader", name=annotator1.username))
    expect(worker_row).to_contain_text("counted")
    expect(careful_row.locator("td").nth(4)).to_contain_text("no variation to correlate")
    expect(panel.locator(".flagged-raters li")).to_contain_text(worker.username)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    panel.screenshot(path=str(ARTIFACTS / "quality-panel-before-exclusion.png"))

    worker_row.get_by_role("button", name="Exclude from the statistics").click()
    # No reload: the same page shows the exclusion and everyone's figures computed without the worker.
    expect(worker_row.locator("td").last).to_contain_text("excluded")
    expect(worker_row.locator("td").last).not_to_contain_text("counted")
    expect(worker_row.get_by_role("status")).to_contain_text(f"{worker.username} is excluded from the statistics.")
    expect(careful_row.locator("td").nth(4)).to_contain_text("1.00")
    expect(panel.locator(".flagged-raters li")).to_contain_text("(excluded)")
    panel.screenshot(path=str(ARTIFACTS / "quality-panel-after-exclusion.png"))

    # The researcher can switch to pseudonyms; the choice survives the next exclusion control.
    with page.expect_navigation():
        panel.get_by_role("link", name="Show pseudonyms").click()
    pseudonym = Rater.objects.get(user=worker).pseudonym
    worker_row = panel.locator(".quality-table tbody tr", has=page.get_by_role("rowheader", name=pseudonym))
    expect(worker_row).to_contain_text("excluded")
    assert worker.username not in panel.inner_text()
    worker_row.get_by_role("button", name="Revoke the exclusion").click()
    expect(worker_row.get_by_role("status")).to_contain_text(f"{pseudonym} counts in the statistics again.")
    expect(worker_row.locator("td").last).to_contain_text("counted")
    expect(careful_row_by(panel, page, Rater.objects.get(user=annotator1).pseudonym)).to_contain_text("no variation")
    assert page.problems == []  # type: ignore[attr-defined]


def careful_row_by(panel, page, name):  # type: ignore[no-untyped-def]
    return panel.locator(".quality-table tbody tr", has=page.get_by_role("rowheader", name=name)).locator("td").nth(4)

"""Real Chromium shows the alternative-annotator verdict and the rankings side by side, at desktop and phone width."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from playwright.sync_api import sync_playwright

from tests.browser.pages import signed_in_page
from tests.chromium import launch_chromium
from tests.dashboard.decision_data import COPY_JUDGE, PAIRWISE_JUDGE, make_decision_dataset

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_verdict_and_rankings_render_in_chromium(live_server: Any, researcher: User) -> None:
    dataset = make_decision_dataset(researcher)
    ARTIFACTS.mkdir(exist_ok=True)
    problems: list[str] = []
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            for width, suffix in ((1280, ""), (390, "-390")):
                page = signed_in_page(browser, live_server.url, researcher, width=width, problems=problems)
                judges = reverse("dashboard-judges", args=[dataset.pk])
                page.goto(live_server.url + judges + f"?judge={COPY_JUDGE}&aspect=overall")
                verdict = page.locator("#alt-test .verdict")
                assert "Passed: the judge can replace a rater." in verdict.inner_text()
                assert page.locator("#table-alternative tbody tr").count() == 5
                # Setting ε through the form reruns the test with it.
                page.fill("#alt-test input[name=epsilon]", "0.2")
                page.click("#alt-test button[type=submit]")
                page.wait_for_url("**epsilon=0.2**")
                assert "ε = 0.2" in page.locator("#alt-test .verdict").inner_text()
                page.locator("#alt-test").screenshot(path=str(ARTIFACTS / f"dashboard-alt-test{suffix}.png"))
                assert page.evaluate("document.documentElement.scrollWidth") <= width

                rankings = reverse("dashboard-rankings", args=[dataset.pk])
                page.goto(live_server.url + rankings + f"?judge={PAIRWISE_JUDGE}")
                assert page.locator("#table-ranking-humans tbody tr").count() == 4
                assert page.locator("#table-ranking-judge tbody tr").count() == 4
                assert "Kendall" in page.locator("#ranking-agreement").inner_text()
                page.screenshot(path=str(ARTIFACTS / f"dashboard-rankings{suffix}.png"), full_page=True)
                assert page.evaluate("document.documentElement.scrollWidth") <= width
                page.context.close()
        finally:
            browser.close()
    assert not problems, problems

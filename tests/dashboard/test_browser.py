"""Real Chromium renders both dashboard pages (plots included) under the strict CSP and saves screenshots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from playwright.sync_api import sync_playwright

from annotations.models import Dataset
from tests.browser.pages import signed_in_page
from tests.chromium import launch_chromium
from tests.dashboard.conftest import JUDGE_NAME

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_dashboard_pages_render_in_chromium(live_server: Any, stats_dataset: Dataset, researcher: User) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    problems: list[str] = []
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            # CSP violations and script errors surface as console errors; failed loads are checked by their
            # response, which names the URL.
            page = signed_in_page(browser, live_server.url, researcher, responses=True, problems=problems)

            page.goto(live_server.url + reverse("dashboard-dataset", args=[stats_dataset.pk]) + "?aspect=overall")
            page.wait_for_selector("svg.plot rect")
            assert page.locator("#table-agreement tbody tr").count() == 5
            # The htmx filter swaps the panels in place and pushes the URL.
            page.select_option("select[name=system]", "llm_b")
            page.wait_for_url("**system=llm_b**")
            page.wait_for_selector("#dataset-panels h2:has-text('llm_b')")
            page.screenshot(path=str(ARTIFACTS / "dashboard-dataset.png"), full_page=True)

            judges_url = reverse("dashboard-judges", args=[stats_dataset.pk])
            page.goto(live_server.url + judges_url + f"?judge={JUDGE_NAME}&aspect=overall")
            page.wait_for_selector("svg.plot circle")
            assert page.locator("svg.plot circle").count() > 50
            assert page.locator("table.confusion td").count() == 25
            page.select_option("select[name=aspect]", "fluency")
            page.wait_for_selector("h2:has-text('fluency')")
            page.screenshot(path=str(ARTIFACTS / "dashboard-judges.png"), full_page=True)
        finally:
            browser.close()
    assert not problems, problems
    assert (ARTIFACTS / "dashboard-dataset.png").stat().st_size > 10_000
    assert (ARTIFACTS / "dashboard-judges.png").stat().st_size > 10_000

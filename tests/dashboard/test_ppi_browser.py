"""Real Chromium renders the prediction-powered panel of the dataset page, switches its judge through the htmx
filter, and axe-core finds nothing serious on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from playwright.sync_api import sync_playwright

from judging.models import Judge, JudgeKind, JudgeScore
from tests.browser.pages import axe_violations
from tests.chromium import launch_chromium
from tests.dashboard.test_ppi import JUDGE, make_ppi_dataset

SCREENSHOT = Path("/tmp") / "evalsite-ppi-panel.png"


def panel_axe_violations(page: Any) -> list[str]:
    """Serious and critical axe-core findings inside the panel (the rest of the page has its own tests)."""
    return axe_violations(page, within="#ppi-panel")


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_ppi_panel_in_chromium(live_server: Any, researcher: User) -> None:
    dataset, _ = make_ppi_dataset(researcher)
    # A second judge that scored only half the answers: choosing it shows why its estimates are undefined.
    partial = Judge.objects.create(dataset=dataset, name="half judge", kind=JudgeKind.IMPORTED)
    JudgeScore.objects.bulk_create(
        JudgeScore(judge=partial, response=score.response, aspect_name="overall", value=score.value)
        for score in JudgeScore.objects.filter(judge__name=JUDGE).order_by("id")[::2]
    )
    client = Client()
    client.force_login(researcher)
    problems: list[str] = []
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            context.add_cookies(
                [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
            )
            page = context.new_page()
            page.on("pageerror", lambda error: problems.append(str(error)))
            url = reverse("dashboard-dataset", args=[dataset.pk])
            page.goto(f"{live_server.url}{url}?aspect=overall&ppi_judge={JUDGE}")
            page.wait_for_selector("#ppi-panel tbody tr")
            assert page.locator("#ppi-panel tbody tr").count() == 3
            assert page.locator("#ppi-panel tbody tr").nth(2).locator("td").first.inner_text() == "sys_a − sys_b"
            assert panel_axe_violations(page) == []
            page.screenshot(path=str(SCREENSHOT), full_page=True)
            page.select_option("select[name=ppi_judge]", "half judge")
            page.wait_for_url("**ppi_judge=half*judge")
            page.wait_for_selector("#ppi-panel h2:has-text('half judge')")
            assert (
                "prediction-powered inference needs the judge on every one" in page.locator("#ppi-panel").inner_text()
            )
            page.screenshot(path=str(SCREENSHOT.with_name("evalsite-ppi-panel-undefined.png")), full_page=True)
        finally:
            browser.close()
    assert not problems, problems

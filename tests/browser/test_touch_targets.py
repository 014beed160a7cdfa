"""On a phone-sized screen every control a finger must hit on the task page is at least 44 by 44 CSS pixels (the
WCAG 2.5.5 target size): the score buttons, the preference choices and the "none is appropriate" box."""

import re

import pytest
from playwright.sync_api import Browser, Page

from tests.browser.pages import ARTIFACTS, log_in
from tests.browser.test_revisit import campaign  # noqa: F401 - the fixture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TARGET = 44


def test_task_controls_are_finger_sized_at_390_px(
    browser: Browser,
    live_server,
    campaign,  # noqa: F811 - the fixture imported above
    annotator1,
) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844}, locale="en-US", has_touch=True)
    page: Page = context.new_page()
    try:
        base = live_server.url
        log_in(page, base, annotator1.username)
        page.goto(f"{base}/annotate/{campaign.pk}/")
        page.get_by_role("button", name="Start").click()
        page.wait_for_url(re.compile(r".*/tasks/[a-z2-7]{13}/$"))
        targets = page.evaluate(
            """() => Array.from(document.querySelectorAll(
                 'form[data-task-form] .scale-button, form[data-task-form] .preference label'))
               .map((el) => { const box = el.getBoundingClientRect();
                 return { text: el.textContent.trim(), width: box.width, height: box.height }; })"""
        )
        assert any("Candidate" in t["text"] for t in targets) and len(targets) > 6
        small = [t for t in targets if t["width"] < TARGET or t["height"] < TARGET]
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "touch-targets-390.png"), full_page=True)
        page.locator("fieldset.preference").screenshot(path=str(ARTIFACTS / "touch-targets-preference.png"))
        page.locator("form[data-task-form] .rating").first.screenshot(path=str(ARTIFACTS / "touch-targets-score.png"))
        assert small == []
        assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    finally:
        context.close()

"""Where the keyboard starts on a task page: on the first unfilled score, or on the submit button when every score
is already filled (a revisit, a restored draft); Enter and Ctrl+Enter submit from anywhere on the page, as the help
says; letters typed into the reason box stay text and fire no shortcut."""

import pytest
from playwright.sync_api import Page, expect

from annotations.models import SubmissionRevision
from tests.browser.pages import log_in, start_first_task
from tests.browser.test_annotator_flow import page, shot  # noqa: F401 - the fixture and its screenshots
from tests.browser.test_revisit import campaign, fill_task  # noqa: F401 - the fixture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def focused(tab: Page) -> str:
    return tab.evaluate(
        "() => { const e = document.activeElement; return e ? `${e.tagName}|${e.getAttribute('name') || ''}|"
        "${e.textContent.trim()}` : '' }"
    )


def test_focus_starts_where_the_work_is_and_enter_submits_from_anywhere(
    page: Page,  # noqa: F811 - the fixture imported above
    live_server,
    campaign,  # noqa: F811 - the fixture imported above
    annotator1,
):
    base = live_server.url
    log_in(page, base, annotator1.username)
    task_url = start_first_task(page, base, campaign)
    # A fresh task: the first score has the focus.
    expect(page.locator("input[name='r-1-1']").first).to_be_focused()
    fill_task(page, "3")
    # Letters typed for the reason are text: "i" does not open the instructions, "3" sets no score.
    instructions_open = page.locator("details.instructions").evaluate("d => d.open")
    page.locator("#rationale").press_sequentially(" if it is 3")
    expect(page.locator("#rationale")).to_have_value("Candidate 1 answers the question if it is 3")
    assert page.locator("details.instructions").evaluate("d => d.open") == instructions_open
    page.get_by_role("button", name="Submit and go to the next task").click()
    page.wait_for_url(lambda url: url != task_url)

    # A revisit opens with every score filled: the focus is on the submit button, one Enter away.
    page.goto(task_url)
    expect(page.locator(".editing-notice")).to_be_visible()
    expect(page.get_by_role("button", name="Save the correction")).to_be_focused()
    shot(page, "focus-on-submit")
    # Focus left on the page itself (a click on plain text): Ctrl+Enter still submits.
    page.locator("#rationale").fill("Candidate 1 answers it, on second reading")
    page.locator("h1").click()
    assert focused(page).startswith("BODY"), focused(page)
    page.keyboard.press("Control+Enter")
    page.wait_for_url(f"{base}/annotate/{campaign.pk}/")
    assert SubmissionRevision.objects.count() == 1

    # And plain Enter from the page itself, once more on the revisited task.
    page.goto(task_url)
    page.locator("#rationale").fill("Candidate 1 answers it, on a third reading")
    page.locator("h1").click()
    page.keyboard.press("Enter")
    page.wait_for_url(f"{base}/annotate/{campaign.pk}/")
    assert SubmissionRevision.objects.count() == 2
    assert page.problems == []  # type: ignore[attr-defined]

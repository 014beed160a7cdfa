"""On an annotator's first task the instructions are open above the form; the score that has the keyboard focus must
still be on screen, or the first keys typed go to a control the annotator cannot see."""

import pytest
from playwright.sync_api import Page, expect

from annotations.campaigns.setup import campaign_create
from tests.annotate.factories import lfqa_lines, make_dataset
from tests.browser.pages import log_in
from tests.browser.test_annotator_flow import page  # noqa: F401 - the fixture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Instructions as long as a real study's: they alone fill more than the window.
RULES = (f"{n}. Rule number {n}: read the whole answer first." for n in range(1, 41))
GUIDELINES = "# How to rate\n\n" + "\n".join(RULES)


def in_viewport(tab: Page, selector: str) -> dict[str, float]:
    """The element's box against the window, read from the layout (no timing involved)."""
    return tab.evaluate(
        """(selector) => {
            const box = document.querySelector(selector).getBoundingClientRect();
            return { top: box.top, bottom: box.bottom, height: window.innerHeight };
        }""",
        selector,
    )


def test_the_focused_first_score_is_in_view_below_open_instructions(
    page: Page,  # noqa: F811 - the fixture imported above
    live_server,
    researcher,
    annotator1,
) -> None:
    dataset = make_dataset("focus set", owner=researcher, lines=lfqa_lines(2, systems=2))
    campaign = campaign_create(
        name="Focus study", dataset=dataset, raters_per_item=1, annotators=[annotator1], guidelines=GUIDELINES
    )
    base = live_server.url
    log_in(page, base, annotator1.username)
    page.goto(f"{base}/annotate/{campaign.pk}/")
    page.get_by_role("button", name="Start").click()
    first_score = page.locator("input[name='r-1-1']").first
    expect(first_score).to_be_focused()
    assert page.locator("details.instructions").evaluate("d => d.open")  # still shown on the first task
    control = in_viewport(page, "#r-1-1")
    assert control["top"] >= 0 and control["bottom"] <= control["height"], control
    focused = page.evaluate(
        "() => { const b = document.activeElement.getBoundingClientRect(); return [b.top, b.bottom, innerHeight]; }"
    )
    assert focused[0] >= 0 and focused[1] <= focused[2], focused
    assert page.problems == []  # type: ignore[attr-defined]

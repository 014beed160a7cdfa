"""An annotator's typed answers survive a server that is briefly away, in real Chromium.

The browser is made to meet the server's outage answer (503 with Retry-After) on the submit and on every draft save,
as it does while the database restarts: the page must say the answer was not saved, keep the form as typed, keep a
copy in the browser that a reload puts back, and drop that copy once the server has stored the answer.

Screenshots go to tests/artifacts/ (gitignored)."""

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, Route, expect

from annotations.campaigns.setup import campaign_create
from annotations.models import Rating, RatingOrigin, Submission
from tests.annotate.factories import make_dataset
from tests.browser.pages import log_in, open_page, shooter

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RATIONALE = "Candidate 1 answers the question; typed while the server was away."


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    # The 503s this test serves are logged by Chromium and htmx; any other console error is a failure.
    with open_page(browser, width=390, height=844, expected=["status of 503", "Error Code 503"]) as page:
        yield page


@pytest.fixture
def campaign(live_server, researcher, annotator1):  # type: ignore[no-untyped-def]
    dataset = make_dataset("unsent", owner=researcher, items=2, systems=2)
    return campaign_create(
        name="Outage study", dataset=dataset, raters_per_item=1, annotators=[annotator1], scale_dropdowns=True
    )


def server_away(route: Route) -> None:
    route.fulfill(
        status=503,
        headers={"Retry-After": "5", "Content-Type": "text/html; charset=utf-8"},
        body="<h1>Briefly unavailable</h1>",
    )


shot = shooter("unsent")


def local_copies(page: Page) -> list[str]:
    return list(
        page.evaluate("Object.keys(window.localStorage).filter((key) => key.startsWith('evalsite:task-draft:'))")
    )


def test_typed_answers_survive_a_failed_submit_and_a_reload(page: Page, live_server, campaign, annotator1) -> None:  # type: ignore[no-untyped-def]
    base = live_server.url
    log_in(page, base, annotator1.username)
    page.goto(f"{base}/annotate/{campaign.pk}/")
    page.locator("form button.primary[autofocus]").click()
    page.wait_for_url(re.compile(r".*/tasks/[a-z2-7]{13}/$"))
    task_url = page.url

    # From here on the server is away for drafts and submits alike.
    page.route(re.compile(r".*/tasks/[a-z2-7]{13}/(draft|submit)/$"), server_away)
    chosen: dict[str, str] = {}
    for select in page.locator("select[data-aspect-control]").all():
        values = [value for value in select.locator("option").evaluate_all("(os) => os.map((o) => o.value)") if value]
        chosen[str(select.get_attribute("id"))] = values[-1]
        select.select_option(values[-1])
    page.locator("input[data-preference][value='1']").check()
    page.locator("#rationale").fill(RATIONALE)
    page.get_by_role("button", name="Submit and go to the next task").click()

    alert = page.locator("#submit-status")
    expect(alert).to_contain_text("Your answer was not saved")
    assert page.url == task_url
    expect(page.locator("#rationale")).to_have_value(RATIONALE)
    shot(page, "submit-failed-390")
    assert Submission.objects.count() == 0
    assert len(local_copies(page)) == 1

    # A reload while the server is still away for drafts: the browser's copy fills the form (the status line says
    # so only when the copy was put back; the page's leaving beacon, which Chromium sends past page.route, may
    # have reached the server too).
    page.reload()
    expect(page.locator("#draft-status")).to_have_text("Your unsent answers were restored from this browser.")
    for field_id, value in chosen.items():
        expect(page.locator(f"#{field_id}")).to_have_value(value)
    expect(page.locator("input[data-preference][value='1']")).to_be_checked()
    expect(page.locator("#rationale")).to_have_value(RATIONALE)
    shot(page, "restored-390")

    # The server is back: the same answer is sent and stored, and the browser's copy is dropped.
    page.unroute(re.compile(r".*/tasks/[a-z2-7]{13}/(draft|submit)/$"))
    page.get_by_role("button", name="Submit and go to the next task").click()
    page.wait_for_url(lambda url: url != task_url)
    expect(page.get_by_text("Saved. Here is your next task.")).to_be_visible()
    submission = Submission.objects.get()
    assert submission.rationale == RATIONALE
    assert Rating.objects.filter(origin=RatingOrigin.APP).count() == len(chosen)
    assert local_copies(page) == []
    assert page.problems == []  # type: ignore[attr-defined]

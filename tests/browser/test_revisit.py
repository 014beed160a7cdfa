"""An annotator in real Chromium corrects a submitted task: submit, reopen it from the campaign page's list, change
a value (half a correction survives a reload as a draft), submit again, and the researcher's flat export with history
holds the corrected answer and the earlier one. Screenshots go to tests/artifacts/ (gitignored)."""

import json
import os

import pytest
from django.test import Client
from django.urls import reverse
from playwright.sync_api import Page, expect

from annotations.campaigns.setup import campaign_create
from annotations.models import AssignmentDraft, Submission, SubmissionRevision
from tests.annotate.factories import lfqa_lines, make_dataset
from tests.browser.pages import log_in, start_first_task
from tests.browser.test_annotator_flow import page, shot  # noqa: F401 - the fixture and its screenshots
from tests.conftest import CAST_PASSWORD

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def campaign(live_server, researcher, annotator1):  # type: ignore[no-untyped-def]
    dataset = make_dataset("revisit set", owner=researcher, lines=lfqa_lines(2, systems=3))
    return campaign_create(
        name="Revisit study", dataset=dataset, raters_per_item=1, annotators=[annotator1], guidelines="Rate all."
    )


def choose(tab: Page, field: str, value: str) -> None:
    """One click on a value in the scale's row of buttons."""
    tab.locator(f"input[name='{field}'][value='{value}']").check()


def chosen(tab: Page, field: str, value: str) -> None:
    expect(tab.locator(f"input[name='{field}'][value='{value}']")).to_be_checked()


def fill_task(tab: Page, first: str) -> None:
    for row in (1, 2, 3):
        choose(tab, f"r-{row}-1", first if row == 1 else "2")
        choose(tab, f"r-{row}-2", "0")
    tab.locator("input[data-preference][value='1']").check()
    tab.locator("#rationale").fill("Candidate 1 answers the question")


def test_submit_reopen_correct_and_find_both_versions_in_the_export(
    page: Page,  # noqa: F811 - the fixture imported above
    live_server,
    campaign,
    annotator1,
    researcher,
):
    base = live_server.url
    log_in(page, base, annotator1.username)
    task_url = start_first_task(page, base, campaign)
    fill_task(page, "3")
    page.get_by_role("button", name="Submit and go to the next task").click()
    page.wait_for_url(lambda url: url != task_url)
    assert Submission.objects.count() == 1

    # the campaign page lists the submitted task; it opens with the answer filled in and a banner
    page.goto(f"{base}/annotate/{campaign.pk}/")
    listed = page.locator(".submitted-list a")
    expect(listed).to_have_count(1)
    shot(page, "revisit-list")
    listed.click()
    page.wait_for_url(task_url)
    expect(page.locator(".editing-notice")).to_be_visible()
    chosen(page, "r-1-1", "3")
    expect(page.locator("#rationale")).to_have_value("Candidate 1 answers the question")

    # half a correction survives a reload as a draft
    with page.expect_response(lambda r: r.url.endswith("/draft/") and r.status == 204):
        choose(page, "r-1-1", "1")
    for _attempt in range(50):
        if AssignmentDraft.objects.filter(values__contains={"r-1-1": "1"}).exists():
            break
        page.wait_for_timeout(100)
    page.reload()
    chosen(page, "r-1-1", "1")
    expect(page.locator("#draft-status")).to_have_text("Draft saved")
    shot(page, "revisit-editing")

    page.locator("#rationale").fill("On second reading candidate 1 is weak")
    page.get_by_role("button", name="Save the correction").click()
    page.wait_for_url(f"{base}/annotate/{campaign.pk}/")
    expect(page.get_by_text("Your correction is saved.")).to_be_visible()
    shot(page, "revisit-saved")
    page.wait_for_timeout(1200)  # longer than the draft delay: nothing late may bring a draft back
    assert not AssignmentDraft.objects.exists()
    assert SubmissionRevision.objects.count() == 1
    assert page.problems == []  # type: ignore[attr-defined]

    # the researcher's download: the corrected answer, then the earlier version with its replacement time
    client = Client()
    assert client.login(username=researcher.username, password=CAST_PASSWORD)
    response = client.get(reverse("dataset-export", args=[campaign.dataset.pk, "flat-jsonl-history"]))
    assert response.status_code == 200
    rows = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    mine = [row for row in rows if row["origin"] == "app"]
    current = [row for row in mine if row["replaced_at"] is None]
    earlier = [row for row in mine if row["replaced_at"] is not None]
    assert {row["version"] for row in current} == {2} and {row["version"] for row in earlier} == {1}
    assert [row["rationale"] for row in current if row["kind"] == "preference"] == [
        "On second reading candidate 1 is weak"
    ]
    assert [row["rationale"] for row in earlier if row["kind"] == "preference"] == ["Candidate 1 answers the question"]
    first_aspect = campaign.aspects.order_by("position").first().name
    changed = {row["system"] for row in current if row["aspect"] == first_aspect and row["value"] == 1}
    assert len(changed) == 1
    (system,) = changed
    assert [row["value"] for row in earlier if row["aspect"] == first_aspect and row["system"] == system] == [3]

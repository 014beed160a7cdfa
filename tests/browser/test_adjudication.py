"""Adjudication in real Chromium, in English and in Japanese: three raters disagree on two tasks, an adjudicator
settles both with the scale buttons and a reason, and the researcher's consensus export shows the final values
beside the raw ratings. axe-core finds nothing serious on the queue or the dispute page.

Screenshots go to tests/artifacts/ (gitignored)."""

import json
from collections.abc import Callable, Iterator

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Browser, Page, expect

from annotations.models import Adjudication, Dispute, Rating
from annotations.roles import adjudicator_grant
from tests.annotate.factories import disputed_campaign, make_dataset, rate_in_disagreement
from tests.browser.pages import axe_violations, log_in, page_factory, shooter
from tests.conftest import CAST_PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


shot = shooter("adjudication")


@pytest.fixture(params=["en-US", "ja-JP"])
def locale(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def context_for(browser: Browser, locale: str) -> Iterator[Callable[[], Page]]:
    with page_factory(browser, locale=locale) as make:
        yield make


def test_three_raters_disagree_an_adjudicator_settles_both_and_the_export_shows_consensus(  # type: ignore[no-untyped-def]
    live_server, context_for, locale, researcher, annotators
) -> None:
    adjudicator = adjudicator_grant(
        user=User.objects.create_user("adjudicator1", password=CAST_PASSWORD, email="adj@example.test")
    )
    campaign = disputed_campaign(
        make_dataset("disputed demo", owner=researcher, items=2, systems=2), annotators, adjudicator
    )
    rate_in_disagreement(campaign, annotators)
    assert Dispute.objects.filter(campaign=campaign).count() == 2
    raw_before = sorted(Rating.objects.values_list("id", "value"))
    tag = locale[:2]

    page = context_for()
    log_in(page, live_server.url, "adjudicator1", by_label=False)
    expect(page.locator("#my-disputes")).to_be_visible()
    with page.expect_navigation():
        page.locator("section[aria-labelledby=my-disputes] a").click()
    expect(page.locator("#dispute-queue tbody tr")).to_have_count(2)
    assert axe_violations(page) == []
    shot(page, f"{tag}-queue")

    for round_number in (1, 2):
        with page.expect_navigation():
            page.locator("#dispute-queue tbody tr a").first.click()
        expect(page.locator(".rater-answers").first).to_be_visible()
        for username in ("annotator1", "annotator2", "annotator3"):
            expect(page.locator("main")).not_to_contain_text(username)
        if round_number == 1:
            assert axe_violations(page) == []
            shot(page, f"{tag}-dispute")
        fieldsets = page.locator("#adjudication-form fieldset.scale-field")
        expect(fieldsets).to_have_count(2)
        for index in range(2):
            fieldsets.nth(index).locator("label.scale-button").nth(2).click()  # the value 2 on the 0-3 scale
        page.locator("#adjudication-reason").fill(f"two of three raters near 2 (round {round_number})")
        with page.expect_navigation():
            page.locator("#adjudication-form button[type=submit]").click()
        expect(page.locator(".messages .success")).to_be_visible()
    expect(page.locator("#dispute-queue tbody tr")).to_have_count(1)  # the empty-queue row
    shot(page, f"{tag}-queue-empty")

    assert Adjudication.objects.count() == 4 and set(Adjudication.objects.values_list("value", flat=True)) == {2.0}
    assert sorted(Rating.objects.values_list("id", "value")) == raw_before

    researcher_page = context_for()
    log_in(researcher_page, live_server.url, "researcher", by_label=False)
    response = researcher_page.request.get(f"{live_server.url}/datasets/{campaign.dataset.pk}/export/jsonl/")
    assert response.status == 200
    items = [json.loads(line) for line in response.text().splitlines()]
    assert len(items) == 2
    for item in items:
        for answer in item["turns"][0]["responses"].values():
            assert answer["consensus"] == {"factuality": 2}
            assert sorted(answer["human_evals"]["factuality"]) == [0, 2, 3]
    researcher_page.goto(f"{live_server.url}/adjudicate/?settled=1")
    expect(researcher_page.locator("#dispute-queue tbody tr")).to_have_count(2)
    shot(researcher_page, f"{tag}-settled")

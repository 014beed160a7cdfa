"""A reviewer in real Chromium: blinded fact review by keyboard, a split through htmx, then the report.

Screenshots go to tests/artifacts/ (gitignored)."""

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from judging import services as engine
from judging.factscore import services
from judging.factscore.models import AtomicFact, FactLabel, FactOrigin, FactReviewAssignment
from tests.browser.pages import log_in, open_page, shooter
from tests.factscore.factories import factscore_config, make_fact_dataset, script_world

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    with open_page(browser, height=800) as page:
        yield page


shot = shooter("factscore")


@pytest.fixture
def campaign(world, world_provider, eager, researcher, annotator1):  # type: ignore[no-untyped-def]
    script_world(world)
    dataset = make_fact_dataset(owner=researcher)
    run = engine.judge_run_launch(dataset=dataset, config=factscore_config(world_provider), launched_by=None)
    run.refresh_from_db()
    assert run.status == "succeeded", run.notes
    return services.fact_review_campaign_create(
        name="Fact check study", run=run, raters_per_answer=1, annotators=[annotator1]
    )


def test_reviewer_labels_facts_by_keyboard_and_splits_one(live_server, page: Page, campaign, researcher) -> None:  # type: ignore[no-untyped-def]
    base = live_server.url
    log_in(page, base, "annotator1")
    page.goto(f"{base}/factscore/review/")
    with page.expect_navigation():
        page.get_by_role("button", name="Fact check study").click()
    expect(page.locator("#facts li.fact").first).to_be_visible()
    html = page.content()
    for secret in ("alpha", "beta", "gpt-4o-mini", "fs-test", "P(true)"):
        assert secret not in html
    shot(page, "task")

    # Split the first fact through htmx; a label chosen before the swap survives it.
    facts = page.locator("#facts li.fact")
    count = facts.count()
    if count > 1:
        page.keyboard.press("j")
        page.keyboard.press("n")  # label the second fact "not supported" first
        page.keyboard.press("k")
        page.keyboard.press("k")
    page.keyboard.press("e")
    box = page.locator("#facts li.fact").first.locator("textarea")
    expect(box).to_be_focused()
    box.fill("First part of the fact.\nSecond part of the fact.")
    with page.expect_response(lambda r: r.url.endswith("/edit/") and r.status == 200):
        page.locator("#facts li.fact").first.get_by_role("button", name="Split").click()
    expect(page.locator("#facts li.fact", has_text="First part of the fact.")).to_be_visible()
    expect(page.locator("#facts li.fact", has_text="Second part of the fact.")).to_be_visible()
    if count > 1:
        expect(page.locator("#facts li.fact").nth(2).locator("input[value=not_supported]")).to_be_checked()
    shot(page, "split")

    # Label every remaining fact with the keyboard, then Enter submits.
    page.locator("#facts li.fact").first.focus()
    for index in range(page.locator("#facts li.fact").count()):
        if not page.locator("#facts li.fact").nth(index).locator("input:checked").count():
            page.locator("#facts li.fact").nth(index).focus()
            page.keyboard.press("s")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    reviewed = 1

    # The other answers: s for every fact, Enter.
    while page.locator("#facts li.fact").count():
        for _ in range(page.locator("#facts li.fact").count()):
            page.keyboard.press("s")
        with page.expect_navigation():
            page.keyboard.press("Enter")
        reviewed += 1
    expect(page.locator(".all-done")).to_be_visible()
    assert reviewed == 5
    assert page.problems == []  # type: ignore[attr-defined]

    assert FactReviewAssignment.objects.filter(campaign=campaign, status="submitted").count() == 5
    split = AtomicFact.objects.filter(origin=FactOrigin.SPLIT)
    assert sorted(split.values_list("text", flat=True)) == ["First part of the fact.", "Second part of the fact."]
    original = split.first().parent
    assert original.origin == FactOrigin.MODEL and not FactLabel.objects.filter(fact=original).exists()
    assert FactLabel.objects.filter(fact__in=split, label="supported").count() == 2

    # The researcher's report now compares the estimator with the review.
    page.context.clear_cookies()
    log_in(page, base, "researcher")
    page.goto(f"{base}/factscore/runs/{campaign.run_id}/")
    expect(page.locator("table[data-estimator] tbody tr")).to_have_count(2)
    expect(page.locator("[data-ranking]")).to_be_visible()
    expect(page.locator("[data-agreement]")).to_contain_text("Krippendorff")
    shot(page, "report")
    assert page.problems == []  # type: ignore[attr-defined]

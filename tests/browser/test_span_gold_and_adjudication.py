"""Span gold and span adjudication in real Chromium, in English and Japanese, at 1,280 px and 390 px.

The researcher's item page shows the span gold verdicts with their reasons; the adjudicator sees both raters' error
spans highlighted on a disputed answer, starts the final set from one rater's errors, edits its severity and records
it. axe-core finds nothing serious and nothing scrolls sideways; screenshots go to tests/artifacts/."""

import io
import json
import re
from collections.abc import Callable, Iterator

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Browser, Page, expect

from annotations.adjudication.services import adjudication_rule_set
from annotations.datasets.importing import dataset_import
from annotations.models import AdjudicatedSpan, Adjudication, Dispute, Item
from annotations.roles import adjudicator_grant
from annotations.rubrics.specs import parse_rubric
from tests.annotations.adjudication.test_span_adjudication import _submit_all
from tests.browser.pages import check_layout, log_in, page_factory
from tests.conftest import CAST_PASSWORD
from tests.spans.test_span_gold import GOLD_SPANS, span_line
from tests.spans.world import SPAN_RUBRIC, span_campaign

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(params=[("en-US", 1280), ("ja-JP", 390)], ids=["english-1280", "japanese-390"])
def setting(request: pytest.FixtureRequest) -> tuple[str, int]:
    return request.param


@pytest.fixture
def make_page(browser: Browser, setting: tuple[str, int]) -> Iterator[Callable[[], Page]]:
    locale, width = setting
    with page_factory(browser, locale=locale, width=width, has_touch=width < 500) as make:
        yield make


def tap(page: Page, selector: str, touch: bool) -> None:
    if touch:
        page.locator(selector).tap()
    else:
        page.locator(selector).click()


def test_the_item_page_shows_span_gold_verdicts(live_server, make_page, setting, researcher) -> None:  # type: ignore[no-untyped-def]
    gold = {"kind": "gold", "expected": {"sys_a": {"mqm": GOLD_SPANS}}}
    dataset = dataset_import(
        stream=io.BytesIO(span_line(gold)), name="span gold", rubric=parse_rubric(SPAN_RUBRIC, source="file"),
        owner=researcher,
    ).dataset  # fmt: skip
    item = Item.objects.get(dataset=dataset)
    page = make_page()
    log_in(page, live_server.url, researcher.username, by_label=False)
    page.goto(f"{live_server.url}/research/datasets/{dataset.pk}/items/{item.pk}/")
    section = page.locator("#span-gold")
    expect(section.locator("tbody tr")).to_have_count(3)
    expect(section).to_contain_text("«eat»")
    expect(page.locator("#gold-1-1")).to_have_value(re.compile(r"^10-13 Fluency/Grammar major"))
    page.set_viewport_size({"width": 390, "height": 900})
    check_layout(page, f"span-gold-item-{setting[0]}")


def test_an_adjudicator_settles_disputed_spans(live_server, make_page, setting, researcher, annotators) -> None:  # type: ignore[no-untyped-def]
    locale, width = setting
    touch = width < 500
    adjudicator = adjudicator_grant(user=User.objects.create_user("adjudicator1", password=CAST_PASSWORD))
    campaign = span_campaign(annotators[:2], owner=researcher, raters_per_item=2)
    adjudication_rule_set(
        campaign=campaign, max_spread=None, preference_splits=False, min_span_f1=0.5, adjudicators=[adjudicator]
    )
    _submit_all(campaign, annotators[0], marks=True)
    _submit_all(campaign, annotators[1], marks=False)
    dispute = Dispute.objects.order_by("task__position").first()
    assert dispute is not None

    page = make_page()
    log_in(page, live_server.url, "adjudicator1", by_label=False)
    page.goto(f"{live_server.url}/adjudicate/disputes/{dispute.pk}/")
    expect(page.locator(".rater-spans")).to_have_count(2)
    expect(page.locator(".rater-spans mark.span-major")).to_have_count(1)
    for username in ("annotator1", "annotator2"):
        expect(page.locator("main")).not_to_contain_text(username)
    check_layout(page, f"span-dispute-{locale}")

    # Start from the first rater's errors, make the error minor, and record it with a reason.
    tap(page, ".rater-spans:first-of-type [data-span-copy]", touch)
    expect(page.locator("[data-span-cell] [data-span-list] li")).to_have_count(1)
    tap(page, "[data-span-cell] [data-span-list] li:nth-child(1) [data-span-edit]", touch)
    tap(page, "[data-span-cell] [data-span-severity][value='minor']", touch)
    tap(page, "[data-span-cell] [data-span-save]", touch)
    expect(page.locator("[data-span-cell] .span-minor")).not_to_have_count(0)
    page.locator("#adjudication-reason").fill("One real error, but a small one.")
    page.locator("#adjudication-form").screenshot(path=f"tests/artifacts/span-dispute-{locale}-{width}-final.png")
    with page.expect_navigation():
        tap(page, "#adjudication-form button[type=submit]", touch)
    expect(page.locator(".messages .success")).to_be_visible()

    adjudication = Adjudication.objects.get(dispute=dispute)
    assert adjudication.value == 1.0
    assert list(AdjudicatedSpan.objects.values_list("start", "end", "category", "severity")) == [
        (0, 1, "Fluency/Grammar", "minor")
    ]
    assert json.dumps(adjudication.raw)  # stored as the token the export carries
    page.goto(f"{live_server.url}/adjudicate/disputes/{dispute.pk}/")
    expect(page.locator("#final-values")).to_contain_text("Fluency/Grammar" if locale == "en-US" else "流暢さ/文法")
    check_layout(page, f"span-dispute-settled-{locale}")

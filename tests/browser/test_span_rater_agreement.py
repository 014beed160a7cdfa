"""The raters' span agreement inside a campaign's quality panel, in real Chromium, in English and Japanese at 390 px and
1,280 px: the figures of the hand-worked example, the panel loaded again when a rater is excluded, no sideways
scrolling and no serious axe-core finding. Screenshots go to tests/artifacts/ (gitignored)."""

from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from annotations.models import Rater
from tests.browser.pages import ARTIFACTS, check_layout, signed_in_page
from tests.judging.test_span_rater_agreement import rate_everything
from tests.spans.world import span_campaign

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_span_agreement_in_the_quality_panel(live_server: Any, browser: Browser, researcher: Any, annotators: Any):
    campaign = span_campaign(annotators, owner=researcher, raters_per_item=3)
    rate_everything(campaign, annotators)
    excluded = Rater.objects.get(user=annotators[2], dataset=campaign.dataset).pseudonym
    url = f"{live_server.url}/campaigns/{campaign.pk}/progress/"

    page = signed_in_page(browser, live_server.url, researcher)
    page.goto(url)
    panel = page.locator("#span-rater-agreement")
    pairwise = panel.locator("table.span-pairwise tbody tr")
    expect(pairwise).to_have_count(5)
    expect(pairwise.nth(0)).to_contain_text("0.543")  # 19/35 (tests/judging/test_span_rater_agreement.py)
    expect(pairwise.nth(2)).to_contain_text("0.778")  # 7/9
    expect(pairwise.nth(0)).to_contain_text("3 of 3")
    panel.get_by_text("Each pair of raters").click()
    expect(panel.locator("table.span-pairs tbody tr")).to_have_count(15)
    check_layout(page, "span-agreement-en")

    # Excluding a rater redraws the quality panel, which loads the span figures again without them.
    row = page.locator(".quality-table tbody tr", has=page.get_by_role("rowheader", name=annotators[2].username))
    row.get_by_label("Reason for excluding").fill("marks whole phrases")
    row.get_by_role("button", name="Exclude from the statistics").click()
    expect(page.locator("[data-span-excluded]")).to_contain_text(excluded)
    expect(page.locator("#span-rater-agreement table.span-pairwise tbody tr").nth(0)).to_contain_text("0.600")
    expect(page.locator("#span-rater-agreement table.span-pairwise tbody tr").nth(0)).to_contain_text("1 of 1")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.locator("#span-rater-agreement").screenshot(path=str(ARTIFACTS / "span-agreement-after-exclusion.png"))
    assert page.problems == []  # type: ignore[attr-defined]
    page.context.close()

    japanese = signed_in_page(browser, live_server.url, researcher, locale="ja-JP")
    japanese.goto(url)
    heading = japanese.locator("#span-rater-agreement-title")
    expect(heading).to_have_text("評価者間の誤りスパンの一致度")
    expect(japanese.locator("#span-rater-agreement table.span-pairwise tbody tr").nth(0)).to_contain_text("1 組中 1 組")
    japanese.locator("#span-rater-agreement").get_by_text("評価者の組ごと").click()
    check_layout(japanese, "span-agreement-ja")
    assert japanese.problems == []  # type: ignore[attr-defined]
    japanese.context.close()


def test_each_rater_against_gold_spans(live_server: Any, browser: Browser, researcher: Any, annotators: Any):
    from tests.judging.test_span_gold_agreement import GOLD, MARKS
    from tests.spans.test_span_gold import _answer_everything, _gold_campaign

    campaign, item = _gold_campaign(researcher, annotators, GOLD)
    for user in annotators:
        _answer_everything(campaign, item, user, MARKS[user.username])
    pseudonym = dict(Rater.objects.filter(dataset=campaign.dataset).values_list("user__username", "pseudonym"))
    url = f"{live_server.url}/campaigns/{campaign.pk}/progress/"

    for locale, caption, nothing, name in (
        ("en-US", "Each rater against the gold spans", "the rater marked nothing", "span-gold-en"),
        ("ja-JP", "評価者ごとのゴールドスパンとの一致", "評価者はゴールド回答で何も指摘していない", "span-gold-ja"),
    ):
        page = signed_in_page(browser, live_server.url, researcher, locale=locale)
        page.goto(url)
        table = page.locator("#span-rater-agreement table.span-gold")
        expect(table.locator("caption")).to_have_text(caption)
        # Three raters, four conventions each (tests/judging/test_span_gold_agreement.py has the hand-worked figures).
        expect(table.locator("tbody")).to_have_count(3)
        expect(table.locator("tbody tr")).to_have_count(15)  # a heading row per rater
        first = table.locator(f'tbody[data-gold-rater="{pseudonym["annotator1"]}"]')
        expect(first.locator("tr").nth(1)).to_contain_text("0.429")  # character recall 3/7
        expect(first.locator("tr").nth(3)).to_contain_text("0.667")  # span F1 2/3
        expect(table.locator(f'tbody[data-gold-rater="{pseudonym["annotator3"]}"]')).to_contain_text(nothing)
        check_layout(page, name)
        for width in (390, 1280):
            page.set_viewport_size({"width": width, "height": 900})
            table.screenshot(path=str(ARTIFACTS / f"{name}-table-{width}.png"))
        assert page.problems == []  # type: ignore[attr-defined]
        page.context.close()

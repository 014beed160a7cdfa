"""The researcher's monitoring views in real Chromium, in English and Japanese, at a phone's (390 px) and a desktop's
(1,280 px) width: the progress page's confidence sequences over time (charts and table), the quality panel's
reliability and posterior-label tables, and the hybrid settings page's sampling form with its strata. No serious
axe-core finding, no sideways scrolling; full-page and section screenshots go to tests/artifacts/ (gitignored)."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from playwright.sync_api import Browser, Page, expect

from annotations.models import Campaign, HumanSampling, Response, SamplingStratum
from judging.models import Judge, JudgeKind, JudgeScore
from tests.annotate.quality_world import rate, study
from tests.annotate.test_quality_reliability import PLANS
from tests.browser import pages
from tests.browser.pages import ARTIFACTS, LAYOUT_WIDTHS, log_in, new_page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WORDS = {
    "en": {"sequences": "Confidence sequences over time", "posteriors": "Posterior labels (rater model)"},
    "ja": {"sequences": "信頼系列の推移", "posteriors": "事後ラベル（評価者モデル）"},
}


def monitored(researcher, annotators) -> Campaign:  # type: ignore[no-untyped-def]
    campaign = study(researcher, annotators, items=8, raters_per_item=3)
    campaign.dataset.aspects.filter(name="factuality").update(level="nominal")
    for position in range(8):
        for user, plan in zip(annotators, PLANS.values(), strict=True):
            rate(campaign, position, user, plan)
    judge = Judge.objects.create(dataset=campaign.dataset, name="run-judge", kind=JudgeKind.RUN)
    for response in Response.objects.filter(turn__item__dataset=campaign.dataset):
        JudgeScore.objects.create(
            judge=judge, response=response, aspect_name="factuality", value=float(response.turn.item.position % 4)
        )
    Campaign.objects.filter(pk=campaign.pk).update(
        human_sampling=HumanSampling.STRATIFIED, sampling_stratum=SamplingStratum.CONFIDENCE
    )
    return campaign


def shoot_section(page: Page, selector: str, name: str) -> None:
    for width in LAYOUT_WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.locator(selector).screenshot(path=str(ARTIFACTS / f"{name}-{width}.png"))
        assert pages.axe_violations(page, within=selector) == [], f"{name} at {width} px"
    page.set_viewport_size({"width": 1280, "height": 900})


@pytest.mark.parametrize("locale", ["en-US", "ja-JP"])
def test_monitoring_pages_are_accessible_at_both_widths(  # type: ignore[no-untyped-def]
    live_server, browser: Browser, researcher, annotators, locale: str
) -> None:
    cache.clear()
    tag = locale[:2]
    campaign = monitored(researcher, annotators)
    page = new_page(browser, locale=locale)
    try:
        log_in(page, live_server.url, researcher.username, by_label=False)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.goto(f"{live_server.url}/campaigns/{campaign.pk}/progress/")
        assert page.locator("html").get_attribute("lang") == tag
        sequences = page.locator("#sequences-panel")
        expect(sequences.get_by_role("heading", name=WORDS[tag]["sequences"])).to_be_visible()
        # Per aspect: two means, a difference and a win rate; the judge's agreement is drawn on factuality and
        # undefined on amount_info, which the judge did not score.
        expect(sequences.locator("table.sequence-table")).to_have_count(2)
        expect(sequences.locator("tr[data-kind=agreement]")).to_have_count(2)
        expect(sequences.locator("svg.sequence-chart")).to_have_count(9)
        expect(sequences.locator("tr[data-kind=agreement] td.undefined")).to_have_count(1)
        expect(page.locator("#posterior-labels").get_by_role("heading", name=WORDS[tag]["posteriors"])).to_be_visible()
        # Dawid–Skene and MACE on the nominal factuality, rater severity on amount_info.
        expect(page.locator("table.posterior-table")).to_have_count(3)
        expect(page.locator("table.reliability-table")).to_have_count(1)
        pages.check_layout(page, f"monitoring-progress-{tag}")
        shoot_section(page, "#sequences-panel", f"monitoring-sequences-{tag}")
        shoot_section(page, "#quality-panel", f"monitoring-quality-{tag}")

        page.goto(f"{live_server.url}/research/campaigns/{campaign.pk}/hybrid/")
        expect(page.locator("form.sampling-form")).to_be_visible()
        expect(page.locator("#id_sampling_stratum")).to_have_value(SamplingStratum.CONFIDENCE)
        pages.check_layout(page, f"monitoring-hybrid-{tag}")
        shoot_section(page, "form.sampling-form", f"monitoring-strata-form-{tag}")
        assert page.problems == []  # type: ignore[attr-defined]
    finally:
        page.context.close()

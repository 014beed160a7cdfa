"""The judge x judge matrix on the judges page and the planning line on a campaign's page: the same numbers as
the command line, Holm's adjustment across pairs, and real Chromium screenshots in English and Japanese."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from playwright.sync_api import sync_playwright

from annotations.models import Dataset
from judging.analysis.decisions import PLAN_ASSUMED_ICC, campaign_plan, judge_matrix
from judging.analysis.reports import agreement_report
from judging.analysis.selectors import rating_scope
from judging.statistics.judge_comparison import holm_adjust
from judging.statistics.planning import expected_width, items_for_width
from tests.browser.pages import signed_in_page
from tests.chromium import launch_chromium
from tests.dashboard.conftest import ASPECTS, JUDGE_NAME, ScopedData
from tests.dashboard.test_decisions import NOISY, RANDOM, TWO_JUDGES, two_judges  # noqa: F401 -- the fixture

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"


def compare(first: str, second: str) -> dict[str, Any]:
    out = io.StringIO()
    call_command("compare_judges", "--dataset", TWO_JUDGES, "--judges", first, second, "--json", stdout=out)
    return json.loads(out.getvalue())["aspects"]  # type: ignore[no-any-return]


@pytest.mark.django_db
def test_judge_matrix_equals_the_command_and_adjusts_with_holm(
    two_judges: tuple[Dataset, list[dict[str, Any]]],  # noqa: F811 -- the imported fixture
) -> None:
    dataset, _ = two_judges
    matrix = judge_matrix(dataset)
    assert (matrix["correction"], matrix["level"], matrix["coefficient"]) == ("Holm", "response", "pearson")
    names = sorted([JUDGE_NAME, NOISY, RANDOM])
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    for aspect in ASPECTS:
        entry = matrix["aspects"][aspect]
        assert entry["judges"] == names and entry["pairs"] == 3
        reports = {pair: compare(*pair)[aspect] for pair in pairs}
        adjusted = holm_adjust([reports[pair]["williams"]["p_two_sided"]["value"] for pair in pairs])
        for pair, p_holm in zip(pairs, adjusted, strict=True):
            row, column = names.index(pair[0]), names.index(pair[1])
            cell = entry["rows"][row]["cells"][column]
            mirror = entry["rows"][column]["cells"][row]
            assert cell["difference"] == reports[pair]["difference"]
            assert cell["difference_ci95"] == reports[pair]["difference_ci95"]
            assert cell["n"] == reports[pair]["n"]
            assert cell["p_holm"]["value"] == pytest.approx(p_holm, abs=1e-12)
            assert mirror["difference"]["value"] == pytest.approx(-cell["difference"]["value"], abs=1e-12)
            significant = p_holm is not None and p_holm < 0.05
            assert (cell["better"] is not None) == significant
        assert entry["rows"][0]["cells"][0] is None
    # The judge that copies the humans with less noise beats the one that scores at random on the overall aspect.
    overall = matrix["aspects"]["overall"]
    cell = overall["rows"][names.index(JUDGE_NAME)]["cells"][names.index(RANDOM)]
    assert cell["better"] == "row"


@pytest.mark.django_db
def test_judges_page_shows_the_matrix_and_its_reading(
    two_judges: tuple[Dataset, list[dict[str, Any]]],  # noqa: F811 -- the imported fixture
    researcher: User,
) -> None:
    dataset, _ = two_judges
    client = Client()
    client.force_login(researcher)
    page = client.get(reverse("dashboard-judges", args=[dataset.pk]))
    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="judge-matrix"' in text
    assert "Holm" in text
    assert f"{JUDGE_NAME} tracks the humans better than {RANDOM}" in text


@pytest.mark.django_db
def test_campaign_page_shows_what_its_size_buys(scoped: ScopedData, researcher: User) -> None:
    campaign = scoped.campaign_a
    client = Client()
    client.force_login(researcher)
    progress = client.get(reverse("campaign-progress", args=[campaign.pk]))
    assert progress.status_code == 200
    assert reverse("campaign-plan", args=[campaign.pk]) in progress.content.decode()  # loaded by htmx
    page = client.get(reverse("campaign-plan", args=[campaign.pk]))
    assert page.status_code == 200
    lines = page.context["plan"]
    assert [line["aspect"] for line in lines] == ["factuality", "overall"]
    answers = sum(task.candidates for task in progress.context["progress"].tasks)
    report = agreement_report(scoped.dataset, rating_scope("app", campaign))
    for line in lines:
        observed = report["aspects"][line["aspect"]]["icc"]["ICC1"]["value"]
        icc = observed if observed is not None and 0 < observed < 1 else PLAN_ASSUMED_ICC
        assert line["assumed"] == (icc == PLAN_ASSUMED_ICC)
        assert line["icc"] == pytest.approx(icc, abs=1e-12)
        assert line["answers"] == answers and line["raters"] == 2
        assert line["half_width"] == pytest.approx(expected_width("icc", icc, answers, raters=2) / 2, abs=1e-12)
        assert line["answers_for_target"] == items_for_width("icc", icc, 0.1, raters=2)
        assert f"±{line['half_width']:.2f} on the ICC" in page.content.decode()
    assert campaign_plan(campaign, 1) == []


def test_the_plan_panel_refuses_other_methods_and_other_people(
    scoped: ScopedData, researcher: User, annotator1: User
) -> None:
    url = reverse("campaign-plan", args=[scoped.campaign_a.pk])
    client = Client()
    assert client.get(url).status_code == 302  # to the login page
    client.force_login(annotator1)
    assert client.get(url).status_code == 403
    client.force_login(researcher)
    assert client.post(url).status_code == 405
    assert client.get(reverse("campaign-plan", args=[10**9])).status_code == 404


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_matrix_and_plan_render_in_chromium_in_english_and_japanese(
    live_server: Any,
    two_judges: tuple[Dataset, list[dict[str, Any]]],  # noqa: F811 -- the imported fixture
    scoped: ScopedData,
    researcher: User,
) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    dataset, _ = two_judges
    problems: list[str] = []
    judges_url = live_server.url + reverse("dashboard-judges", args=[dataset.pk])
    progress_url = live_server.url + reverse("campaign-progress", args=[scoped.campaign_a.pk])
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            for locale, width in (("en-US", 1280), ("ja-JP", 390)):
                page = signed_in_page(
                    browser, live_server.url, researcher, width=width, locale=locale, problems=problems
                )
                page.goto(judges_url)
                page.wait_for_selector("#judge-matrix table.judge-matrix")
                assert page.locator("#judge-matrix table.judge-matrix").count() == len(ASPECTS)
                assert page.locator("#judge-matrix td.better").count() >= 1
                scroll = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
                assert scroll <= 0, f"the judges page scrolls sideways by {scroll}px at {width}px"
                page.locator("#judge-matrix").screenshot(path=str(ARTIFACTS / f"judge-matrix-{locale}.png"))
                page.goto(progress_url)
                page.wait_for_selector("#campaign-plan .plan-line")
                scroll = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
                assert scroll <= 0, f"the campaign page scrolls sideways by {scroll}px at {width}px"
                heading = page.locator("#campaign-plan-title").inner_text()
                if locale == "ja-JP":
                    assert page.locator("html").get_attribute("lang") == "ja"
                    assert heading != "What this campaign's size buys"
                    assert "ICC" in page.locator("#campaign-plan").inner_text()
                page.locator("#campaign-plan").screenshot(path=str(ARTIFACTS / f"campaign-plan-{locale}.png"))
                page.context.close()
        finally:
            browser.close()
    assert not problems, problems
    for name in ("judge-matrix-en-US", "judge-matrix-ja-JP", "campaign-plan-en-US", "campaign-plan-ja-JP"):
        assert (ARTIFACTS / f"{name}.png").stat().st_size > 5_000

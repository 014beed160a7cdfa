"""A hybrid campaign with uncertainty sampling and a stopping rule, run to its stop in real Chromium with a real
Celery worker and the fake provider on a real socket: the researcher chooses the policy and states "width ≤ w" on
the hybrid settings page, calibrates and applies; the worker sends each task to the humans with a recorded
probability; an annotator rates in the browser until the campaign stops handing out tasks and says so; the progress
page shows the evidence and the flat CSV export each task's sampling probability.

Screenshots go to tests/artifacts/ (gitignored)."""

import csv
import io
import os
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Browser, Page, expect

from annotations.models import Assignment, AssignmentStatus, Campaign, Task
from judging.hybrid.selectors import stopping_evidence
from judging.models import HybridApplyStatus, HybridCalibration
from tests.browser import test_hybrid_campaign as hybrid_browser
from tests.browser.pages import ARTIFACTS
from tests.browser.test_adjudication import log_in
from tests.conftest import wait_for
from tests.fakeprovider import FakeProvider

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

# The hybrid campaign test's fake judge (sure below quality 5, hesitant at 5), its worker settings and rating step.
fake = hybrid_browser.fake
WORKER_ENV = hybrid_browser.WORKER_ENV
rate_shown_task = hybrid_browser.rate_shown_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ITEMS = 60
WIDTH = 2.5


def shot(page: Page, step: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"active-sampling-{step}.png"), full_page=True)


def rate_until_stopped(page: Page, base: str, campaign: Campaign) -> int:
    """Rates each task served, with its answer's true quality read from the text. After a rating that meets the
    rule, waits for the worker to stop the campaign, so the claim that follows meets a stopped campaign."""
    page.goto(f"{base}/annotate/{campaign.pk}/")
    with page.expect_navigation():
        page.locator("form button.primary[autofocus]").click()
    rated = 0
    while "/tasks/" in page.url:
        rate_shown_task(page)
        rated += 1
        evidence = stopping_evidence(Campaign.objects.get(pk=campaign.pk))
        if evidence is not None and evidence["met"]:
            wait_for(
                lambda: Campaign.objects.filter(pk=campaign.pk, stopped_at__isnull=False).exists(),
                timeout=120,
                message="the worker to stop the campaign once its rule is met",
            )
    expect(page).to_have_url(f"{base}/annotate/{campaign.pk}/")
    return rated


def test_uncertainty_sampling_runs_to_its_stop_and_the_export_shows_each_probability(  # type: ignore[no-untyped-def]
    live_server,
    browser: Browser,
    researcher: User,
    annotator1: User,
    fake: FakeProvider,
    celery_worker_factory: Any,
    clean_broker: None,
    tmp_path: Path,
) -> None:
    worker = celery_worker_factory(extra_env=WORKER_ENV)
    base = live_server.url
    _, campaign, version = hybrid_browser.certified_campaign_with_a_judge_version(
        name="active round", researcher=researcher, annotator=annotator1, fake=fake, worker=worker
    )

    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US", accept_downloads=True)
    problems: list[str] = []
    page = context.new_page()
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    log_in(page, base, researcher.username)

    # 1. The policy and the rule on the hybrid settings page.
    page.goto(f"{base}/research/campaigns/{campaign.pk}/hybrid/")
    sampling = page.locator("form.sampling-form")
    sampling.get_by_label("Human sampling").select_option("uncertainty")
    sampling.get_by_label("Expected share of tasks for the raters").fill("0.5")
    sampling.get_by_label("Stopping rule").select_option("width")
    sampling.get_by_label("Aspect of the rule").select_option(index=1)
    sampling.get_by_label("System (A)").select_option("llm_a")
    sampling.get_by_label("Largest interval width, for “width ≤ w”").fill(str(WIDTH))
    with page.expect_navigation():
        sampling.get_by_role("button", name="Save sampling and rule").click()
    expect(page.locator("ul.messages")).to_contain_text("Sampling policy and stopping rule saved")
    shot(page, "settings")

    # 2. Calibrate and apply: the worker draws each task's fate with its recorded probability.
    form = page.locator("form.hybrid-form")
    form.get_by_label("Judge version").select_option(str(version.pk))
    form.get_by_label("Target agreement").fill("0.8")
    form.get_by_label("Fewest calibration items kept").fill("10")
    with page.expect_navigation():
        form.get_by_role("button", name="Calibrate").click()
    with page.expect_navigation():
        page.get_by_role("button", name="Apply: let the judge rate").click()
    calibration = HybridCalibration.objects.get(campaign=campaign)
    wait_for(
        lambda: HybridCalibration.objects.filter(pk=calibration.pk, apply_status=HybridApplyStatus.DONE).exists(),
        timeout=180,
        message=f"the judge to fill its tasks; worker log:\n{worker.log()[-3000:]}",
    )
    tasks = Task.objects.filter(campaign=campaign)
    probabilities = list(tasks.values_list("human_probability", flat=True))
    assert len(probabilities) == ITEMS and all(p is not None and 0 < p <= 1 for p in probabilities)
    assert len(set(probabilities)) == 2  # the hesitant tasks are likelier to go to the raters than the sure ones
    sent = Assignment.objects.filter(campaign=campaign).exclude(status=AssignmentStatus.JUDGED).count()
    assert 0 < sent < ITEMS

    # 3. The annotator rates until the campaign stops handing out tasks, and is told why.
    rater_context = browser.new_context(viewport={"width": 390, "height": 844}, locale="en-US")
    rater_page = rater_context.new_page()
    rater_page.on("pageerror", lambda exc: problems.append(str(exc)))
    log_in(rater_page, base, annotator1.username)
    rated = rate_until_stopped(rater_page, base, campaign)
    campaign.refresh_from_db()
    assert campaign.stopped_at is not None
    n = campaign.stop_evidence["n"]
    assert campaign.stop_evidence["met"] and campaign.stop_evidence["high"] - campaign.stop_evidence["low"] <= WIDTH
    # At most the one task leased before the stop was rated after it, and tasks sent to the raters were left over.
    assert n <= rated <= n + 1
    assert Assignment.objects.filter(campaign=campaign, status=AssignmentStatus.FREE).count() == sent - rated > 0
    expect(rater_page.locator("#campaign-stopped")).to_contain_text(f"after {n} ratings")
    assert rater_page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    shot(rater_page, "annotator-stopped")
    rater_context.close()

    # 4. The progress page gives the evidence and the sequence; the flat CSV has each task's probability.
    page.goto(f"{base}/campaigns/{campaign.pk}/progress/")
    expect(page.locator("#stopping-met")).to_contain_text(f"after n = {n}")
    expect(page.locator("#active-estimates")).to_be_visible()
    expect(page.locator("svg.sequence-plot polyline")).to_have_count(2)
    shot(page, "progress")
    with page.expect_download() as info:
        page.locator(".export-links").get_by_role("link", name="flat CSV", exact=True).click()
    target = tmp_path / info.value.suggested_filename
    info.value.save_as(target)
    rows = [
        row
        for row in csv.DictReader(io.StringIO(target.read_text(encoding="utf-8")))
        if row["campaign"] and row["kind"] == "rating"
    ]
    judge_rows = [row for row in rows if row["filled_by"] == "judge"]
    human_rows = [row for row in rows if row["filled_by"] == "human"]
    assert len(judge_rows) == ITEMS - sent and len(human_rows) == rated
    by_item = {task.turn.item.external_id: task.human_probability for task in tasks.select_related("turn__item")}
    for row in rows:
        assert float(row["human_probability"]) == pytest.approx(by_item[row["item_id"]])
    assert problems == []
    context.close()

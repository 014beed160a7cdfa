"""A study's seam of active sampling in real Chromium, per language: a hybrid campaign samples its human tasks by
the judge's uncertainty until its stopping rule is met, and the progress page, the annotator's next claim (from a
tab opened before the stop) and the downloaded exports must all agree with the database.

Screenshots of every step go to tests/artifacts/ (gitignored)."""

import csv
import io
import json
from collections import Counter
from typing import Any

import pytest
from playwright.sync_api import expect

from annotations.models import (
    Assignment,
    AssignmentStatus,
    Rating,
    RatingOrigin,
    Task,
)
from judging.models import HybridApplyStatus, HybridCalibration
from judging.statistics.sequences import confidence_sequence
from tests.browser import test_hybrid_campaign as hybrid_browser
from tests.browser.pages import ARTIFACTS, log_in
from tests.browser.test_active_sampling_stop import rate_until_stopped
from tests.browser.whole_study.sessions import Session, download, shot
from tests.conftest import wait_for
from tests.fakeprovider import FakeProvider

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


# ---------------------------------------------------------------- a hybrid campaign sampled by uncertainty, to its stop

fake = hybrid_browser.fake  # the hybrid test's fake judge: sure below quality 5, hesitant at 5, on a real socket
HYBRID_ITEMS = hybrid_browser.ITEMS
STOP_WIDTH = 2.5
STOPPED_AFTER = {"en": "after {n} ratings", "ja": "{n} 件の評価の後"}


def test_a_campaign_sampled_by_uncertainty_stops_and_its_outputs_agree_with_the_database(  # type: ignore[no-untyped-def]
    live_server,
    session: Session,
    locale: str,
    researcher,
    annotator1,
    fake: FakeProvider,
    celery_worker_factory: Any,
    clean_broker: None,
) -> None:
    base = live_server.url
    tag = locale[:2]
    worker = celery_worker_factory(extra_env=hybrid_browser.WORKER_ENV)
    dataset, campaign, version = hybrid_browser.certified_campaign_with_a_judge_version(
        name="whole study hybrid", researcher=researcher, annotator=annotator1, fake=fake, worker=worker
    )

    # 1. On the hybrid settings page: uncertainty sampling and "width ≤ w" on llm_a, then calibrate and apply.
    page = session.page()
    log_in(page, base, "researcher", by_label=False)
    page.goto(f"{base}/research/campaigns/{campaign.pk}/hybrid/")
    sampling = page.locator("form.sampling-form")
    sampling.locator("select[name=human_sampling]").select_option("uncertainty")
    sampling.locator("input[name=human_share]").fill("0.5")
    sampling.locator("select[name=stop_rule]").select_option("width")
    sampling.locator("select[name=stop_aspect]").select_option(index=1)
    sampling.locator("select[name=stop_first]").select_option("llm_a")
    sampling.locator("input[name=stop_width]").fill(str(STOP_WIDTH))
    with page.expect_navigation():
        sampling.locator("button[type=submit]").click()
    expect(page.locator("ul.messages")).to_be_visible()
    campaign.refresh_from_db()
    assert (campaign.human_sampling, campaign.stop_rule, campaign.stop_width) == ("uncertainty", "width", STOP_WIDTH)
    calibrate = page.locator("form.hybrid-form")
    calibrate.locator("select[name=version]").select_option(str(version.pk))
    calibrate.locator("input[name=target]").fill("0.8")
    calibrate.locator("input[name=min_kept]").fill("10")
    with page.expect_navigation():
        calibrate.locator("button[type=submit]").click()
    shot(page, tag, "hybrid-settings")
    with page.expect_navigation():
        page.locator("form[action$='/apply/'] button[type=submit]").click()
    calibration = HybridCalibration.objects.get(campaign=campaign)
    wait_for(
        lambda: HybridCalibration.objects.filter(pk=calibration.pk, apply_status=HybridApplyStatus.DONE).exists(),
        timeout=180,
        message=f"the judge to fill its tasks; worker log:\n{worker.log()[-3000:]}",
    )
    tasks = Task.objects.filter(campaign=campaign).select_related("turn__item")
    probability = {task.turn.item.external_id: task.human_probability for task in tasks}
    assert len(probability) == HYBRID_ITEMS and all(p is not None and 0 < p <= 1 for p in probability.values())
    assert len(set(probability.values())) == 2  # the hesitant tasks are likelier to go to the raters
    sent = Assignment.objects.filter(campaign=campaign).exclude(status=AssignmentStatus.JUDGED).count()
    assert 0 < sent < HYBRID_ITEMS

    # 2. The annotator rates until the rule is met; a tab opened before that, still offering to start, is refused.
    rater = session.page()
    log_in(rater, base, annotator1.username, by_label=False)
    stale = rater.context.new_page()
    stale.on("pageerror", lambda exc: session.problems.append(f"pageerror: {exc}"))
    stale.goto(f"{base}/annotate/{campaign.pk}/")
    expect(stale.locator("form button.primary[autofocus]")).to_be_visible()
    rated = rate_until_stopped(rater, base, campaign)
    campaign.refresh_from_db()
    evidence = campaign.stop_evidence
    n = evidence["n"]
    assert campaign.stopped_at is not None and evidence["met"] and evidence["high"] - evidence["low"] <= STOP_WIDTH
    assert n <= rated <= n + 1  # at most the task leased before the stop was rated after it
    expect(rater.locator("#campaign-stopped")).to_contain_text(STOPPED_AFTER[tag].format(n=n))
    expect(rater.locator("form button.primary")).to_have_count(0)
    shot(rater, tag, "hybrid-annotator-stopped")
    free = Assignment.objects.filter(campaign=campaign, status=AssignmentStatus.FREE).count()
    assert free == sent - rated > 0
    with stale.expect_navigation():
        stale.locator("form button.primary[autofocus]").click()
    expect(stale).to_have_url(f"{base}/annotate/{campaign.pk}/")
    expect(stale.locator("#campaign-stopped")).to_be_visible()
    assert Assignment.objects.filter(campaign=campaign, status=AssignmentStatus.FREE).count() == free
    assert not Assignment.objects.filter(campaign=campaign, status=AssignmentStatus.LEASED).exists()

    # 3. The progress page states the stored evidence, which is the confidence sequence of the stored ratings.
    aspect = campaign.stop_aspect
    assert aspect is not None
    given = Rating.objects.filter(response__turn__item__dataset=dataset, aspect=aspect, origin=RatingOrigin.APP)
    values = [
        float(value)
        for value in given.order_by("created_at", "pk").values_list("value", flat=True)
        if value is not None
    ]
    assert len(values) == rated
    last_look = confidence_sequence(values[:n], lower=aspect.min_value, upper=aspect.max_value)[-1]["interval"]
    assert (evidence["low"], evidence["high"]) == pytest.approx((last_look["low"], last_look["high"]))
    page.goto(f"{base}/campaigns/{campaign.pk}/progress/")
    stopped = page.locator("#stopping-met")
    expect(stopped).to_contain_text(f"n = {n}")
    expect(stopped).to_contain_text(evidence["decision"])
    expect(page.locator("svg.sequence-plot polyline")).to_have_count(2)
    expect(page.locator("#active-estimates tbody tr").first.locator("td").last).to_have_text(f"{rated} / {sent}")
    page.locator("#active-panel").screenshot(path=str(ARTIFACTS / f"whole-study-{tag}-hybrid-progress.png"))

    # 4. The downloads: each task's probability in the JSONL's answers and on the flat CSV's rows is the database's.
    exported = [json.loads(line) for line in download(page, f"/datasets/{dataset.pk}/export/jsonl/").splitlines()]
    sampled = {
        line["id"]: entry["probability"]
        for line in exported
        for answer in line["turns"][0]["responses"].values()
        for entry in answer.get("human_sampling", [])
        if entry["campaign"] == campaign.name
    }
    assert sampled == probability
    flat = list(csv.DictReader(io.StringIO(download(page, f"/datasets/{dataset.pk}/export/flat-csv/"))))
    rows = [row for row in flat if row["campaign"] == campaign.name and row["kind"] == "rating"]
    assert Counter(row["filled_by"] for row in rows) == {"judge": HYBRID_ITEMS - sent, "human": rated}
    assert {row["item_id"]: float(row["human_probability"]) for row in rows} == {
        row["item_id"]: probability[row["item_id"]] for row in rows
    }
    assert session.admin_requests == []

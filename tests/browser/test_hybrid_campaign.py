"""A hybrid campaign end to end in real Chromium, with a real Celery worker and the fake provider on a real socket:
the researcher freezes a reference set and certifies the judge version on the certification page, calibrates it on
the campaign's hybrid settings page, lets the judge rate and keep the tasks it is sure of, an annotator rates the
rest in the browser, and the flat CSV export marks each row filled_by human or judge.

Screenshots go to /tmp/h27c-*.png and tests/artifacts/ (gitignored)."""

import csv
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Browser, Page, expect

from annotations.campaigns.setup import campaign_create
from annotations.models import (
    Assignment,
    AssignmentStatus,
    Campaign,
    Dataset,
    JudgeFilledRating,
    Rating,
    RatingOrigin,
)
from judging import services
from judging.certification.certificates import certificate_request
from judging.certification.reference_sets import reference_set_create
from judging.models import (
    Certificate,
    CertificateStatus,
    HybridApplyStatus,
    HybridCalibration,
    JudgeRun,
    JudgeVersion,
    RunStatus,
)
from tests.browser.pages import ARTIFACTS, log_in
from tests.conftest import wait_for
from tests.fakeprovider import FakeProvider
from tests.judging.certification_data import rated_dataset, true_score
from tests.judging.hybrid_data import judge_config, script_judge

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WORKER_ENV = {"JUDGE_API_BASE_ALLOWLIST": "127.0.0.1", "JUDGE_RETRY_BASE_MS": "20", "JUDGE_RETRY_CAP_S": "1"}
ITEMS = 60


@pytest.fixture
def fake(settings) -> Iterator[FakeProvider]:  # type: ignore[no-untyped-def]
    provider = FakeProvider().start()
    script_judge(provider)
    settings.JUDGE_API_BASE_ALLOWLIST = ["127.0.0.1"]
    yield provider
    provider.stop()


def shot(page: Page, step: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=f"/tmp/h27c-{step}.png", full_page=True)
    page.screenshot(path=str(ARTIFACTS / f"hybrid-campaign-{step}.png"), full_page=True)


def rate_shown_task(page: Page) -> int:
    """Gives the task on the page its answer's true quality, read from the answer's text, submits it and waits for
    the next page; returns the value given."""
    candidate = page.locator("#task-form section.candidate")
    expect(candidate).to_have_count(1)
    text = candidate.locator(".answer").inner_text()
    value = int(text.split("true quality ")[1][0])
    candidate.locator(".scale-buttons label").filter(has=page.locator(f"input[value='{value}']")).click()
    previous = page.url
    page.locator("#task-form button[type=submit].primary").click()
    page.wait_for_url(lambda url, previous=previous: url != previous)  # type: ignore[misc]
    return value


def rate_every_task(page: Page, base: str, campaign: Campaign) -> list[int]:
    """Rates every task the campaign serves this annotator, giving each answer its true quality read from its text;
    returns the answers rated."""
    page.goto(f"{base}/annotate/{campaign.pk}/")
    with page.expect_navigation():
        page.locator("form button.primary[autofocus]").click()
    rated = []
    while "/tasks/" in page.url:
        rated.append(rate_shown_task(page))
    expect(page).to_have_url(f"{base}/annotate/{campaign.pk}/")
    return rated


def campaign_with_a_judge_version(
    *, name: str, researcher: User, annotator: User, fake: FakeProvider, worker: Any
) -> tuple[Dataset, Campaign, JudgeVersion]:
    """A rated dataset owned by the researcher, a one-rater campaign on it, and the version the judge's first run
    on the dataset gives it (which the hybrid tests then certify)."""
    dataset = rated_dataset(items=ITEMS)
    dataset.owner = researcher
    dataset.save(update_fields=["owner"])
    campaign = campaign_create(
        name=name,
        dataset=dataset,
        annotators=[annotator],
        raters_per_item=1,
        rationale_required=False,
        ask_preference=False,
        created_by=researcher,
    )
    first = services.judge_run_launch(dataset=dataset, config=judge_config(fake), launched_by=researcher)
    wait_for(
        lambda: JudgeRun.objects.filter(pk=first.pk, version__isnull=False, status=RunStatus.SUCCEEDED).exists(),
        timeout=120,
        message=f"the first run to end with a version; worker log:\n{worker.log()[-3000:]}",
    )
    version = JudgeRun.objects.get(pk=first.pk).version
    assert version is not None
    return dataset, campaign, version


def certified_campaign_with_a_judge_version(
    *, name: str, researcher: User, annotator: User, fake: FakeProvider, worker: Any
) -> tuple[Dataset, Campaign, JudgeVersion]:
    """The same, with the version certified (by the service, not the page) on the imported ratings frozen as the
    reference set "experts"."""
    dataset, campaign, version = campaign_with_a_judge_version(
        name=name, researcher=researcher, annotator=annotator, fake=fake, worker=worker
    )
    reference = reference_set_create(dataset=dataset, name="experts", owner=researcher)
    certificate_request(version=version, reference_set=reference, requested_by=researcher)
    wait_for(
        lambda: Certificate.objects.filter(version=version, status=CertificateStatus.PASSED).exists(),
        timeout=180,
        message=f"the certificate to pass; worker log:\n{worker.log()[-3000:]}",
    )
    return dataset, campaign, version


def test_a_hybrid_campaign_from_certification_to_the_marked_export(  # type: ignore[no-untyped-def]
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
    dataset, campaign, version = campaign_with_a_judge_version(
        name="hybrid round", researcher=researcher, annotator=annotator1, fake=fake, worker=worker
    )

    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US", accept_downloads=True)
    problems: list[str] = []
    page = context.new_page()
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    log_in(page, base, researcher.username, by_label=False)

    # 1. Certify: freeze the imported ratings as the reference set, then certify the version on it.
    page.goto(f"{base}/dashboard/{dataset.pk}/certification/")
    page.get_by_label("Name of the reference set").fill("experts")
    page.get_by_label("Ratings to freeze").select_option("import")
    with page.expect_navigation():
        page.get_by_role("button", name="Name and freeze").click()
    page.locator("#id_reference_set").select_option(label="experts")
    with page.expect_navigation():
        page.get_by_role("button", name="Certify", exact=True).click()
    wait_for(
        lambda: Certificate.objects.filter(version=version).exclude(status__in=["pending", "evaluating"]).exists(),
        timeout=180,
        message=f"the certificate to be evaluated; worker log:\n{worker.log()[-3000:]}",
    )
    certificate = Certificate.objects.get(version=version)
    assert certificate.status == CertificateStatus.PASSED, certificate.reason
    page.reload()
    expect(page.locator(".badge.certified").first).to_be_visible()
    shot(page, "certification")

    # 2. Calibrate on the hybrid settings page, reached from the progress page.
    page.goto(f"{base}/campaigns/{campaign.pk}/progress/")
    expect(page.locator("#hybrid-panel")).to_contain_text("Every task goes to the human raters")
    with page.expect_navigation():
        page.locator("#hybrid-panel").get_by_role("link", name="Hybrid settings").click()
    expect(page).to_have_url(f"{base}/research/campaigns/{campaign.pk}/hybrid/")
    form = page.locator("form.stacked-form")
    form.get_by_label("Judge version").select_option(str(version.pk))
    form.get_by_label("Target agreement").fill("0.8")
    form.get_by_label("δ (risk of missing the target)").fill("0.1")
    form.get_by_label("Fewest calibration items kept").fill("10")
    shot(page, "hybrid-settings")
    with page.expect_navigation():
        form.get_by_role("button", name="Calibrate").click()
    expect(page.locator("ul.messages")).to_contain_text("Calibrated")
    calibration = HybridCalibration.objects.get(campaign=campaign)
    assert calibration.threshold is not None and calibration.agreement_lower_bound is not None
    assert calibration.agreement_lower_bound >= 0.8
    shot(page, "hybrid-calibrated")

    # 3. Apply: the worker runs the judge on the campaign's answers and hands it the tasks it is sure of.
    with page.expect_navigation():
        page.get_by_role("button", name="Apply: let the judge rate").click()
    wait_for(
        lambda: HybridCalibration.objects.filter(pk=calibration.pk, apply_status=HybridApplyStatus.DONE).exists(),
        timeout=180,
        message=f"the judge to fill its tasks; worker log:\n{worker.log()[-3000:]}",
    )
    calibration.refresh_from_db()
    sure = list(JudgeFilledRating.objects.filter(campaign=campaign))
    expected_kept = sum(1 for task in campaign.tasks.all() for r in task.responses.all() if true_score(r.pk) < 5)
    assert calibration.judged_tasks == len(sure) == expected_kept
    assert Assignment.objects.filter(campaign=campaign, status=AssignmentStatus.JUDGED).count() == expected_kept
    page.goto(f"{base}/campaigns/{campaign.pk}/progress/")
    panel = page.locator("#hybrid-panel")
    expect(panel.locator("#hybrid-coverage")).to_contain_text(f"{expected_kept} of {ITEMS} tasks")
    expect(panel.locator("#hybrid-guarantee")).to_contain_text(f"n = {calibration.n}")
    expect(panel.locator("#hybrid-saved")).to_contain_text(f"{expected_kept} tasks")
    shot(page, "progress")

    # 4. The annotator gets only the tasks the judge escalated, and rates them in the browser.
    rater_context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    rater_page = rater_context.new_page()
    rater_page.on("pageerror", lambda exc: problems.append(str(exc)))
    log_in(rater_page, base, annotator1.username, by_label=False)
    rated = rate_every_task(rater_page, base, campaign)
    assert len(rated) == ITEMS - expected_kept and set(rated) == {5}
    shot(rater_page, "annotator-done")
    rater_context.close()

    # 5. The flat CSV export marks who filled each row.
    page.goto(f"{base}/campaigns/{campaign.pk}/progress/")
    with page.expect_download() as info:
        page.locator(".export-links").get_by_role("link", name="flat CSV", exact=True).click()
    target = tmp_path / info.value.suggested_filename
    info.value.save_as(target)
    rows = list(csv.DictReader(io.StringIO(target.read_text(encoding="utf-8"))))
    judge_rows = [row for row in rows if row["filled_by"] == "judge"]
    assert len(judge_rows) == expected_kept
    assert {row["judge_version"] for row in judge_rows} == {version.fingerprint}
    human_app = [row for row in rows if row["origin"] == RatingOrigin.APP and row["kind"] == "rating"]
    assert len(human_app) == ITEMS - expected_kept and {row["filled_by"] for row in human_app} == {"human"}
    assert Rating.objects.filter(origin=RatingOrigin.APP).count() == ITEMS - expected_kept
    assert problems == []
    context.close()

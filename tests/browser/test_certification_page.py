"""The certification page in real Chromium: a certified version and a suspended one with their figures, the
suspension notice, naming a reference set through the form, and axe-core finding no serious or critical violation.

Screenshots go to tests/artifacts/ (gitignored)."""

import json
import os
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import Browser, Page, expect

from judging.models import (
    Certificate,
    CertificateStatus,
    Judge,
    JudgeKind,
    JudgeRun,
    JudgeVersion,
    ReferenceSet,
    RunStatus,
)
from tests.conftest import CAST_PASSWORD
from tests.judging.certification_data import SNAPSHOT, rated_dataset

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"
AXE = Path(settings.BASE_DIR) / "static" / "vendor" / "axe-core" / "axe.min.js"

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def version_with_run(dataset, name: str, fingerprint: str, model: str) -> JudgeVersion:  # type: ignore[no-untyped-def]
    snapshot = {"name": name, "method": "single", "model": "openai/gpt-4o-mini"}
    version = JudgeVersion.objects.create(
        fingerprint=fingerprint, config_name=name, provider_model=model, material={}, config_snapshot=snapshot
    )
    judge = Judge.objects.create(dataset=dataset, name=f"{name} {fingerprint[:4]}", kind=JudgeKind.RUN)
    JudgeRun.objects.create(
        judge=judge,
        dataset=dataset,
        config_snapshot=snapshot,
        method="single",
        status=RunStatus.SUCCEEDED,
        total=40,
        done=40,
        version=version,
    )
    return version


def result(omega: float, rho: float) -> dict:  # type: ignore[type-arg]
    return {
        "n_answers": 40,
        "n_ratings": 120,
        "n_judged": 40,
        "raters_tested": 3,
        "epsilon": 0.1,
        "q": 0.05,
        "metric": "neg_rmse",
        "omega": omega,
        "rho": rho,
        "verdict": "passed",
        "undefined": None,
        "raters": [],
    }


def certificate(
    version: JudgeVersion,
    reference: ReferenceSet,
    researcher: User,
    *,
    status: str,
    overall: dict[str, Any],
    **extra: Any,
) -> Certificate:
    """A certificate of the version on the reference set, at ε 0.1 and q 0.05, with `overall` as its one result."""
    return Certificate.objects.create(
        version=version,
        reference_set=reference,
        status=status,
        epsilon=0.1,
        q=0.05,
        fingerprint=version.fingerprint,
        results={"overall": overall},
        certified_at=timezone.now(),
        requested_by=researcher,
        **extra,
    )


def test_certification_page_shows_versions_notice_and_names_a_reference_set(
    live_server, browser: Browser, researcher
) -> None:  # type: ignore[no-untyped-def]
    dataset = rated_dataset()
    dataset.owner = researcher
    dataset.save(update_fields=["owner"])
    reference = ReferenceSet.objects.create(name="experts", dataset=dataset, owner=researcher, frozen_at=timezone.now())
    certified = version_with_run(dataset, "judge-a", "a" * 64, SNAPSHOT)
    certificate(certified, reference, researcher, status=CertificateStatus.PASSED, overall=result(1.0, 0.83))
    drifted = version_with_run(dataset, "judge-a", "b" * 64, "gpt-4o-mini-2025-06-30")
    certificate(
        drifted,
        reference,
        researcher,
        status=CertificateStatus.SUSPENDED,
        overall=result(0.67, 0.71),
        suspended_at=timezone.now(),
        suspension_reason="the provider now reports model gpt-4o-mini-2025-07-01 instead of the certified one",
    )

    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    page: Page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{live_server.url}/accounts/login/")
    page.locator("#id_username").fill(researcher.username)
    page.locator("#id_password").fill(CAST_PASSWORD)
    with page.expect_navigation():
        page.keyboard.press("Enter")
    page.goto(f"{live_server.url}/dashboard/{dataset.pk}/certification/")
    expect(page.get_by_role("alert")).to_contain_text("gpt-4o-mini-2025-07-01")
    expect(page.locator(".badge.certified")).to_have_count(1)
    expect(page.locator(".badge.suspended")).to_have_count(1)
    expect(page.get_by_text("manage.py compare_judges")).to_be_visible()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "certification-page.png"), full_page=True)

    page.get_by_label("Name of the reference set").fill("imported gold")
    page.get_by_label("Ratings to freeze").select_option("import")
    with page.expect_navigation():
        page.get_by_role("button", name="Name and freeze").click()
    expect(page.locator("ul.messages")).to_contain_text("frozen with 120 ratings")
    expect(page.get_by_role("cell", name="imported gold")).to_be_visible()
    assert ReferenceSet.objects.get(name="imported gold").ratings.count() == 120

    page.evaluate(AXE.read_text(encoding="utf-8"))
    found = json.loads(page.evaluate("async () => JSON.stringify((await axe.run(document)).violations)"))
    serious = [v["id"] for v in found if v["impact"] in ("serious", "critical")]
    assert serious == []
    assert errors == []
    context.close()

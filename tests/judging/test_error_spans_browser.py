"""An error-span judge's panel on the judges page in real Chromium, in English and Japanese, at 1,280 px and 390 px:
the span agreement table, the note on unplaced quotes, no sideways scrolling on a phone and axe-core finding no
serious or critical violation. Screenshots go to tests/artifacts/ (gitignored)."""

import json
import os
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from playwright.sync_api import Browser, expect

from tests.conftest import CAST_PASSWORD
from tests.fakeprovider import FakeProvider
from tests.judging.span_judge_data import run_span_judge, span_rated_dataset

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"
AXE = Path(settings.BASE_DIR) / "static" / "vendor" / "axe-core" / "axe.min.js"

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_span_panel_on_the_judges_page(
    live_server: Any,
    browser: Browser,
    researcher: Any,
    fake_provider: FakeProvider,
    eager: None,
    django_capture_on_commit_callbacks: Any,
) -> None:
    dataset = span_rated_dataset(owner=researcher, items=12)
    run_span_judge(dataset, fake_provider, django_capture_on_commit_callbacks, name="spans-a")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    url = f"{live_server.url}/dashboard/{dataset.pk}/judges/?judge=spans-a&aspect=errors"
    for language, width, words in (
        ("en", 1280, ("span F1 with category", "majority of the raters")),
        ("en", 390, ("character F1", "all raters pooled")),
        ("ja", 390, ("文字単位の F1", "評価者の過半数")),
    ):
        context = browser.new_context(
            viewport={"width": width, "height": 900}, locale="ja-JP" if language == "ja" else "en-US"
        )
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc, errors=errors: errors.append(str(exc)))
        page.goto(f"{live_server.url}/accounts/login/")
        page.locator("#id_username").fill(researcher.username)
        page.locator("#id_password").fill(CAST_PASSWORD)
        with page.expect_navigation():
            page.keyboard.press("Enter")
        page.goto(url)
        panel = page.locator("#span-agreement")
        expect(panel.locator("tbody tr")).to_have_count(5)
        for word in words:
            expect(panel).to_contain_text(word)
        expect(page.locator("[data-unplaced-quotes]")).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        page.locator("#span-agreement").scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / f"span-judge-{language}-{width}.png"), full_page=True)
        page.evaluate(AXE.read_text(encoding="utf-8"))
        found = json.loads(page.evaluate("async () => JSON.stringify((await axe.run(document)).violations)"))
        assert [v["id"] for v in found if v["impact"] in ("serious", "critical")] == [], [
            [n["html"][:200] for n in v["nodes"]] for v in found
        ]
        assert errors == []
        context.close()

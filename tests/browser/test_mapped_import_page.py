"""A researcher in real Chromium previews a Chatbot Arena table and imports it; the page fits a 390 px screen.

Screenshots go to tests/artifacts/ (gitignored)."""

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from annotations.models import Dataset
from tests.browser.pages import ARTIFACTS, log_in, open_page
from tests.io.test_mapped_import import ARENA_SCHEMA, arena_rows, write_parquet

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    with open_page(browser, width=390, height=844, clean=True) as page:
        yield page


def test_preview_and_import_an_arena_table(live_server, page: Page, researcher, tmp_path) -> None:  # type: ignore[no-untyped-def]
    table = write_parquet(tmp_path / "arena.parquet", arena_rows(), ARENA_SCHEMA)
    log_in(page, live_server.url, "researcher")
    with page.expect_navigation():
        page.get_by_role("link", name="Import a table (CSV, TSV, JSONL, Parquet)").click()
    page.get_by_label("Table").set_input_files(str(table))
    page.get_by_label("Ready-made mapping").select_option("chatbot-arena")
    with page.expect_navigation():
        page.get_by_role("button", name="Preview").click()
    expect(page.locator(".mapped-preview")).to_contain_text("4 rows give 4 items, 10 answers, 0 ratings, 4 preferences")
    expect(page.locator(".item-preview").first).to_contain_text("koala-13b")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "mapped-import-preview.png"), full_page=True)

    # The file input is empty again after the preview's round trip; choose it again and import.
    page.get_by_label("Table").set_input_files(str(table))
    page.get_by_label("Ready-made mapping").select_option("chatbot-arena")
    page.get_by_label("Dataset name").fill("arena sample")
    with page.expect_navigation():
        page.get_by_role("button", name="Import", exact=True).click()
    dataset = Dataset.objects.get(name="arena sample")
    expect(page).to_have_url(f"{live_server.url}/dashboard/{dataset.pk}/overview/")
    expect(page.locator("h1")).to_have_text("arena sample")
    page.screenshot(path=str(ARTIFACTS / "mapped-import-done.png"), full_page=True)

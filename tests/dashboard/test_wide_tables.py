"""Wide tables keep to their own box: at a phone's 390 px and a laptop's 1,280 px no dashboard page scrolls
sideways, each wide table scrolls inside its wrapper, and its first column stays in place (sticky) while it does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from playwright.sync_api import sync_playwright

from annotations.models import Dataset
from tests.chromium import launch_chromium
from tests.dashboard.conftest import JUDGE_NAME

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"

MEASURE = """() => {
  const wrappers = Array.from(document.querySelectorAll('main .scroll, main .table-wrap'))
    .filter((wrap) => wrap.querySelector('table'));
  return {
    page: document.documentElement.scrollWidth,
    viewport: document.documentElement.clientWidth,
    tables: wrappers.map((wrap) => {
      const table = wrap.querySelector('table');
      const firstCells = Array.from(table.rows).map((row) => row.cells[0]).filter(Boolean);
      return {
        id: (wrap.closest('[id]') || {}).id || table.className,
        right: wrap.getBoundingClientRect().right,
        overflows: wrap.scrollWidth > wrap.clientWidth + 1,
        scrolls: getComputedStyle(wrap).overflowX,
        stickyFirst: firstCells.every((cell) => getComputedStyle(cell).position === 'sticky'),
        opaqueFirst: firstCells.every((cell) => getComputedStyle(cell).backgroundColor !== 'rgba(0, 0, 0, 0)'),
      };
    }),
  };
}"""


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("width", [390, 1280])
def test_wide_tables_scroll_in_their_own_box_with_the_first_column_fixed(
    live_server: Any, stats_dataset: Dataset, researcher: User, width: int
) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    client = Client()
    client.force_login(researcher)
    session = client.cookies["sessionid"].value
    pages = {
        "dataset": reverse("dashboard-dataset", args=[stats_dataset.pk]) + "?aspect=overall",
        "judges": reverse("dashboard-judges", args=[stats_dataset.pk]) + f"?judge={JUDGE_NAME}&aspect=overall",
    }
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            context = browser.new_context(viewport={"width": width, "height": 900})
            context.add_cookies([{"name": "sessionid", "value": session, "url": live_server.url}])
            page = context.new_page()
            for name, url in pages.items():
                page.goto(live_server.url + url)
                page.wait_for_selector("svg.plot")
                found = page.evaluate(MEASURE)
                page.screenshot(path=str(ARTIFACTS / f"wide-tables-{name}-{width}.png"), full_page=True)
                assert found["page"] <= found["viewport"], f"{name} scrolls sideways at {width} px"
                assert found["tables"], name
                for table in found["tables"]:
                    assert table["right"] <= found["viewport"] + 1, (name, table)
                    assert table["scrolls"] in {"auto", "scroll"}, (name, table)
                    assert table["stickyFirst"] and table["opaqueFirst"], (name, table)
                if width == 390:
                    wide = page.locator(".scroll, .table-wrap").filter(has=page.locator("table")).first
                    wide.evaluate("wrap => { wrap.scrollLeft = 240; }")
                    wide.screenshot(path=str(ARTIFACTS / f"wide-tables-{name}-scrolled.png"))
                    assert any(table["overflows"] for table in found["tables"]), f"{name}: nothing wide at 390 px"
        finally:
            browser.close()

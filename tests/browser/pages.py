"""What the Chromium tests share: a page that records its own errors, the login, the screenshots, the layout check
and axe-core.

Screenshots go to tests/artifacts/ (gitignored)."""

import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings
from django.test import Client
from playwright.sync_api import Browser, Page, expect

from tests.conftest import CAST_PASSWORD

# Playwright's sync API runs an event loop in this thread; the ORM calls made by the test are still synchronous.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"
AXE = Path(settings.BASE_DIR) / "static" / "vendor" / "axe-core" / "axe.min.js"
LAYOUT_WIDTHS = (390, 1280)
TASK_URL = re.compile(r".*/tasks/[a-z2-7]{13}/$")


def watch(
    page: Page,
    *,
    expected: Iterable[str] = (),
    responses: bool = False,
    dialogs: bool = False,
    problems: list[str] | None = None,
) -> list[str]:
    """Record on `page.problems` (or on the given `problems`, shared by several pages) every script error and
    console error, except console errors containing one of the `expected` texts (a response the test serves on
    purpose); with `responses`, every response of 400 or more too; with `dialogs`, every dialog, which is
    dismissed."""
    expected = tuple(expected)
    problems = [] if problems is None else problems
    page.problems = problems  # type: ignore[attr-defined]
    page.on("pageerror", lambda exc: problems.append(f"pageerror: {page.url}: {exc}"))
    page.on(
        "console",
        lambda msg: (
            problems.append(f"console {msg.type}: {page.url}: {msg.text}")
            if msg.type == "error" and not any(text in msg.text for text in expected)
            else None
        ),
    )
    if responses:
        page.on(
            "response",
            lambda response: problems.append(f"{response.status} {response.url}") if response.status >= 400 else None,
        )
    if dialogs:
        page.on("dialog", lambda dialog: (problems.append(f"dialog: {dialog.message}"), dialog.dismiss()))
    return problems


def new_page(
    browser: Browser,
    *,
    width: int = 1280,
    height: int = 900,
    locale: str = "en-US",
    expected: Iterable[str] = (),
    responses: bool = False,
    dialogs: bool = False,
    problems: list[str] | None = None,
    **context_options: Any,
) -> Page:
    """A page in a context of its own (closed with `page.context.close()`), watched as `watch` says."""
    context = browser.new_context(viewport={"width": width, "height": height}, locale=locale, **context_options)
    page = context.new_page()
    watch(page, expected=expected, responses=responses, dialogs=dialogs, problems=problems)
    return page


def signed_in_page(browser: Browser, base: str, user: Any, **options: Any) -> Page:
    """`new_page` already logged in as `user` through a session cookie, for tests about a page rather than the
    login. Failed loads count only when `responses` asks for them, by their URL."""
    client = Client()
    client.force_login(user)
    page = new_page(browser, expected=["Failed to load resource"], **options)
    page.context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": base}])
    return page


@contextmanager
def open_page(browser: Browser, *, clean: bool = False, **options: Any) -> Iterator[Page]:
    """`new_page` for the length of the block; with `clean`, the block fails if the page recorded any problem."""
    page = new_page(browser, **options)
    try:
        yield page
    finally:
        page.context.close()
    if clean:
        assert page.problems == []  # type: ignore[attr-defined]


@contextmanager
def page_factory(browser: Browser, *, clean: bool = True, **options: Any) -> Iterator[Callable[[], Page]]:
    """Hands out as many watched pages as the test asks for; all closed at the end, and with `clean` the block
    fails if any of them recorded a problem."""
    pages: list[Page] = []

    def make() -> Page:
        pages.append(new_page(browser, **options))
        return pages[-1]

    try:
        yield make
    finally:
        for page in pages:
            page.context.close()
    if clean:
        assert [problem for page in pages for problem in page.problems] == []  # type: ignore[attr-defined]


def shooter(prefix: str) -> Callable[[Page, str], None]:
    """A full-page screenshot as tests/artifacts/<prefix>-<name>.png."""

    def shot(page: Page, name: str) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{prefix}-{name}.png"), full_page=True)

    return shot


def log_in(page: Page, base: str, username: str, *, by_label: bool = True) -> None:
    """Log in through the form and land on the home page. The fields are found by their English labels, or with
    `by_label=False` by their ids (a page in another language)."""
    page.goto(f"{base}/accounts/login/")
    if by_label:
        page.get_by_label("Username").fill(username)
        page.get_by_label("Password").fill(CAST_PASSWORD)
    else:
        page.locator("#id_username").fill(username)
        page.locator("#id_password").fill(CAST_PASSWORD)
    with page.expect_navigation():
        page.keyboard.press("Enter")
    expect(page).to_have_url(f"{base}/")


def start_first_task(page: Page, base: str, campaign: Any) -> str:
    """From the campaign page to its first task; returns the task's URL."""
    page.goto(f"{base}/annotate/{campaign.pk}/")
    page.get_by_role("button", name="Start").click()
    page.wait_for_url(TASK_URL)
    return page.url


def axe_violations(page: Page, within: str | None = None) -> list[str]:
    """Serious and critical axe-core findings on the page, or only inside the element the CSS selector `within`
    names. The script is read from the vendored file and evaluated through the DevTools protocol, so the page's CSP
    stays as it is and nothing is fetched."""
    page.evaluate(AXE.read_text(encoding="utf-8"))
    context = json.dumps(within) if within else "document"
    results = page.evaluate(f"async () => JSON.stringify((await axe.run({context})).violations)")
    return [
        f"{violation['id']} ({violation['impact']}): {[node['target'] for node in violation['nodes']][:5]}"
        for violation in json.loads(results)
        if violation["impact"] in {"serious", "critical"}
    ]


def check_layout(page: Page, name: str) -> None:
    """No serious axe finding and no sideways scrolling at a phone's and a desktop's width; a full-page
    screenshot at each (tests/artifacts/<name>-<width>.png)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for width in LAYOUT_WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        scroll, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert scroll <= inner, f"{name} scrolls sideways at {width} px: {scroll} > {inner}"
        assert axe_violations(page) == [], name
        page.screenshot(path=str(ARTIFACTS / f"{name}-{width}.png"), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 900})

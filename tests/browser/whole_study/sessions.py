"""The whole-study browser tests' sessions: fresh contexts in one language that collect page errors and every
request reaching the admin, and screenshots of each step."""

from pathlib import Path

from playwright.sync_api import Browser, Page

from tests.browser.pages import ARTIFACTS


class Session:
    """Fresh browser contexts in one language; collects page errors and every request that reaches the admin."""

    def __init__(self, browser: Browser, locale: str) -> None:
        self.browser = browser
        self.locale = locale
        self.contexts: list = []  # type: ignore[type-arg]
        self.problems: list[str] = []
        self.admin_requests: list[str] = []

    def page(self) -> Page:
        context = self.browser.new_context(
            viewport={"width": 1280, "height": 900}, locale=self.locale, accept_downloads=True
        )
        self.contexts.append(context)
        context.on("request", lambda request: self._record(request.url))
        page = context.new_page()
        page.on("pageerror", lambda exc: self.problems.append(f"pageerror: {exc}"))
        page.on("console", lambda msg: self.problems.append(msg.text) if msg.type == "error" else None)
        return page

    def _record(self, url: str) -> None:
        if "/admin/" in url:
            self.admin_requests.append(url)


def shot(page: Page, tag: str, step: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"whole-study-{tag}-{step}.png"), full_page=True)


def download(page: Page, href: str) -> str:
    with page.expect_download() as info:
        page.locator(f".export-links a[href='{href}']").first.click()
    return Path(info.value.path()).read_text(encoding="utf-8")

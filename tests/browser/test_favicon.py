"""Every page names the site's own icon, and the icon loads: no page, the admin's included, makes the browser ask
for a file the site does not have."""

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, Response

from tests.browser.pages import log_in, open_page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    with open_page(browser, height=800) as page:
        yield page


def test_every_page_links_an_icon_that_loads(live_server, page: Page, researcher) -> None:  # type: ignore[no-untyped-def]
    failed: list[str] = []

    def note(response: Response) -> None:
        # The pages themselves may be refusals on purpose (404, 403); what they load must not fail.
        if response.status >= 400 and response.request.resource_type != "document":
            failed.append(f"{response.status} {response.url}")

    page.on("response", note)
    page.goto(f"{live_server.url}/accounts/login/")
    log_in(page, live_server.url, "researcher")
    for path in ["/", "/admin/", "/admin/password_change/", "/help/", "/missing-page/"]:
        page.goto(f"{live_server.url}{path}")
        icon = page.locator("link[rel=icon]")
        assert icon.count() == 1, path
        href = icon.get_attribute("href") or ""
        assert href.startswith("/static/"), f"{path} links {href!r}"
        loaded = page.request.get(f"{live_server.url}{href}")
        assert loaded.status == 200 and loaded.headers["content-type"].startswith("image/"), href
    # A client that ignores the link asks the conventional address; it leads to the same icon.
    fallback = page.request.get(f"{live_server.url}/favicon.ico")
    assert fallback.status == 200 and fallback.headers["content-type"].startswith("image/")
    assert failed == []

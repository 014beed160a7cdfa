"""Each whole-study browser test runs once per language, in a session of fresh contexts."""

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser

from tests.browser.whole_study.sessions import Session


@pytest.fixture(params=["en-US", "ja-JP"])
def locale(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def session(browser: Browser, locale: str) -> Iterator[Session]:
    opened = Session(browser, locale)
    yield opened
    for context in opened.contexts:
        context.close()
    assert opened.problems == []

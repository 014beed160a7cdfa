from collections.abc import Iterator

import pytest
from django.core.cache import cache
from django.utils import translation


@pytest.fixture(autouse=True)
def english_by_default() -> Iterator[None]:
    """LocaleMiddleware leaves the last request's language active in the thread; services tests expect English."""
    with translation.override("en"):
        yield


@pytest.fixture
def fresh_counters() -> Iterator[None]:
    """The join rate limit and the quotas count in the cache, per address: each test starts and leaves it empty."""
    cache.clear()
    yield
    cache.clear()

from collections.abc import Iterator

import pytest
from django.utils import translation


@pytest.fixture(autouse=True)
def english_by_default() -> Iterator[None]:
    """LocaleMiddleware leaves the last request's language active in the thread; services tests expect English."""
    with translation.override("en"):
        yield

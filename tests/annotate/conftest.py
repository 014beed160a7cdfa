from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.utils import translation

from annotations.models import Campaign
from annotations.recruitment.models import Platform, RecruitmentLink
from annotations.recruitment.services import link_create


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


@pytest.fixture
def mturk(campaign: Campaign, researcher: User) -> RecruitmentLink:
    """An MTurk link to the test module's campaign."""
    return link_create(campaign=campaign, platform=Platform.MTURK, created_by=researcher, completion_code="MT-OK")

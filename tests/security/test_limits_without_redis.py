"""Signing in, asking for an API token and joining through a study link keep working while Redis is away: the
attempt limits count in the process's own memory, say so in the log, and still refuse a guesser. A live probe with
Redis stopped got 503 on each, because the limits asked Redis; docs/operations.md promises sign-in keeps working.

The cache here is a real RedisCache pointed at a port of 127.0.0.1 where nothing listens, so every cache call
fails as it does in production while Redis is down (connection refused)."""

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from annotations.models import CrowdWorker
from annotations.recruitment.attempt_counters import attempt_counters
from tests.annotate.test_recruitment import campaign, join, prolific, prolific_url  # noqa: F401
from tests.conftest import CAST_PASSWORD
from tests.fakeprovider import free_port

pytestmark = pytest.mark.django_db

FALLBACK_LOG = "the shared cache is unavailable"


@pytest.fixture
def redis_unreachable(settings) -> Iterator[str]:  # type: ignore[no-untyped-def]
    url = f"redis://127.0.0.1:{free_port()}/0"
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url}}
    settings.SESSION_ENGINE = "evalsite.sessions"  # the deployed store, as with any REDIS_URL
    attempt_counters.forget_local()
    yield url
    attempt_counters.forget_local()


def fallback_logged(caplog: pytest.LogCaptureFixture) -> bool:
    return any(FALLBACK_LOG in record.getMessage() for record in caplog.records)


def test_signing_in_works_while_redis_is_away(redis_unreachable, annotator1: User, caplog) -> None:
    client = Client()
    with caplog.at_level("WARNING"):
        response = client.post(reverse("login"), {"username": "annotator1", "password": CAST_PASSWORD})
    assert response.status_code == 302
    assert client.session.get("_auth_user_id") == str(annotator1.pk)
    assert client.get(reverse("home")).status_code == 200
    assert fallback_logged(caplog)


def test_the_login_limit_still_refuses_a_guesser_while_redis_is_away(redis_unreachable, annotator1: User) -> None:
    client = Client()
    for _ in range(10):
        wrong = client.post(reverse("login"), {"username": "annotator1", "password": "not-it"})
        assert wrong.status_code == 200
    refused = client.post(reverse("login"), {"username": "annotator1", "password": CAST_PASSWORD})
    assert refused.status_code == 429 and refused["Retry-After"] == "60"


def test_an_api_token_is_issued_while_redis_is_away(redis_unreachable, annotator1: User, caplog) -> None:
    with caplog.at_level("WARNING"):
        response = Client().post(reverse("api-token"), {"username": "annotator1", "password": CAST_PASSWORD})
    assert response.status_code == 200 and response.json()["token"]
    assert fallback_logged(caplog)


def test_joining_through_a_study_link_works_while_redis_is_away(redis_unreachable, prolific, caplog) -> None:  # noqa: F811
    with caplog.at_level("WARNING"):
        response = join(Client(), prolific_url(prolific))
    assert response.status_code == 303
    assert CrowdWorker.objects.count() == 1
    assert fallback_logged(caplog)

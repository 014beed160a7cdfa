"""While Redis or the database is away, a request answers 503 with Retry-After (a page for a person, JSON for the
API), never 500, and a signed-in annotator stays signed in: sessions are read from the database when the cache is
down. The Redis here is a private redis-server stopped for real; the database fault is a connection to a port where
nothing listens, which is what a client sees while Postgres restarts."""

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.db import OperationalError, connection
from django.test import Client, RequestFactory
from django.urls import reverse
from rest_framework.authtoken.models import Token

from evalsite import error_pages
from tests.annotate.factories import make_campaign, make_dataset
from tests.conftest import CAST_PASSWORD
from tests.fakeprovider import free_port
from tests.judging.private_redis import PrivateRedis


@pytest.fixture
def redis_sessions(tmp_path: Path, settings) -> Iterator[PrivateRedis]:  # type: ignore[no-untyped-def]
    """The deployed session setup (cached_db on Redis), on a redis-server of this test alone."""
    server = PrivateRedis(tmp_path).start()
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": server.url}}
    settings.SESSION_ENGINE = "evalsite.sessions"
    yield server
    server.stop()


def _signed_in(user) -> Client:  # type: ignore[no-untyped-def]
    client = Client(raise_request_exception=False)
    assert client.login(username=user.username, password=CAST_PASSWORD)
    return client


@pytest.mark.django_db
def test_the_deployed_setting_is_the_fallback_store(settings) -> None:  # type: ignore[no-untyped-def]
    # Whenever sessions are cached in Redis, they are cached by the store that survives Redis going away.
    uses_redis = settings.CACHES["default"]["BACKEND"].endswith("RedisCache")
    assert uses_redis == bool(settings.REDIS_URL)
    expected = "evalsite.sessions" if uses_redis else "django.contrib.sessions.backends.db"
    engine = settings.SESSION_ENGINE
    assert engine == expected


@pytest.mark.django_db
def test_a_signed_in_annotator_stays_signed_in_while_redis_is_stopped(redis_sessions, researcher, annotator1) -> None:  # type: ignore[no-untyped-def]
    campaign = make_campaign(make_dataset(owner=researcher, items=2), [annotator1], raters_per_item=1)
    client = _signed_in(annotator1)
    page = reverse("annotate-campaign", args=[campaign.pk])
    assert client.get(page).status_code == 200
    redis_sessions.stop()
    # The cached copy is gone with the server: the session is read from the database, and saved there.
    during = client.get(page)
    assert during.status_code == 200, during.content[:500]
    assert client.get(reverse("annotate-next", args=[campaign.pk])).status_code in (302, 303)
    client.post(reverse("logout"))
    assert client.get(page).status_code == 302  # logging out works too, and is not undone by a stale cached copy
    redis_sessions.start()
    assert client.get(page).status_code == 302


@pytest.mark.django_db
def test_a_new_sign_in_works_while_redis_is_stopped(redis_sessions, annotator1) -> None:  # type: ignore[no-untyped-def]
    redis_sessions.stop()
    client = Client(raise_request_exception=False)
    assert client.login(username=annotator1.username, password=CAST_PASSWORD)
    assert client.get(reverse("home")).status_code == 200


@pytest.fixture
def database_away(tmp_path: Path) -> Iterator[Callable[[], None]]:
    """cut() sends every new connection of this process where no database answers, until the test ends: a port
    where nothing listens (Postgres restarting), or a directory that does not exist (SQLite)."""
    original = dict(connection.settings_dict)

    def cut() -> None:
        connection.close()
        if connection.vendor == "postgresql":
            connection.settings_dict["PORT"] = str(free_port())
        else:
            connection.settings_dict["NAME"] = str(tmp_path / "missing" / "db.sqlite3")

    yield cut
    connection.close()
    connection.settings_dict.update(original)


@pytest.mark.django_db(transaction=True)
def test_a_page_answers_503_with_retry_after_while_the_database_is_away(annotator1, database_away) -> None:  # type: ignore[no-untyped-def]
    client = _signed_in(annotator1)
    database_away()
    response = client.get(reverse("home"), HTTP_ACCEPT_LANGUAGE="en")
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert "Briefly unavailable" in response.content.decode()
    assert response["Content-Type"].startswith("text/html")


@pytest.mark.django_db(transaction=True)
def test_the_api_answers_json_503_while_the_database_is_away(annotator1, database_away) -> None:  # type: ignore[no-untyped-def]
    token = Token.objects.create(user=annotator1).key
    database_away()
    response = Client(raise_request_exception=False).get(
        "/api/annotate/campaigns/", HTTP_AUTHORIZATION=f"Token {token}"
    )
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert response.json()["retry_after"] == 5
    assert "retry" in response.json()["detail"]


def test_handler500_answers_503_for_an_outage_and_500_for_a_bug() -> None:
    request = RequestFactory().get("/annotate/1/")
    try:
        raise OperationalError("server closed the connection unexpectedly")
    except OperationalError:
        response = error_pages.server_error(request)
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    try:
        raise ValueError("a bug")
    except ValueError:
        response = error_pages.server_error(request)
    assert response.status_code == 500


def test_a_fault_wrapped_by_another_exception_is_still_an_outage() -> None:
    import redis

    try:
        try:
            raise redis.exceptions.ConnectionError("Error 111 connecting")
        except redis.exceptions.ConnectionError as exc:
            raise RuntimeError("could not enqueue") from exc
    except RuntimeError as wrapped:
        assert error_pages.is_transient_fault(wrapped)
    assert not error_pages.is_transient_fault(ValueError("a bug"))


def test_the_503_page_in_japanese() -> None:
    from django.utils import translation

    request = RequestFactory().get("/")
    with translation.override("ja"):
        body = error_pages.service_unavailable(request).content.decode()
    assert "一時的に" in body

"""LazyMessageMiddleware: the message storage is built only when a request uses it, and messages still travel."""

from collections.abc import Callable

import pytest
from django.contrib import messages
from django.contrib.sessions.middleware import SessionMiddleware
from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory
from django.utils.functional import empty

from evalsite.middleware import LazyMessageMiddleware


def _through_middleware(view: Callable[[HttpRequest], HttpResponse], request: HttpRequest) -> HttpResponse:
    response = SessionMiddleware(LazyMessageMiddleware(view))(request)
    assert isinstance(response, HttpResponse)
    return response


def test_a_request_that_never_uses_messages_builds_no_storage() -> None:
    request = RequestFactory().get("/api/annotate/campaigns/")
    response = _through_middleware(lambda request: HttpResponse("ok"), request)
    assert response.status_code == 200
    assert request._messages._wrapped is empty  # type: ignore[attr-defined]
    assert "messages" not in response.cookies


@pytest.mark.django_db
def test_a_message_added_in_one_request_is_read_in_the_next() -> None:
    def add(request: HttpRequest) -> HttpResponse:
        messages.success(request, "Saved.")
        return HttpResponse("added")

    first = RequestFactory().post("/save/")
    response = _through_middleware(add, first)
    assert "messages" in response.cookies  # the fallback storage keeps short messages in a cookie

    seen: list[str] = []

    def read(request: HttpRequest) -> HttpResponse:
        seen.extend(str(message) for message in messages.get_messages(request))
        return HttpResponse("read")

    second = RequestFactory().get("/next/")
    second.COOKIES["messages"] = response.cookies["messages"].value
    after_reading = _through_middleware(read, second)
    assert seen == ["Saved."]
    assert after_reading.cookies["messages"].value == ""  # read messages are deleted, as with Django's middleware

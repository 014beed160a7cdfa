"""The error pages (403, 404, 405, 500, 503) in the site's layout: what happened in a sentence and a way back.

They never show the exception's message: it can name an object the visitor may not know exists."""

import sys

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, HttpResponseServerError, JsonResponse
from django.shortcuts import render
from django.template import loader
from django.urls import reverse
from django.utils.translation import gettext
from kombu.exceptions import OperationalError as BrokerUnavailable
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeout

API_PREFIXES = ("/api/", "/factscore/api/")

# A database or Redis that is restarting, failing over or cut off: the same request succeeds once it is back.
# IntegrityError, DataError and ProgrammingError are not here: they are the request's or the code's fault.
TRANSIENT_FAULTS: tuple[type[BaseException], ...] = (
    OperationalError,
    InterfaceError,
    RedisConnectionError,
    RedisTimeout,
    BrokerUnavailable,
)

# Routes whose 403 means "this task is not (or no longer) yours": the campaign page is the useful way back.
_TASK_ROUTES = frozenset({"annotate-task", "annotate-submit", "annotate-skip"})


def _campaign_url(request: HttpRequest) -> str:
    match = request.resolver_match
    if match is not None and match.url_name in _TASK_ROUTES and "campaign_id" in match.kwargs:
        return reverse("annotate-campaign", args=[match.kwargs["campaign_id"]])
    return ""


def _api_error(request: HttpRequest, status: int, detail: str) -> HttpResponse | None:
    # API clients are programs: whatever fails under an API prefix (an unknown address, a crash) answers JSON like
    # the views do.
    if not request.path.startswith(API_PREFIXES):
        return None
    return JsonResponse({"detail": detail}, status=status)


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    api = _api_error(request, 403, "You do not have permission to perform this action.")
    return api or render(request, "403.html", {"campaign_url": _campaign_url(request)}, status=403)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    # The reason names Django's internal check (missing cookie, bad origin...): useful in logs, not to the visitor.
    return _api_error(request, 403, "CSRF check failed; send the API token instead of the session.") or render(
        request, "403_csrf.html", status=403
    )


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return _api_error(request, 404, "Not found.") or render(request, "404.html", status=404)


def method_not_allowed(request: HttpRequest) -> HttpResponse:
    return _api_error(request, 405, "Method not allowed.") or render(request, "405.html", status=405)


def is_transient_fault(exception: BaseException | None) -> bool:
    """True for an outage of the database, Redis or the broker, also when another exception was raised from one."""
    seen = 0
    while exception is not None and seen < 10:
        if isinstance(exception, TRANSIENT_FAULTS):
            return True
        exception = exception.__cause__
        seen += 1
    return False


def service_unavailable(request: HttpRequest) -> HttpResponse:
    """503 with Retry-After: JSON for the API, a page for a person. Like the 500 page it is rendered without a
    request context, which reads the session and the database that may be the ones away."""
    retry_after = settings.FAULT_RETRY_AFTER_S
    if request.path.startswith(API_PREFIXES):
        message = gettext("The service is briefly unavailable. Nothing was lost; retry in a few seconds.")
        response: HttpResponse = JsonResponse({"detail": message, "retry_after": retry_after}, status=503)
    else:
        response = HttpResponse(loader.get_template("503.html").render({"retry_after": retry_after}), status=503)
    response["Retry-After"] = str(retry_after)
    response["Cache-Control"] = "no-store"
    return response


def server_error(request: HttpRequest) -> HttpResponse:
    # Called while the exception is being handled. An outage of the database or Redis gets the 503 that says to
    # retry; anything else is a fault of the code.
    if is_transient_fault(sys.exc_info()[1]):
        return service_unavailable(request)
    # No request context: whatever failed (the session, the database, a context processor) may fail again.
    api = _api_error(request, 500, "The server failed to handle this request.")
    return api or HttpResponseServerError(loader.get_template("500.html").render())

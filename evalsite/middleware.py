import re
from collections.abc import Callable

from django.conf import settings
from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.messages.storage import default_storage
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.functional import SimpleLazyObject, empty

from evalsite import error_pages


class SecurityHeadersMiddleware:
    """Adds the CSP that Django 5.2 does not set itself; the other headers come from SecurityMiddleware."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", settings.CONTENT_SECURITY_POLICY)
        return response


_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_JSON_BRACKET = re.compile(rb"[\[\]{}]")


def json_nesting_exceeds(body: bytes, limit: int) -> bool:
    """True when brackets outside strings nest deeper than limit (json.loads would hit RecursionError, a 500)."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    depth = 0
    for match in _JSON_BRACKET.finditer(_JSON_STRING.sub(b'""', body)):
        if match.group() in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


class RequestSizeLimitMiddleware:
    """Refuses an over-long body from its Content-Length, before anything reads it (413), and a JSON body nested
    deeper than IMPORT_MAX_JSON_DEPTH (400).

    Django caps form fields it parses itself, but an upload is streamed to disk in full before a form or serializer
    can check its size, and a body read as a stream is not capped at all. Checking the declared length first
    bounds both; a body longer than it declares is cut at the declared length by the WSGI layer. Deep JSON makes
    the json module raise RecursionError, which no parser turns into a 400.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    @staticmethod
    def limit_for(request: HttpRequest) -> int:
        if request.content_type == "multipart/form-data":
            # an import file plus its rubric and form fields
            return settings.IMPORT_MAX_UPLOAD_BYTES + 2 * 1024 * 1024
        return settings.DATA_UPLOAD_MAX_MEMORY_SIZE

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            declared = 0
        limit = self.limit_for(request)
        if declared > limit:
            message = f"The request body is {declared} bytes; the limit is {limit} bytes."
            return self._refuse(request, message, 413)
        content_type = request.content_type or ""
        if content_type == "application/json" or content_type.endswith("+json"):
            depth = settings.IMPORT_MAX_JSON_DEPTH
            if json_nesting_exceeds(request.body, depth):
                return self._refuse(request, f"The JSON body is nested more than {depth} levels deep.", 400)
        return self.get_response(request)

    @staticmethod
    def _refuse(request: HttpRequest, message: str, status: int) -> HttpResponse:
        if request.path.startswith("/api/"):
            response: HttpResponse = JsonResponse({"detail": message}, status=status)
        else:
            response = HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")
        response["X-Frame-Options"] = "DENY"
        return response


class LazyMessageMiddleware(MessageMiddleware):
    """Django's MessageMiddleware with the message storage built on first use. Most requests (every API call) never
    touch it, and building it (a cookie signer and a session storage) was 2% of an annotator API request. A storage
    that was never built has nothing to save: BaseStorage.update does nothing unless messages were read or added."""

    def process_request(self, request: HttpRequest) -> None:
        request._messages = SimpleLazyObject(lambda: default_storage(request))  # type: ignore[attr-defined]

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        messages = getattr(request, "_messages", None)
        if type(messages) is SimpleLazyObject and messages._wrapped is empty:
            return response
        return super().process_response(request, response)


API_PREFIXES = ("/api/", "/factscore/api/")


class MethodNotAllowedPageMiddleware:
    """Gives the empty 405 of require_POST/require_GET (and class-based views) the site's error page, so a
    bookmarked or reloaded POST-only address does not show a blank page. The API keeps its JSON answers."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            response.status_code != 405
            or response.streaming
            or response.content
            or request.path.startswith(API_PREFIXES)
        ):
            return response
        page = error_pages.method_not_allowed(request)
        if response.has_header("Allow"):
            page["Allow"] = response["Allow"]
        return page

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.messages.storage import default_storage
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.utils.functional import SimpleLazyObject, empty
from rest_framework.exceptions import AuthenticationFailed

from annotations.api.tokens import ExpiringTokenAuthentication
from annotations.text.storable import NUL, unstorable_character
from evalsite import error_pages
from evalsite.error_pages import API_PREFIXES

logger = logging.getLogger(__name__)


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
    """Refuses an over-long body from its Content-Length, before anything reads it (413).

    Django caps form fields it parses itself, but an upload is streamed to disk in full before a form or serializer
    can check its size, and a body read as a stream is not capped at all. Checking the declared length first
    bounds both; a body longer than it declares is cut at the declared length by the WSGI layer.
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
        declared = declared_length(request)
        limit = self.limit_for(request)
        if declared > limit:
            message = f"The request body is {declared} bytes; the limit is {limit} bytes."
            return refuse(request, message, 413)
        return self.get_response(request)


def declared_length(request: HttpRequest) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


def refuse(request: HttpRequest, message: str, status: int, field: str | None = None) -> HttpResponse:
    if request.path.startswith(API_PREFIXES):
        body: dict[str, str] = {"detail": message}
        if field is not None:
            body["field"] = field
        response: HttpResponse = JsonResponse(body, status=status)
    else:
        response = HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")
    response["X-Frame-Options"] = "DENY"
    return response


_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")


def bad_character(text: str) -> str | None:
    """What is wrong with text that no column, template or encoder takes: a NUL or an unpaired surrogate (a pair
    decodes to one character, so any surrogate left in a str is unpaired)."""
    bad = unstorable_character(text)
    if bad is None:
        return None
    return "Null characters are not allowed" if bad == NUL else "Surrogate characters are not allowed"


def printable(name: str) -> str:
    """A field name safe to echo: the characters refused above would break the response's own encoding."""
    shown = _UNPRINTABLE.sub(lambda match: f"\\u{ord(match.group()):04x}", name)
    return shown if len(shown) <= 100 else shown[:100] + "..."


@dataclass(frozen=True)
class Problem:
    field: str
    message: str


def looks_like_json(text: str) -> bool:
    return text.lstrip()[:1] in ("{", "[")


def json_problem(value: object, path: str) -> Problem | None:
    """The first NUL or surrogate in a parsed JSON value's keys or strings, named by its dotted path."""
    stack: list[tuple[object, str]] = [(value, path)]
    while stack:
        current, where = stack.pop()
        if isinstance(current, str):
            reason = bad_character(current)
            if reason:
                return Problem(where, reason)
        elif isinstance(current, dict):
            for key, item in current.items():
                child = f"{where}.{key}" if where else str(key)
                reason = bad_character(str(key))
                if reason:
                    return Problem(child, reason)
                stack.append((item, child))
        elif isinstance(current, list):
            stack.extend((item, f"{where}[{index}]") for index, item in enumerate(current))
    return None


def field_problem(name: str, value: str, depth: int) -> Problem | None:
    """A form or query field: its name, its value and, when the value is JSON a view may parse (a multipart
    `config`, say), the strings inside it and its nesting."""
    reason = bad_character(name) or bad_character(value)
    if reason:
        return Problem(name, reason)
    if not looks_like_json(value):
        return None
    raw = value.encode("utf-8")
    if json_nesting_exceeds(raw, depth):
        return Problem(name, f"JSON nested more than {depth} levels deep is not allowed")
    try:
        parsed = json.loads(raw)
    except ValueError:
        return None  # not JSON after all; a view that wants JSON reports that itself
    return json_problem(parsed, name)


def request_problem(request: HttpRequest, depth: int) -> Problem | None:
    """The first bad value in the path, the query, the form fields or a JSON body. Uploaded files are the
    importer's to check, line by line."""
    reason = bad_character(request.path)
    if reason:
        return Problem("path", reason)
    for name, values in request.GET.lists():
        for value in values:
            problem = field_problem(name, value, depth)
            if problem:
                return problem
    content_type = request.content_type or ""
    if content_type == "application/json" or content_type.endswith("+json"):
        if json_nesting_exceeds(request.body, depth):
            return Problem("", f"JSON nested more than {depth} levels deep is not allowed")
        try:
            parsed = json.loads(request.body)
        except ValueError:
            return None
        return json_problem(parsed, "")
    if request.method == "POST" and content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
        try:
            form = request.POST
        except MultiPartParserError:
            # Left to the view: an API view authenticates first and answers 401/403 to a stranger, as before.
            return None
        for name, values in form.lists():
            for value in values:
                problem = field_problem(name, value, depth)
                if problem:
                    return problem
        for name in request.FILES:
            reason = bad_character(name)
            if reason:
                return Problem(name, reason)
    return None


class RequestHygieneMiddleware:
    """Refuses, with a 400 naming the field, the input that a view would otherwise turn into a 500: NUL and
    unpaired surrogates (Postgres and UTF-8 encoders reject them) anywhere in the path, query, form fields or a
    JSON body, and JSON nested deeper than IMPORT_MAX_JSON_DEPTH (RecursionError in json.loads) in a body or in a
    field a view parses as JSON. Before any of that it caps the body of a request nobody signed in for at
    ANONYMOUS_MAX_BODY_BYTES, so an anonymous client cannot make the server parse a large upload.

    It sits right after AuthenticationMiddleware because the cap needs to know who is signed in; nothing before it
    reads the body, and CsrfViewMiddleware, the first to parse a form, runs only after every middleware's request
    phase.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        declared = declared_length(request)
        limit = settings.ANONYMOUS_MAX_BODY_BYTES
        if declared > limit and not signed_in(request):
            message = f"The request body is {declared} bytes; the limit without signing in is {limit} bytes."
            return refuse(request, message, 413)
        problem = request_problem(request, settings.IMPORT_MAX_JSON_DEPTH)
        if problem is not None:
            field = printable(problem.field) if problem.field else "body"
            return refuse(request, f"{problem.message} (field: {field}).", 400, field)
        return self.get_response(request)


def signed_in(request: HttpRequest) -> bool:
    """A session user or a valid, unexpired API token. Only asked of bodies over the anonymous cap, so the token
    lookup is not paid by ordinary requests."""
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return True
    try:
        # The API's own token check (an expired token is no token) reads only the Authorization header, which the
        # plain Django request already carries.
        return ExpiringTokenAuthentication().authenticate(request) is not None  # type: ignore[arg-type]
    except AuthenticationFailed:
        return False


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


class TransientFaultMiddleware:
    """A view that fails because the database or Redis is away answers 503 with Retry-After, not 500 (see
    error_pages.service_unavailable). Faults raised outside a view, such as the session save after it, reach
    handler500, which answers the same way."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not error_pages.is_transient_fault(exception):
            return None
        logger.warning("%s answered 503: %s", request.path, type(exception).__name__, exc_info=exception)
        return error_pages.service_unavailable(request)

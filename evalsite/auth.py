"""Login and API-token endpoints with brute-force limits.

Failed attempts are counted in the cache per client address and per username, in fixed windows whose size and
count come from REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"] ("login" for the HTML logins, "token" for api/token/).
The per-address counter stops one client trying many usernames. The per-username counter, keyed on the username as
the login form reads it (NFKC, then case-folded, so look-alikes share it), stops a password spray spread over many
addresses: once it is used up, only addresses with no recent failure may still try that account, so a spray costs
a fresh address per guess while the owner, signing in from a clean address, is never locked out by an attacker.
The token endpoint is additionally throttled per address on every request.
The counters live in annotations.recruitment.attempt_counters: the shared cache, or this process's memory while it
is away, so signing in keeps working through a Redis outage.
"""

import hashlib
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib import admin, messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponseBase
from django.shortcuts import render
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.authtoken.models import Token
from rest_framework.authtoken.serializers import AuthTokenSerializer
from rest_framework.decorators import (
    api_view,
    authentication_classes,
    parser_classes,
    permission_classes,
    renderer_classes,
    throttle_classes,
)
from rest_framework.exceptions import NotAuthenticated, PermissionDenied
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.permissions import AllowAny
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from annotations.api.tokens import token_expires_at, token_issue, token_revoke
from annotations.recruitment.attempt_counters import attempt_count, attempt_count_up, attempt_counters
from annotations.recruitment.selectors import is_crowd_worker
from annotations.text.usernames import username_key

View = Callable[..., HttpResponseBase]


def client_address(request: HttpRequest) -> str:
    """The client's address; X-Forwarded-For counts only as far as NUM_PROXIES trusted proxies appended to it.

    DRF's default (NUM_PROXIES None) trusts the whole header, which lets a client pick a fresh identity per request.
    """
    remote_addr = request.META.get("REMOTE_ADDR", "") or "unknown"
    proxies = api_settings.NUM_PROXIES or 0
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR")
    if proxies <= 0 or not forwarded:
        return remote_addr
    hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
    return hops[-min(proxies, len(hops))] if hops else remote_addr


def _rate(scope: str) -> tuple[int, int]:
    """(allowed failures, window in seconds) from a DRF rate string such as "10/min"."""
    count, _, period = str(api_settings.DEFAULT_THROTTLE_RATES[scope]).partition("/")
    return int(count), {"s": 1, "m": 60, "h": 3600, "d": 86400}[period[0]]


def _address_key(scope: str, request: HttpRequest) -> str:
    return f"auth-failures:{scope}:addr:{client_address(request)}"


def _username_key(scope: str, username: str) -> str:
    digest = hashlib.sha256(username_key(username).encode("utf-8")).hexdigest()
    return f"auth-failures:{scope}:user:{digest}"


def _counter_keys(scope: str, request: HttpRequest, username: str) -> list[str]:
    keys = [_address_key(scope, request)]
    if username_key(username):
        keys.append(_username_key(scope, username))
    return keys


def attempts_blocked(scope: str, request: HttpRequest, username: str) -> bool:
    limit, _ = _rate(scope)
    address_failures = attempt_count(_address_key(scope, request))
    if address_failures >= limit:
        return True
    if not username_key(username):
        return False
    if attempt_count(_username_key(scope, username)) < limit:
        return False
    # A used-up account holds back only addresses that failed recently: blocking every address would let anyone
    # lock the owner out by spraying wrong passwords.
    return address_failures > 0


def record_failed_attempt(scope: str, request: HttpRequest, username: str) -> None:
    _, window = _rate(scope)
    for key in _counter_keys(scope, request, username):
        attempt_count_up(key, window_seconds=window)


def forget_failed_attempts(scope: str, request: HttpRequest, username: str) -> None:
    # Only the username counter is cleared: a success must not reset the counter of an address that sprays.
    keys = _counter_keys(scope, request, username)[1:]
    if keys:
        attempt_counters.delete_many(keys)


def limit_login_attempts(view: View) -> View:
    """Refuses a login POST with 429 once the address or the username has used up its failures."""

    @wraps(view)
    def limited(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if request.method != "POST":
            return view(request, *args, **kwargs)
        username = str(request.POST.get("username", ""))[:300]
        if attempts_blocked("login", request, username):
            _, window = _rate("login")
            messages.error(request, "Too many failed login attempts. Wait a minute and try again.")
            refusal = render(
                request,
                "registration/login.html",
                {"form": AuthenticationForm(request), "next": ""},
                status=429,
            )
            refusal["Retry-After"] = str(window)
            return refusal
        response = view(request, *args, **kwargs)
        user = getattr(request, "user", None)
        # A signed-in user may still post guesses for another account (the admin login form allows it), so success
        # means a redirect *and* a session for the very account that was named.
        succeeded = (
            response.status_code in (301, 302, 303)
            and user is not None
            and user.is_authenticated
            and username_key(user.get_username()) == username_key(username)
        )
        if succeeded:
            forget_failed_attempts("login", request, username)
        elif response.status_code < 300:
            record_failed_attempt("login", request, username)
        return response

    return limited


login_view = limit_login_attempts(auth_views.LoginView.as_view(redirect_authenticated_user=True))


def admin_login_view(request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponseBase:
    """The admin's own login form, under the same limits as the site login."""
    return limit_login_attempts(admin.site.login)(request, extra_context)


class TokenAddressThrottle(SimpleRateThrottle):
    """Every request to api/token/ counts, per client address (never per claimed X-Forwarded-For)."""

    scope = "token"
    # Like the failure counters, the throttle keeps counting in this process while the shared cache is away.
    cache = attempt_counters  # type: ignore[assignment]  # the get/set the throttle uses, not a whole BaseCache

    def get_cache_key(self, request: Request, view: Any) -> str:
        return self.cache_format % {"scope": self.scope, "ident": client_address(request)}


class TokenOutput(serializers.Serializer):
    token = serializers.CharField()
    expires_at = serializers.DateTimeField()


@extend_schema(
    request=AuthTokenSerializer,
    responses={
        200: TokenOutput,
        400: inline_serializer("TokenError", {"non_field_errors": serializers.ListField()}),
        429: inline_serializer("TokenThrottled", {"detail": serializers.CharField()}),
    },
    auth=[],
)
@api_view(["POST"])
@authentication_classes([])
@permission_classes([AllowAny])
@throttle_classes([TokenAddressThrottle])
@parser_classes([JSONParser, FormParser, MultiPartParser])
@renderer_classes([JSONRenderer])
def token_obtain(request: Request) -> Response:
    """Exchanges a username and password for the user's API token."""
    username = str(request.data.get("username", ""))[:300] if hasattr(request.data, "get") else ""
    if attempts_blocked("token", request, username):
        return Response(
            {"detail": "Too many failed attempts for this account or address; try again later."},
            status=status.HTTP_429_TOO_MANY_REQUESTS,
            headers={"Retry-After": str(_rate("token")[1])},
        )
    form = AuthTokenSerializer(data=request.data, context={"request": request})
    if not form.is_valid():
        record_failed_attempt("token", request, username)
        return Response(form.errors, status=status.HTTP_400_BAD_REQUEST)
    forget_failed_attempts("token", request, username)
    token = token_issue(user=form.validated_data["user"])
    return Response({"token": token.key, "expires_at": token_expires_at(token.created)})


class TokenInfo(serializers.Serializer):
    key_prefix = serializers.CharField()
    created = serializers.DateTimeField()
    expires_at = serializers.DateTimeField()


@extend_schema(
    methods=["GET"],
    responses={200: inline_serializer("TokenList", {"tokens": TokenInfo(many=True)})},
)
@extend_schema(methods=["DELETE"], responses={204: None})
@api_view(["GET", "DELETE"])
@renderer_classes([JSONRenderer])
def token_mine(request: Request) -> Response:
    """The signed-in user's API tokens (GET, without the secret part), or revokes them (DELETE)."""
    user = request.user
    if not isinstance(user, User):
        raise NotAuthenticated
    if is_crowd_worker(user):
        # Study participants work in the browser only; a token would outlive their session on the shared machine.
        raise PermissionDenied("study participants have no API tokens")
    if request.method == "DELETE":
        token_revoke(user=user)
        return Response(status=status.HTTP_204_NO_CONTENT)
    tokens = [
        {"key_prefix": token.key[:6], "created": token.created, "expires_at": token_expires_at(token.created)}
        for token in Token.objects.filter(user=user)
    ]
    return Response({"tokens": TokenInfo(tokens, many=True).data})


class AnnotatorTokenScheme(OpenApiAuthenticationExtension):
    """The annotator API's one-query token lookup is DRF's token scheme; without its own schema name drf-spectacular
    reports two components called "tokenAuth", a warning that fails the `check --deploy` gate."""

    target_class = "annotations.api.annotator.AnnotatorTokenAuthentication"
    name = "annotatorTokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": 'Token-based authentication with required prefix "Token"',
        }

"""Joins counted per client address in fixed windows, in the attempt counters' store (the shared cache, or this
process's memory while it is away): the same pattern as the login limits, which live above this app. The address
is the socket's peer, or the last trusted proxy's view of it."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest

from annotations.recruitment.attempt_counters import attempt_count, attempt_count_up

JOIN_LIMIT = 30
JOIN_WINDOW_SECONDS = 60


def _address(request: HttpRequest) -> str:
    remote = request.META.get("REMOTE_ADDR", "") or "unknown"
    configured = settings.REST_FRAMEWORK.get("NUM_PROXIES")
    proxies = configured if isinstance(configured, int) else 0
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR")
    if proxies <= 0 or not forwarded:
        return remote
    hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
    return hops[-min(proxies, len(hops))] if hops else remote


def _key(request: HttpRequest) -> str:
    return f"crowd-joins:addr:{_address(request)}"


def joins_blocked(request: HttpRequest) -> bool:
    """Whether the address used up its joins in this window; a read, for pages that only show the start form."""
    return attempt_count(_key(request)) >= JOIN_LIMIT


def join_attempt_record(request: HttpRequest) -> int:
    """Counts one attempt and returns the window's count including it. The increment is the check: one atomic
    step, so concurrent attempts each see a different count and at most JOIN_LIMIT of them get a count within it."""
    return attempt_count_up(_key(request), window_seconds=JOIN_WINDOW_SECONDS)


def join_attempt_allowed(request: HttpRequest) -> bool:
    """Counts a join attempt and says whether it is within the address's limit."""
    return join_attempt_record(request) <= JOIN_LIMIT

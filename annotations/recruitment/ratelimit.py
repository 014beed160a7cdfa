"""Joins counted per client address in fixed windows, in the cache: the same pattern as the login limits, which
live above this app. The address is the socket's peer, or the last trusted proxy's view of it."""

from __future__ import annotations

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest

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
    return int(cache.get(_key(request)) or 0) >= JOIN_LIMIT


def join_attempt_record(request: HttpRequest) -> None:
    key = _key(request)
    # add() starts the window with the first attempt only, so later attempts do not extend it.
    cache.add(key, 0, timeout=JOIN_WINDOW_SECONDS)
    try:
        cache.incr(key)
    except ValueError:
        cache.set(key, 1, timeout=JOIN_WINDOW_SECONDS)

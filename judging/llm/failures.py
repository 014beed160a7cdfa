"""Reading a failed provider call: the chain of causes, the status the provider answered with, how long it asked us
to wait, and how long to back off before the next attempt. The gateway's classification of a failure builds on these
and on litellm's exception classes, which only the gateway imports."""

from __future__ import annotations

import datetime
import email.utils
import os
import random
import re
import time
from typing import Any

from django.conf import settings

from judging.llm import netguard
from judging.llm.calls import CallSpec
from judging.llm.keys import KeyNotAllowed, ProviderNotSupported

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _duration_s(value: str) -> float | None:
    """OpenAI's reset durations ("1s", "6m0s", "20ms")."""
    parts = _DURATION_PART.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value.replace(" ", ""):
        return None
    return sum(float(number) * _DURATION_UNITS[unit] for number, unit in parts)


def _seconds_until(value: str) -> float | None:
    """An HTTP date (Retry-After) or an RFC 3339 time (Anthropic's resets), as seconds from now."""
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        try:
            moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return max(0.0, moment.timestamp() - time.time())


def _wait_from_headers(headers: Any) -> float | None:
    """How long the provider asks us to wait, from the headers it sends with a 429 or 503: Retry-After (every
    provider), Azure's retry-after-ms, the x-ratelimit-reset-* durations of OpenAI and Azure, and Anthropic's
    anthropic-ratelimit-*-reset times. The longest of the windows that ran out counts."""

    def get(name: str) -> str | None:
        try:
            value = headers.get(name)
        except Exception:
            return None
        return str(value).strip() if value is not None else None

    retry_after = get("retry-after")
    if retry_after:
        try:
            return max(0.0, float(retry_after))
        except ValueError:
            if (seconds := _seconds_until(retry_after)) is not None:
                return seconds
    retry_after_ms = get("retry-after-ms")
    if retry_after_ms:
        try:
            return max(0.0, float(retry_after_ms) / 1000)
        except ValueError:
            pass
    waits = []
    for name, parse in (
        ("x-ratelimit-reset-requests", _duration_s),
        ("x-ratelimit-reset-tokens", _duration_s),
        ("anthropic-ratelimit-requests-reset", _seconds_until),
        ("anthropic-ratelimit-tokens-reset", _seconds_until),
        ("anthropic-ratelimit-input-tokens-reset", _seconds_until),
        ("anthropic-ratelimit-output-tokens-reset", _seconds_until),
    ):
        value = get(name)
        if not value:
            continue
        if name.startswith("x-ratelimit-"):
            remaining = get(name.replace("reset", "remaining"))
        else:
            remaining = get(name.replace("-reset", "-remaining"))
        if remaining not in (None, "0"):
            continue  # that window still has room: its reset is not why we were refused
        seconds = parse(value)
        if seconds is not None:
            waits.append(seconds)
    return max(waits) if waits else None


def provider_wait(exc: BaseException) -> float | None:
    for link in error_chain(exc):
        response = getattr(link, "response", None)
        candidates = [
            getattr(response, "headers", None) if response is not None else None,
            getattr(link, "litellm_response_headers", None),
            getattr(link, "headers", None),
        ]
        for source in candidates:
            if source:
                wait = _wait_from_headers(source)
                if wait is not None:
                    return wait
    return None


def error_chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 10:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def http_status(chain: list[BaseException]) -> int | None:
    """The status the provider actually answered with: litellm reports some (a redirect from Anthropic or Gemini, for
    one) as a connection error with status 500, the HTTP response kept only further down the chain."""
    for link in chain:
        status = getattr(getattr(link, "response", None), "status_code", None)
        if isinstance(status, int):
            return status
    return None


def kind_of_status(status: int) -> str | None:
    if 300 <= status < 400:
        return "redirect"
    if status == 408:
        return "timeout"
    if status == 429:
        return "rate_limit"
    if status in (401, 403):
        return "auth"
    if status == 404:
        return "not_found"
    if status >= 500:
        return "server"
    if 400 <= status < 500:
        return "bad_request"
    return None


class ProviderAnswered(Exception):
    """A provider's error answer to a request the gateway sent itself (not through litellm); `auth` when it refused
    the credential (a token endpoint answers a bad grant with 400)."""

    def __init__(self, status_code: int, message: str, response: Any, *, auth: bool = False) -> None:
        super().__init__(f"HTTP {status_code}: {message}")
        self.status_code = status_code
        self.response = response
        self.auth = auth


_GUARD_KINDS: tuple[tuple[type[BaseException], str], ...] = (
    (netguard.HostUnresolvable, "connection"),
    (netguard.ApiBaseRefused, "refused_host"),
    (KeyNotAllowed, "key_not_allowed"),
    (ProviderNotSupported, "unsupported_provider"),
)


def guard_kind(chain: list[BaseException]) -> str | None:
    for guard, kind in _GUARD_KINDS:
        if any(isinstance(e, guard) for e in chain):
            return kind
    return None


def answered_kind(exc: BaseException, chain: list[BaseException]) -> str | None:
    answered = http_status(chain)
    if answered is not None and 300 <= answered < 400:
        return "redirect"
    if isinstance(exc, ProviderAnswered):
        if exc.auth and 400 <= exc.status_code < 500:
            return "auth"
        return kind_of_status(exc.status_code) or "server"
    return None


def status_kind(exc: BaseException, *, connection_error: bool) -> str | None:
    """The kind of an error that carries only a bare status code. A connection error's 5xx is litellm's stand-in for
    "no answer", not the provider's, so it is left to the connection check."""
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int) or (connection_error and status >= 500):
        return None
    return kind_of_status(status)


def transport_error(exc: Exception) -> BaseException:
    """A failure of the guarded client, as the classification reads litellm's: a timeout or a connection error."""
    name = type(exc).__name__
    if isinstance(exc, netguard.ApiBaseRefused):
        return exc
    if "Timeout" in name:
        return TimeoutError(f"{name}: {exc}")
    return ConnectionError(f"{name}: {exc}")


def backoff_delay(attempt: int, retry_after: float | None, rng: random.Random) -> float:
    base = float(settings.JUDGE_RETRY_BASE_S)
    cap = float(settings.JUDGE_RETRY_CAP_S)
    # Full jitter spreads the retries of many concurrent calls instead of synchronising them.
    delay = rng.uniform(0, min(cap, base * (2 ** (attempt - 1))))
    if retry_after is not None:
        delay = max(delay, min(retry_after, float(settings.JUDGE_RETRY_AFTER_CAP_S)))
    return delay


def safe_message(exc: BaseException, spec: CallSpec) -> str:
    """The error text with any configured key removed (keys never reach storage or logs)."""
    message = f"{type(exc).__name__}: {exc}"[:2000]
    key = os.environ.get(spec.api_key_env or "", "") if spec.api_key_env else ""
    if key and len(key) >= 4:
        message = message.replace(key, "[redacted]")
    return message

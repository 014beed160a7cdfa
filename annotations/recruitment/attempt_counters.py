"""The store of the attempt limits (failed sign-ins, API-token requests, study-link joins): the shared cache, and
this process's memory while the cache cannot be reached.

Refusing every sign-in because the counter store is away would turn a Redis outage into a site outage, and not
counting at all would open an unlimited guessing window. So a cache operation that fails logs a warning and the
count carries on in a per-process store: during the outage each server process enforces every limit on its own,
which lets a client at most (processes x limit) attempts per window, and the counts start again in the shared store
once it answers.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.cache import cache
from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.locmem import LocMemCache

logger = logging.getLogger(__name__)

# Enough for every address and account of a busy outage; past it the oldest third is dropped, as any LocMemCache.
_FALLBACK_ENTRIES = 50_000


class AttemptCounterStore:
    """The cache methods the limits use (get, set, add, incr, delete_many), asked of the shared cache first."""

    def __init__(self) -> None:
        self._local = LocMemCache("attempt-counters", {"OPTIONS": {"MAX_ENTRIES": _FALLBACK_ENTRIES}})

    def _call(self, operation: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return getattr(cache, operation)(*args, **kwargs)
        except ValueError:
            raise  # incr() of a key whose window ended: an answer, not an outage
        except Exception as exc:  # any failure of the shared store: Redis away, timing out, refusing
            logger.warning(
                "attempt limits: the shared cache is unavailable (%s: %s); counting in this process only",
                type(exc).__name__,
                exc,
            )
            return getattr(self._local, operation)(*args, **kwargs)

    def get(self, key: str, default: Any = None) -> Any:
        return self._call("get", key, default)

    def set(self, key: str, value: Any, timeout: Any = DEFAULT_TIMEOUT) -> None:
        self._call("set", key, value, timeout)

    def add(self, key: str, value: Any, timeout: Any = DEFAULT_TIMEOUT) -> bool:
        return bool(self._call("add", key, value, timeout))

    def incr(self, key: str, delta: int = 1) -> int:
        return int(self._call("incr", key, delta))

    def delete_many(self, keys: list[str]) -> None:
        self._call("delete_many", keys)

    def forget_local(self) -> None:
        """Drops the per-process counts (tests start each from nothing)."""
        self._local.clear()


attempt_counters = AttemptCounterStore()


def attempt_count(key: str) -> int:
    return int(attempt_counters.get(key) or 0)


def attempt_count_up(key: str, *, window_seconds: int) -> int:
    """Counts one attempt in the key's fixed window and returns the window's count including it. add() starts the
    window with the first attempt only, so later attempts do not extend it."""
    attempt_counters.add(key, 0, timeout=window_seconds)
    try:
        return attempt_counters.incr(key)
    except ValueError:  # the window ended between the two calls
        attempt_counters.add(key, 0, timeout=window_seconds)
        return attempt_counters.incr(key)

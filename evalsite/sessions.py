"""The session store: Django's cached_db sessions, with the cache as an accelerator the site can lose.

Django's own store treats a failed cache read as a miss, but not a failed cache write after it reads the session
from the database, nor a failed delete or membership test: with Redis away, loading a session raised the cache's
ConnectionError half-way, and the request then failed on the half-built store (`_session_cache` missing). Here every
cache operation that fails counts as a miss: the session is read from and written to the database as usual, so a
Redis outage logs nobody out and costs only the database round trip.

A write the cache missed can leave an older copy there, if the cache server was reachable again at the next read
without having restarted; so a failed write also tries to drop the key, and the copy expires with the session in
any case. A Redis restarted without persistence (the deployed configuration) comes back empty.
"""

import logging
from typing import Any

from django.contrib.sessions.backends.cached_db import SessionStore as CachedDBStore
from django.core.cache.backends.base import BaseCache

logger = logging.getLogger(__name__)


class SessionStore(CachedDBStore):
    _cache: BaseCache

    def _cache_get(self) -> Any:
        try:
            return self._cache.get(self.cache_key)
        except Exception as exc:  # any cache failure is a miss; the database holds every session
            logger.warning("session cache unavailable; reading the session from the database: %s", exc)
            return None

    def _cache_set(self, data: Any, age: int) -> None:
        try:
            self._cache.set(self.cache_key, data, age)
        except Exception as exc:  # the database copy is the one that counts
            logger.warning("session cache unavailable; the session is kept in the database only: %s", exc)
            self._cache_forget(self.cache_key)

    def _cache_forget(self, key: str) -> None:
        try:
            self._cache.delete(key)
        except Exception as exc:  # the copy expires with the session
            logger.warning("session cache unavailable; a stale copy may stay until it expires: %s", exc)

    def load(self) -> dict[str, Any]:
        data = self._cache_get()
        if data is not None:
            return data  # type: ignore[no-any-return]
        stored = self._get_session_from_db()  # type: ignore[attr-defined]
        if not stored:
            return {}
        data = self.decode(stored.session_data)
        self._cache_set(data, self.get_expiry_age(expiry=stored.expire_date))
        return data  # type: ignore[no-any-return]

    def exists(self, session_key: str | None) -> bool:
        if not session_key:
            return False
        try:
            if (self.cache_key_prefix + session_key) in self._cache:
                return True
        except Exception as exc:  # fall through to the database
            logger.warning("session cache unavailable; checking the database: %s", exc)
        return bool(super(CachedDBStore, self).exists(session_key))

    def save(self, must_create: bool = False) -> None:
        super(CachedDBStore, self).save(must_create)
        self._cache_set(self._session, self.get_expiry_age())  # type: ignore[attr-defined]

    def delete(self, session_key: str | None = None) -> None:
        super(CachedDBStore, self).delete(session_key)
        if session_key is None:
            if self.session_key is None:
                return
            session_key = self.session_key
        self._cache_forget(self.cache_key_prefix + session_key)

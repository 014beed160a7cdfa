"""Per-run limits (max_concurrency, rpm, tpm) that hold across every worker of the run.

With a Redis broker the counters live in Redis and are changed by Lua scripts, so the check and
the update are one atomic step whichever machine runs them, and Redis's own clock is used. Slots
are leases with an expiry: a worker killed mid-call frees its slot when the lease runs out.
On the embedded (SQLAlchemy) broker there is no shared server, so limits are process-local.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from django.conf import settings

log = logging.getLogger(__name__)

WINDOW_S = 60.0


@dataclass(frozen=True)
class Limits:
    max_concurrency: int = 32
    rpm: int | None = None
    tpm: int | None = None
    slot_ttl_s: float = 90.0


@dataclass
class Lease:
    lease_id: str
    tokens: int


class Limiter(Protocol):
    async def acquire(self, tokens: int, should_stop: Any = None) -> Lease | None: ...

    async def release(self, lease: Lease, actual_tokens: int | None = None) -> None: ...

    async def stop_all(self) -> None: ...

    async def close(self) -> None: ...


_LOCAL_STOPPED: set[str] = set()


class LocalLimiter:
    """Process-local limits for the embedded broker (one machine, usually one worker)."""

    def __init__(self, limits: Limits, scope: str = "") -> None:
        self.limits = limits
        self.scope = scope
        self._slots = asyncio.Semaphore(max(1, limits.max_concurrency))
        self._requests: collections.deque[float] = collections.deque()
        self._tokens: collections.deque[tuple[float, int, str]] = collections.deque()
        self._lock = asyncio.Lock()

    def _window_wait(self, tokens: int) -> float:
        now = time.monotonic()
        while self._requests and self._requests[0] <= now - WINDOW_S:
            self._requests.popleft()
        while self._tokens and self._tokens[0][0] <= now - WINDOW_S:
            self._tokens.popleft()
        wait = 0.0
        if self.limits.rpm and len(self._requests) >= self.limits.rpm:
            wait = max(wait, self._requests[0] + WINDOW_S - now)
        if self.limits.tpm and self._tokens:
            used = sum(t for _, t, _ in self._tokens)
            if used + tokens > self.limits.tpm:
                wait = max(wait, self._tokens[0][0] + WINDOW_S - now)
        return wait

    async def acquire(self, tokens: int, should_stop: Any = None) -> Lease | None:
        tokens = min(tokens, self.limits.tpm) if self.limits.tpm else tokens
        await self._slots.acquire()
        try:
            while True:
                if (should_stop is not None and should_stop()) or (self.scope and self.scope in _LOCAL_STOPPED):
                    self._slots.release()
                    return None
                async with self._lock:
                    wait = self._window_wait(tokens)
                    if wait <= 0:
                        lease = Lease(uuid.uuid4().hex, tokens)
                        now = time.monotonic()
                        self._requests.append(now)
                        self._tokens.append((now, tokens, lease.lease_id))
                        return lease
                await asyncio.sleep(min(wait, 0.5))
        except BaseException:
            self._slots.release()
            raise

    async def release(self, lease: Lease, actual_tokens: int | None = None) -> None:
        # Only a tpm limit reads the token log, and the scan is linear in a minute of calls.
        if self.limits.tpm and actual_tokens is not None and actual_tokens != lease.tokens:
            async with self._lock:
                for index, (at, _tokens, lease_id) in enumerate(self._tokens):
                    if lease_id == lease.lease_id:
                        self._tokens[index] = (at, actual_tokens, lease_id)
                        break
        self._slots.release()

    async def stop_all(self) -> None:
        if self.scope:
            _LOCAL_STOPPED.add(self.scope)

    async def close(self) -> None:
        return None


# KEYS: inflight zset, rpm zset, tpm zset, stop flag
# ARGV: max_concurrency, rpm (0 = none), tpm (0 = none), lease id, tokens, slot ttl seconds
# Returns {granted (1 / 0 / -1 = the run was stopped), wait seconds as string}
_ACQUIRE_LUA = """
if redis.call('EXISTS', KEYS[4]) == 1 then
  return {-1, '0'}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local maxc = tonumber(ARGV[1])
local rpm = tonumber(ARGV[2])
local tpm = tonumber(ARGV[3])
local id = ARGV[4]
local tokens = tonumber(ARGV[5])
local ttl = tonumber(ARGV[6])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= maxc then
  return {0, '0.02'}
end
local wait = 0
if rpm > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - 60)
  if redis.call('ZCARD', KEYS[2]) >= rpm then
    local oldest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
    wait = math.max(wait, tonumber(oldest[2]) + 60 - now)
  end
end
if tpm > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - 60)
  local entries = redis.call('ZRANGE', KEYS[3], 0, -1, 'WITHSCORES')
  local used = 0
  for i = 1, #entries, 2 do
    local n = string.match(entries[i], ':(%d+)$')
    used = used + tonumber(n or '0')
  end
  if used + tokens > tpm and #entries > 0 then
    wait = math.max(wait, tonumber(entries[2]) + 60 - now)
  end
end
if wait > 0 then
  return {0, tostring(wait)}
end
redis.call('ZADD', KEYS[1], now + ttl, id)
redis.call('EXPIRE', KEYS[1], math.ceil(ttl) + 120)
if rpm > 0 then
  redis.call('ZADD', KEYS[2], now, id)
  redis.call('EXPIRE', KEYS[2], 180)
end
if tpm > 0 then
  redis.call('ZADD', KEYS[3], now, id .. ':' .. tokens)
  redis.call('EXPIRE', KEYS[3], 180)
end
return {1, '0'}
"""

# KEYS: inflight zset, tpm zset; ARGV: lease id, estimated tokens, actual tokens (-1 = unchanged)
_RELEASE_LUA = """
redis.call('ZREM', KEYS[1], ARGV[1])
local actual = tonumber(ARGV[3])
if actual >= 0 then
  local old = ARGV[1] .. ':' .. ARGV[2]
  local score = redis.call('ZSCORE', KEYS[2], old)
  if score then
    redis.call('ZREM', KEYS[2], old)
    redis.call('ZADD', KEYS[2], score, ARGV[1] .. ':' .. ARGV[3])
  end
end
return 1
"""


class RedisLimiter:
    """Limits shared by every worker of one run, through Redis."""

    def __init__(self, limits: Limits, scope: str, url: str) -> None:
        import redis.asyncio as aioredis  # noqa: PLC0415 - ~0.3 s, and only a Redis broker uses it

        self.limits = limits
        self.keys = [f"evalsite:judge:{scope}:{part}" for part in ("inflight", "rpm", "tpm", "stop")]
        # Timeouts, so a Redis that vanished without closing its connections is noticed and retried like one that did.
        self.client = aioredis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=10)
        self._acquire = self.client.register_script(_ACQUIRE_LUA)
        self._release = self.client.register_script(_RELEASE_LUA)
        # A local cap as well, so this process never holds more slots than the run allows.
        self._local = asyncio.Semaphore(max(1, limits.max_concurrency))
        # While the run is full, only the coroutine holding this lock asks Redis again: without it every waiting
        # call polled Redis, and with 64 waiters the polling alone cost more CPU than the provider calls.
        self._turn = asyncio.Lock()
        # Set when this process gives a slot back, so the waiting coroutine retries at once instead of
        # sleeping out its poll interval; slots freed by other processes are seen at the next poll.
        self._slot_freed = asyncio.Event()
        self._giving_back: set[asyncio.Future[Any]] = set()

    async def acquire(self, tokens: int, should_stop: Any = None) -> Lease | None:
        tokens = min(tokens, self.limits.tpm) if self.limits.tpm else tokens
        await self._local.acquire()
        lease = Lease(uuid.uuid4().hex, tokens)
        try:
            async with self._turn:
                while True:
                    if should_stop is not None and should_stop():
                        self._local.release()
                        return None
                    self._slot_freed.clear()
                    try:
                        granted, wait = await redis_retrying(
                            functools.partial(
                                self._acquire,
                                keys=self.keys,
                                args=[
                                    self.limits.max_concurrency,
                                    self.limits.rpm or 0,
                                    self.limits.tpm or 0,
                                    lease.lease_id,
                                    tokens,
                                    self.limits.slot_ttl_s,
                                ],
                            ),
                            should_stop=should_stop,
                        )
                    except redis_down_errors():
                        # Only a stopped run gives up waiting for Redis.
                        self._local.release()
                        return None
                    if int(granted) == 1:
                        return lease
                    if int(granted) == -1:
                        self._local.release()
                        return None
                    delay = min(max(float(wait), 0.005), 0.5) * (0.5 + random.random())
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._slot_freed.wait(), timeout=delay)
        except BaseException:
            self._local.release()
            raise

    async def release(self, lease: Lease, actual_tokens: int | None = None) -> None:
        give_back = functools.partial(
            self._release,
            keys=[self.keys[0], self.keys[2]],
            args=[lease.lease_id, lease.tokens, -1 if actual_tokens is None else int(actual_tokens)],
        )
        try:
            await give_back()
        except redis_down_errors():
            # The call has returned and may have been paid for: its result must reach the caller now, so the
            # lease is given back in the background (and, should Redis stay away, expires by itself).
            self._give_back_later(give_back)
        finally:
            self._local.release()
            self._slot_freed.set()

    def _give_back_later(self, give_back: Callable[[], Awaitable[Any]]) -> None:
        task = asyncio.ensure_future(redis_retrying(give_back, give_up_after=self.limits.slot_ttl_s))
        self._giving_back.add(task)
        task.add_done_callback(_forget_give_back(self._giving_back))

    async def stop_all(self) -> None:
        """Every worker of the run stops sending at its next acquire (cancel, budget)."""
        try:
            await redis_retrying(
                functools.partial(self.client.set, self.keys[3], "1", ex=86_400), give_up_after=STOP_RETRY_S
            )
        except redis_down_errors():
            # Every worker also reads the run's status from the database within half a second.
            log.warning("could not set the stop flag of %s in Redis", self.keys[3])

    async def close(self) -> None:
        for task in list(self._giving_back):
            task.cancel()  # an unreturned lease expires on its own
        await self.client.aclose()


# A Redis blip (a restart, a failover, a dropped connection) is waited out rather than failing a call.
REDIS_RETRY_FIRST_S = 0.05
REDIS_RETRY_CAP_S = 2.0
STOP_RETRY_S = 5.0


def redis_down_errors() -> tuple[type[BaseException], ...]:
    """The errors that mean Redis could not be reached (as opposed to a bug in a script or a command)."""
    import redis  # noqa: PLC0415 - ~0.25 s, and only a Redis broker uses it

    return (redis.ConnectionError, redis.TimeoutError, ConnectionError, TimeoutError)


async def redis_retrying(
    op: Callable[[], Awaitable[Any]],
    *,
    should_stop: Callable[[], bool] | None = None,
    give_up_after: float | None = None,
) -> Any:
    """`op()`, repeated with capped, jittered backoff while Redis cannot be reached. It raises the connection error
    only once `should_stop()` is true or `give_up_after` seconds have passed; without either it waits for Redis."""
    errors = redis_down_errors()
    started = time.monotonic()
    delay = REDIS_RETRY_FIRST_S
    while True:
        try:
            return await op()
        except errors as exc:
            waited = time.monotonic() - started
            if (should_stop is not None and should_stop()) or (give_up_after is not None and waited >= give_up_after):
                raise
            if delay == REDIS_RETRY_FIRST_S:
                log.warning("Redis unreachable (%s); retrying", type(exc).__name__)
        await asyncio.sleep(delay * (0.5 + random.random()))
        delay = min(2 * delay, REDIS_RETRY_CAP_S)


def _forget_give_back(pending: set[asyncio.Future[Any]]) -> Callable[[asyncio.Future[Any]], None]:
    def done(task: asyncio.Future[Any]) -> None:
        pending.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("a limiter lease could not be given back; it expires by itself")

    return done


def run_scope(run_id: int) -> str:
    """The limiter scope of a judge run: its slots, windows and stop flag are kept under this name."""
    return f"run{run_id}"


def calls_in_flight(scope: str) -> int | None:
    """Provider calls of the scope holding a slot now, across every worker: a slot is taken just before a call and
    given back when it returns. Read only (expired leases are counted out, not removed). None when it cannot be
    known here: without Redis each worker keeps its slots in its own memory, and Redis may be unreachable."""
    if not uses_redis():
        return None
    import redis  # noqa: PLC0415 - ~0.25 s, and only a Redis broker uses it

    client = redis.Redis.from_url(redis_url())
    try:
        seconds, micros = client.time()
        # Leases are scored with their expiry on Redis's clock; one that ran out belongs to a worker that died.
        return int(client.zcount(f"evalsite:judge:{scope}:inflight", f"({seconds + micros / 1_000_000}", "+inf"))
    except redis.RedisError:
        return None
    finally:
        client.close()


def redis_url() -> str:
    return str(settings.REDIS_URL)


def uses_redis() -> bool:
    return bool(redis_url() and settings.BROKER_IS_REDIS)


def make_limiter(limits: Limits, scope: str) -> LocalLimiter | RedisLimiter:
    if uses_redis():
        return RedisLimiter(limits, scope, redis_url())
    return LocalLimiter(limits, scope)


# Slices of one run in one worker process share one limiter (and so one Redis poller and one local cap):
# (event loop, scope, limits) -> [limiter, slices using it]. Touched only from that event loop.
_SHARED: dict[tuple[int, str, Limits], list[Any]] = {}


def shared_limiter(limits: Limits, scope: str) -> LocalLimiter | RedisLimiter:
    """The run's limiter for the running event loop; pair every call with `shared_limiter_done`."""
    key = (id(asyncio.get_running_loop()), scope, limits)
    entry = _SHARED.get(key)
    if entry is None:
        entry = _SHARED[key] = [make_limiter(limits, scope), 0]
    entry[1] += 1
    return entry[0]  # type: ignore[no-any-return]


async def shared_limiter_done(limiter: Limiter) -> None:
    for key, entry in list(_SHARED.items()):
        if entry[0] is limiter:
            entry[1] -= 1
            if entry[1] <= 0:
                del _SHARED[key]
                await limiter.close()
            return
    await limiter.close()


def clear_stop(scope: str) -> None:
    """A run that starts again (retry failed) may send calls again."""
    _LOCAL_STOPPED.discard(scope)
    if uses_redis():
        import redis  # noqa: PLC0415 - ~0.25 s, and only a Redis broker uses it

        client = redis.Redis.from_url(redis_url())
        try:
            client.delete(f"evalsite:judge:{scope}:stop")
        finally:
            client.close()

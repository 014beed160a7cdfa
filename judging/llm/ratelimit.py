"""Per-run limits (max_concurrency, rpm, tpm) that hold across every worker of the run.

A call takes a concurrency slot (`acquire`), then passes the rpm and tpm windows at the moment its request is sent
(`admit`, called from the HTTP transport, see `sending`), and gives both back with the tokens the provider billed
(`release`). Windows count requests as the provider's log shows them: from sending, not from the slot.

With a Redis broker the counters live in Redis and are changed by Lua scripts, so the check and
the update are one atomic step whichever machine runs them, and Redis's own clock is used. Slots
are leases with an expiry: a worker killed mid-call frees its slot when the lease runs out.
On the embedded (SQLAlchemy) broker there is no shared server, so limits are process-local.

Why one module of this size: the local and the Redis limiter implement one interface with the same meaning, and the
Redis outage handling (waiting, the background give-back) belongs to the Redis one; side by side, a reader can check
that both grant and return slots the same way.
"""

from __future__ import annotations

import asyncio
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
# How long after its admission a request may still be on its way to the provider. A request is counted in the rpm
# and tpm windows from its admission until this much later (or until its response is back, if that is sooner), so
# that a window of the provider's own log never holds more than the limit although its clock sees each request a
# little after ours.
SEND_MARGIN_S = 1.0
# Completion tokens reserved for a request that sets no max_tokens.
DEFAULT_COMPLETION_TOKENS = 512


@dataclass(frozen=True)
class Limits:
    max_concurrency: int = 32
    rpm: int | None = None
    tpm: int | None = None
    slot_ttl_s: float = 90.0
    window_s: float = WINDOW_S
    send_margin_s: float = SEND_MARGIN_S

    @property
    def paced(self) -> bool:
        """Whether requests pass the rpm/tpm windows at all (else admission costs nothing)."""
        return bool(self.rpm or self.tpm)


@dataclass
class Lease:
    lease_id: str
    tokens: int
    admitted: bool = False


class Limiter(Protocol):
    """A run's limits. `acquire` takes a concurrency slot; `admit` passes the rpm and tpm windows at the moment the
    request is sent, waiting asynchronously; `release` gives the slot back and settles the windows with the tokens
    the provider counted."""

    limits: Limits

    async def acquire(self, tokens: int, should_stop: Any = None) -> Lease | None: ...

    async def admit(self, lease: Lease, should_stop: Any = None) -> bool: ...

    async def release(self, lease: Lease, actual_tokens: int | None = None) -> None: ...

    async def stop_all(self) -> None: ...

    async def close(self) -> None: ...


def _pause(wait: float) -> float:
    # Waiters of one window wake spread out rather than all at once; short steps keep a stopped run responsive.
    return min(max(wait, 0.005), 0.5) * (1.0 + 0.2 * random.random())


_LOCAL_STOPPED: set[str] = set()


class LocalLimiter:
    """Process-local limits for the embedded broker (one machine, usually one worker)."""

    def __init__(self, limits: Limits, scope: str = "") -> None:
        self.limits = limits
        self.scope = scope
        self._slots = asyncio.Semaphore(max(1, limits.max_concurrency))
        # lease id -> [counted until (monotonic, before the window), tokens]: the admitted requests of a window.
        self._sent: dict[str, list[float]] = {}

    def _stopped(self, should_stop: Any) -> bool:
        return bool((should_stop is not None and should_stop()) or (self.scope and self.scope in _LOCAL_STOPPED))

    def _window_wait(self, tokens: int, now: float) -> float:
        window = self.limits.window_s
        for lease_id in [k for k, (until, _) in self._sent.items() if until <= now - window]:
            del self._sent[lease_id]
        if not self._sent:
            return 0.0
        oldest = min(until for until, _ in self._sent.values())
        wait = 0.0
        if self.limits.rpm and len(self._sent) >= self.limits.rpm:
            wait = oldest + window - now
        if self.limits.tpm and sum(t for _, t in self._sent.values()) + tokens > self.limits.tpm:
            wait = max(wait, oldest + window - now)
        return wait

    async def acquire(self, tokens: int, should_stop: Any = None) -> Lease | None:
        tokens = min(tokens, self.limits.tpm) if self.limits.tpm else tokens
        await self._slots.acquire()
        if self._stopped(should_stop):
            self._slots.release()
            return None
        return Lease(uuid.uuid4().hex, tokens)

    async def admit(self, lease: Lease, should_stop: Any = None) -> bool:
        if not self.limits.paced:
            lease.admitted = True
            return not self._stopped(should_stop)
        while True:
            if self._stopped(should_stop):
                return False
            # No await between the check and the record: on one event loop this is one atomic step.
            now = time.monotonic()
            wait = self._window_wait(lease.tokens, now)
            if wait <= 0:
                self._sent[lease.lease_id] = [now + self.limits.send_margin_s, float(lease.tokens)]
                lease.admitted = True
                return True
            await asyncio.sleep(_pause(wait))

    async def release(self, lease: Lease, actual_tokens: int | None = None) -> None:
        entry = self._sent.get(lease.lease_id) if lease.admitted else None
        if entry is not None:
            # The response is back, so the provider has logged the request by now.
            entry[0] = min(entry[0], time.monotonic())
            if actual_tokens is not None:
                entry[1] = float(actual_tokens)
        self._slots.release()

    async def stop_all(self) -> None:
        if self.scope:
            _LOCAL_STOPPED.add(self.scope)

    async def close(self) -> None:
        return None


# Every worker reads the windows on the Redis server's clock, not its own.
_SERVER_NOW_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
"""


def _unless_stopped_lua(stop_flag_key: int) -> str:
    """The opening of a script that asks for room: {-1, '0'} at once when the run's stop flag (KEYS[stop_flag_key])
    is set, else `now` on the server's clock."""
    return (
        f"""
if redis.call('EXISTS', KEYS[{stop_flag_key}]) == 1 then
  return {{-1, '0'}}
end"""
        + _SERVER_NOW_LUA
    )


# KEYS: inflight zset, stop flag
# ARGV: max_concurrency, lease id, slot ttl seconds
# Returns {granted (1 / 0 / -1 = the run was stopped), wait seconds as string}
_ACQUIRE_LUA = (
    _unless_stopped_lua(2)
    + """local ttl = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then
  return {0, '0.02'}
end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[2])
redis.call('EXPIRE', KEYS[1], math.ceil(ttl) + 120)
return {1, '0'}
"""
)

# The rpm and tpm windows, passed at the moment of sending. Entries are scored with the time until which they count
# (admission + send margin, lowered to the response's arrival by the release); members of the tpm set end in
# ':<tokens>'.
# A request waiting here holds its concurrency slot, whose lease is renewed at each ask so it cannot run out meanwhile.
# KEYS: rpm zset, tpm zset, stop flag, inflight zset
# ARGV: rpm (0 = none), tpm (0 = none), lease id, tokens, window seconds, send margin seconds, slot ttl seconds
# Returns {admitted (1 / 0 / -1 = the run was stopped), wait seconds as string}
_ADMIT_LUA = (
    _unless_stopped_lua(3)
    + """redis.call('ZADD', KEYS[4], 'XX', now + tonumber(ARGV[7]), ARGV[3])
local rpm = tonumber(ARGV[1])
local tpm = tonumber(ARGV[2])
local id = ARGV[3]
local tokens = tonumber(ARGV[4])
local window = tonumber(ARGV[5])
local margin = tonumber(ARGV[6])
local keep = math.ceil(window + margin) + 120
local wait = 0
if rpm > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
  if redis.call('ZCARD', KEYS[1]) >= rpm then
    local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
    wait = math.max(wait, tonumber(oldest[2]) + window - now)
  end
end
if tpm > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window)
  local entries = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
  local used = 0
  for i = 1, #entries, 2 do
    local n = string.match(entries[i], ':(%d+)$')
    used = used + tonumber(n or '0')
  end
  if used + tokens > tpm and #entries > 0 then
    wait = math.max(wait, tonumber(entries[2]) + window - now)
  end
end
if wait > 0 then
  return {0, tostring(wait)}
end
if rpm > 0 then
  redis.call('ZADD', KEYS[1], now + margin, id)
  redis.call('EXPIRE', KEYS[1], keep)
end
if tpm > 0 then
  redis.call('ZADD', KEYS[2], now + margin, id .. ':' .. tokens)
  redis.call('EXPIRE', KEYS[2], keep)
end
return {1, '0'}
"""
)

# KEYS: inflight zset, rpm zset, tpm zset
# ARGV: lease id, reserved tokens, actual tokens (-1 = unchanged), admitted (1 / 0)
_RELEASE_LUA = (
    """
redis.call('ZREM', KEYS[1], ARGV[1])
if ARGV[4] ~= '1' then
  return 1
end"""
    + _SERVER_NOW_LUA
    + """local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
if score and tonumber(score) > now then
  redis.call('ZADD', KEYS[2], now, ARGV[1])
end
local old = ARGV[1] .. ':' .. ARGV[2]
score = redis.call('ZSCORE', KEYS[3], old)
if score then
  local actual = tonumber(ARGV[3])
  redis.call('ZREM', KEYS[3], old)
  local member = old
  if actual >= 0 then
    member = ARGV[1] .. ':' .. ARGV[3]
  end
  redis.call('ZADD', KEYS[3], math.min(tonumber(score), now), member)
end
return 1
"""
)


class RedisLimiter:
    """Limits shared by every worker of one run, through Redis."""

    def __init__(self, limits: Limits, scope: str, url: str) -> None:
        import redis.asyncio as aioredis  # noqa: PLC0415 - ~0.3 s, and only a Redis broker uses it

        self.limits = limits
        self.keys = [f"evalsite:judge:{scope}:{part}" for part in ("inflight", "rpm", "tpm", "stop")]
        # Timeouts, so a Redis that vanished without closing its connections is noticed and retried like one that did.
        self.client = aioredis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=10)
        self._acquire = self.client.register_script(_ACQUIRE_LUA)
        self._admit = self.client.register_script(_ADMIT_LUA)
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
                                keys=[self.keys[0], self.keys[3]],
                                args=[self.limits.max_concurrency, lease.lease_id, self.limits.slot_ttl_s],
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

    async def admit(self, lease: Lease, should_stop: Any = None) -> bool:
        if not self.limits.paced:
            lease.admitted = True
            return not (should_stop is not None and should_stop())
        # Each waiting request asks again when the window should have room: the others of the process (other runs,
        # or this run's calls already admitted) go on meanwhile.
        while True:
            if should_stop is not None and should_stop():
                return False
            try:
                admitted, wait = await redis_retrying(
                    functools.partial(
                        self._admit,
                        keys=[self.keys[1], self.keys[2], self.keys[3], self.keys[0]],
                        args=[
                            self.limits.rpm or 0,
                            self.limits.tpm or 0,
                            lease.lease_id,
                            lease.tokens,
                            self.limits.window_s,
                            self.limits.send_margin_s,
                            self.limits.slot_ttl_s,
                        ],
                    ),
                    should_stop=should_stop,
                )
            except redis_down_errors():
                return False
            if int(admitted) == 1:
                lease.admitted = True
                return True
            if int(admitted) == -1:
                return False
            await asyncio.sleep(min(_pause(float(wait)), self.limits.slot_ttl_s / 3))

    async def release(self, lease: Lease, actual_tokens: int | None = None) -> None:
        give_back = functools.partial(
            self._release,
            keys=[self.keys[0], self.keys[1], self.keys[2]],
            args=[
                lease.lease_id,
                lease.tokens,
                -1 if actual_tokens is None else int(actual_tokens),
                1 if lease.admitted and self.limits.paced else 0,
            ],
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

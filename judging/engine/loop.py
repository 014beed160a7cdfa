"""The provider calls' side of a slice: one asyncio loop per worker process, in its own thread, and each slice's
gateway and limiter living on it; the slice's own thread submits calls and reads their futures."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future

from judging.llm.calls import CallResult, CallSpec
from judging.llm.gateway import Gateway
from judging.llm.ratelimit import Limits, shared_limiter, shared_limiter_done
from judging.methods.judge_settings import JudgeSettings

log = logging.getLogger(__name__)

_LOOP_LOCK = threading.Lock()
_LOOP: tuple[int, asyncio.AbstractEventLoop] | None = None


def shared_loop() -> asyncio.AbstractEventLoop:
    """One asyncio loop per worker process, in its own thread, shared by every slice.

    litellm keeps process-global async state (its logging worker) bound to one loop, so slices
    running side by side in a threaded worker must not each bring their own loop."""
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is not None and _LOOP[0] == os.getpid() and _LOOP[1].is_running():
            return _LOOP[1]
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        loop.call_soon(ready.set)
        threading.Thread(target=loop.run_forever, name="judge-calls", daemon=True).start()
        ready.wait(10)
        _LOOP = (os.getpid(), loop)
        return loop


class LoopThread:
    """A slice's gateway and limiter, living on the process's shared loop."""

    def __init__(self, cfg: JudgeSettings, scope: str, stop: threading.Event) -> None:
        self.loop = shared_loop()
        self.limits = Limits(
            max_concurrency=cfg.max_concurrency,
            rpm=cfg.rpm,
            tpm=cfg.tpm,
            slot_ttl_s=cfg.timeout_s + 30.0,
        )
        self.scope = scope
        self.stop = stop
        self.gateway: Gateway | None = None

    def start(self) -> None:
        self.gateway = asyncio.run_coroutine_threadsafe(self._make(), self.loop).result(30)

    async def _make(self) -> Gateway:
        return Gateway(limiter=shared_limiter(self.limits, self.scope), should_stop=self.stop.is_set)

    def submit(self, spec: CallSpec, on_handed_over: Callable[[], None]) -> Future[CallResult]:
        assert self.gateway is not None
        return asyncio.run_coroutine_threadsafe(self.gateway.call(spec, on_handed_over), self.loop)

    def close(self) -> None:
        async def shutdown() -> None:
            if self.gateway is not None:
                await self.gateway.close()
                await shared_limiter_done(self.gateway.limiter)

        asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(30)


def result_of(future: Future[CallResult]) -> CallResult:
    try:
        return future.result()
    except Exception as exc:
        log.exception("gateway call crashed")
        return CallResult(error_kind="internal", error=f"{type(exc).__name__}: {exc}")

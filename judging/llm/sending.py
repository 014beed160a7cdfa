"""The moment a provider request is sent: where it passes the run's rpm and tpm windows, and where its time limit
starts.

The gateway sets a `SendGate` for each attempt; the HTTP transport of the gateway's client passes it right before the
request goes onto the connection, after litellm and the SDK have built it. Counting there, not when the concurrency
slot is granted, keeps a window of the provider's own log within the limit however long the request took to build.
The transport that passes the gate is the egress client's (`egress.GatedTransport`).

The same gate also reports the moment the request's bytes are handed to the socket (`hand_over`): a caller that keeps a
record of what was really sent (the executor, for calls whose answers a killed worker never received) learns of each
attempt's request exactly once, and never of one that failed before it went out (a refused connection, a stop).
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable

from judging.llm.calls import CallResult
from judging.llm.ratelimit import Lease, Limiter


class SendStopped(Exception):
    """The run was stopped while this request waited for the rpm or tpm window: it was never sent."""


class SendGate:
    """One attempt's passage through the windows; the transport passes it once, right before sending."""

    def __init__(
        self,
        limiter: Limiter,
        lease: Lease,
        should_stop: Callable[[], bool],
        on_wait: Callable[[], None] = lambda: None,
        on_sent: Callable[[], None] = lambda: None,
        on_handed_over: Callable[[], None] = lambda: None,
    ) -> None:
        self.limiter = limiter
        self.lease = lease
        self.should_stop = should_stop
        self.on_wait = on_wait
        self.on_sent = on_sent
        self.on_handed_over = on_handed_over
        self.handed_over = False
        self.waited_s = 0.0
        self.sent_at: float | None = None
        self.stopped = False

    async def pass_through(self) -> None:
        if self.sent_at is not None:
            return
        self.on_wait()
        started = time.monotonic()
        admitted = await self.limiter.admit(self.lease, self.should_stop)
        now = time.monotonic()
        self.waited_s = now - started
        if not admitted:
            self.stopped = True
            raise SendStopped("the run was stopped before this request was sent")
        self.sent_at = now
        self.on_sent()

    def hand_over(self) -> None:
        """The request is being written to the connection; called from the event loop, so `on_handed_over` must not
        block."""
        if self.handed_over or self.sent_at is None:
            return
        self.handed_over = True
        self.on_handed_over()


CURRENT_GATE: contextvars.ContextVar[SendGate | None] = contextvars.ContextVar("evalsite_send_gate", default=None)


def time_attempt(result: CallResult, gate: SendGate, started: float) -> None:
    """Latency counts from the moment the request was sent (building it and the first connection's setup aside);
    the wait for the rpm/tpm windows goes to the queue wait."""
    now = time.monotonic()
    result.queue_wait_s += gate.waited_s
    result.latency_s += now - (gate.sent_at if gate.sent_at is not None else started + gate.waited_s)

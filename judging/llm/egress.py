"""The HTTP client that judge requests to OpenAI-compatible endpoints go through: redirects off, and the
address guard applied to the real target of every request right before its connection is made.

Kept apart from `netguard` because httpx costs about 45 ms to import, which every process would pay at start-up
through the config checks; only a worker that calls a provider needs it.
"""

from __future__ import annotations

import httpx

from judging.llm.netguard import check_host


class GuardedTransport(httpx.AsyncBaseTransport):
    """Checks the real target of every request right before the connection is made."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        port = request.url.port or (443 if request.url.scheme == "https" else 80)
        check_host(request.url.host, port)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def guarded_async_client(
    timeout: float, max_connections: int = 256, inner: httpx.AsyncBaseTransport | None = None
) -> httpx.AsyncClient:
    if inner is None:
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        inner = httpx.AsyncHTTPTransport(limits=limits)
    return httpx.AsyncClient(
        transport=GuardedTransport(inner),
        follow_redirects=False,
        timeout=httpx.Timeout(timeout),
    )

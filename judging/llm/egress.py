"""The HTTP client that every judge request goes through: redirects off, no proxy or credential from the environment,
only the headers a chat request to that provider needs, and the address guard applied to the real target of every
request right before its connection is made.

Kept apart from `netguard` because httpx (about 45 ms to import) and aiohttp would otherwise be paid by every process
at start-up through the config checks; only a worker that calls a provider needs them.
"""

from __future__ import annotations

import ipaddress
import socket

import httpx
from aiohttp import TraceConfig
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from judging.llm.netguard import check_addresses, check_host
from judging.llm.sending import CURRENT_GATE

MAX_CONNECTIONS = 256
# Everything else is dropped: the OpenAI SDK and litellm add headers from the environment (OPENAI_ORG_ID,
# OPENAI_PROJECT_ID, OPENAI_ORGANIZATION, OPENAI_CUSTOM_HEADERS), which would travel to whatever api_base a
# researcher typed. The only credential a request carries is the one header of its provider built from api_key_env.
_SENDABLE_HEADERS = frozenset(
    {
        "host",
        "accept",
        "accept-encoding",
        "connection",
        "content-length",
        "content-type",
        "idempotency-key",
        "transfer-encoding",
        "user-agent",
    }
)
_SENDABLE_PREFIXES = ("x-stainless-",)
# The headers that carry each provider's credential and protocol version. Azure's SDK client would put an Azure AD
# token from the environment into Authorization; Azure requests may carry only the api-key header.
PROVIDER_HEADERS: dict[str, frozenset[str]] = {
    "openai": frozenset({"authorization"}),
    "azure": frozenset({"api-key"}),
    "anthropic": frozenset({"x-api-key", "anthropic-version"}),
    "gemini": frozenset({"x-goog-api-key"}),
    "mistral": frozenset({"authorization"}),
    # SigV4: the signature, its time, and the session token when the key pair is temporary.
    "bedrock": frozenset({"authorization", "x-amz-date", "x-amz-security-token"}),
    # The bearer token evalsite obtained; Gemini's x-goog-api-key, which litellm's Gemini path adds, is dropped.
    "vertex_ai": frozenset({"authorization"}),
    # The service account's token request carries its credential in the form body, never in a header.
    "oauth": frozenset(),
}


def sendable_headers(provider: str) -> frozenset[str]:
    return _SENDABLE_HEADERS | PROVIDER_HEADERS.get(provider, frozenset())


class GuardedTransport(httpx.AsyncBaseTransport):
    """Checks the real target of every request right before the connection is made, and sends only the headers
    its provider's requests need."""

    def __init__(self, inner: httpx.AsyncBaseTransport, provider: str = "openai") -> None:
        self.inner = inner
        self.sendable = sendable_headers(provider)

    def _sendable(self, name: str) -> bool:
        name = name.lower()
        return name in self.sendable or name.startswith(_SENDABLE_PREFIXES)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        port = request.url.port or (443 if request.url.scheme == "https" else 80)
        check_host(request.url.host, port)
        for name in [name for name in request.headers if not self._sendable(name)]:
            del request.headers[name]
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


class GuardedResolver(AbstractResolver):
    """The aiohttp connector's own DNS lookup, checked like the transport's: the connection uses this answer, not
    the one `check_host` saw, and a host that answers differently the second time (DNS rebinding) must not reach an
    internal address."""

    def __init__(self, inner: AbstractResolver | None = None) -> None:
        self.inner = inner or DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self.inner.resolve(host, port, family)
        check_addresses(host.lower(), [ipaddress.ip_address(str(r["host"]).split("%")[0]) for r in results])
        return results

    async def close(self) -> None:
        await self.inner.close()


def pooled_transport(max_connections: int) -> httpx.AsyncHTTPTransport:
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
    return httpx.AsyncHTTPTransport(limits=limits)


class GatedTransport(httpx.AsyncBaseTransport):
    """Passes the attempt's send gate (rpm/tpm, see `sending`) right before the inner transport sends the request,
    and tells the gate when the request's bytes go onto the connection.

    That moment is seen from inside the inner transport: httpcore reports it through the request's `trace`
    extension, and litellm's aiohttp transport through the session's `send_trace_config`. A transport that reports
    neither has certainly sent the request once it answers, so the answer stands in for it."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        gate = CURRENT_GATE.get()
        if gate is None:
            return await self.inner.handle_async_request(request)
        await gate.pass_through()
        earlier_trace = request.extensions.get("trace")

        async def trace(name: str, info: dict[str, object]) -> None:
            if name.endswith(".send_request_body.complete"):
                gate.hand_over()
            if earlier_trace is not None:
                await earlier_trace(name, info)

        request.extensions["trace"] = trace
        response = await self.inner.handle_async_request(request)
        gate.hand_over()
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def send_trace_config() -> TraceConfig:
    """For an aiohttp session behind `GatedTransport`: tells the attempt's gate when its request's body is written
    to the connection (aiohttp signals each chunk right before writing it, in the request's own context)."""

    async def on_chunk_sent(*_: object) -> None:
        gate = CURRENT_GATE.get()
        if gate is not None:
            gate.hand_over()

    config = TraceConfig()
    config.on_request_chunk_sent.append(on_chunk_sent)
    return config


def gated(inner: httpx.AsyncBaseTransport | None, max_connections: int = MAX_CONNECTIONS) -> GatedTransport:
    """`inner`, or httpx's own pooled transport when there is none, behind the send gate."""
    return GatedTransport(inner if inner is not None else pooled_transport(max_connections))


def guarded_async_client(
    timeout: float,
    max_connections: int = MAX_CONNECTIONS,
    inner: httpx.AsyncBaseTransport | None = None,
    provider: str = "openai",
) -> httpx.AsyncClient:
    if inner is None:
        inner = pooled_transport(max_connections)
    # No setting from the environment: a proxy taken from HTTP(S)_PROXY/ALL_PROXY would receive the key and sit
    # outside the address check. httpx skips them already when given a transport; this keeps it so if that changes.
    return httpx.AsyncClient(
        transport=GuardedTransport(inner, provider),
        follow_redirects=False,
        trust_env=False,
        timeout=httpx.Timeout(timeout),
    )

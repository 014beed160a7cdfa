"""The LLM gateway: the only module that imports litellm.

One async call = limits (a concurrency slot per attempt, and the rpm/tpm windows passed at the moment the request is
sent, see `sending`), the host check, litellm, and a classification of failures. Temporary failures (timeouts,
connection errors, 429, 5xx) are retried with exponential backoff, full jitter and the provider's Retry-After;
permanent ones (400, 401/403, 404, context length, refused host, redirects) fail at once. The slot is released while
waiting between attempts so a backing-off call never blocks others.

Egress: only the providers in `calls.SUPPORTED_PROVIDERS` are called, each through our own OpenAI client on the
guarded HTTP client of `egress` (redirects off, every connection's address checked, no proxy or header from the
environment), with an explicit base URL so neither the SDK nor litellm can pick one from the environment. Any
other model is refused before a connection is made.

Keys: only the environment variable named by the config is ever read, and it is always passed
explicitly (a placeholder when none is named), so neither litellm nor the SDK falls back to some other key from
the environment (e.g. sending OPENAI_API_KEY to an api_base a researcher typed in). A key goes to a custom
api_base only when the operator's JUDGE_API_KEY_HOSTS binds that variable to that origin (scheme, host and port).
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import asyncio
import email.utils
import functools
import json
import logging
import random
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

from judging.llm import netguard
from judging.llm.calls import TEMPORARY, CallResult, CallSpec, provider_problem
from judging.llm.ratelimit import DEFAULT_COMPLETION_TOKENS, Lease, Limiter, Limits, LocalLimiter
from judging.llm.sending import CURRENT_GATE, SendGate


@functools.cache
def _litellm() -> Any:
    """litellm, imported and configured on the first call that needs it.

    Importing litellm takes about 4.3 s on the 2-core development machine (python -X importtime); imported with
    this module it made every management command, web process and worker pay that at django.setup(), including
    the many that never call a provider."""
    import litellm  # noqa: PLC0415 -- start-up cost, see the docstring

    litellm.telemetry = False
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm"):
        logging.getLogger(name).setLevel(logging.WARNING)
    litellm.suppress_debug_info = True
    litellm.drop_params = True  # e.g. logprobs on a provider without them: dropped, and we fall back visibly
    # Its aiohttp transport otherwise looks up HTTP(S)_PROXY per request, and a proxy would receive the key.
    litellm.aiohttp_trust_env = False
    litellm.disable_aiohttp_trust_env = True
    return litellm


NO_KEY = "sk-not-configured"
# Well-known provider hosts each standard key variable may be sent to without any operator setting.
_DEFAULT_KEY_HOSTS: dict[str, tuple[str, ...]] = {
    "OPENAI_API_KEY": ("api.openai.com",),
    "ANTHROPIC_API_KEY": ("api.anthropic.com",),
    "GEMINI_API_KEY": ("generativelanguage.googleapis.com",),
    "MISTRAL_API_KEY": ("api.mistral.ai",),
    "GROQ_API_KEY": ("api.groq.com",),
    "DEEPSEEK_API_KEY": ("api.deepseek.com",),
}


class KeyNotAllowed(ValueError):
    pass


Origin = tuple[str, str, int]


def origin_of(url: str) -> Origin | None:
    """(scheme, host, port) of a URL, or of a binding entry: `host` and `host:port` mean https, since a key bound
    by hostname alone must not travel in clear text or to another service on the same machine."""
    text = url.strip()
    try:
        parts = urlsplit(text if "://" in text else f"https://{text}")
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port or (443 if scheme == "https" else 80)


def _origin_text(origin: Origin) -> str:
    scheme, host, port = origin
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}" + ("" if port == (443 if scheme == "https" else 80) else f":{port}")


def _key_origins() -> dict[str, set[Origin]]:
    bindings: dict[str, list[str]] = {name: list(values) for name, values in _DEFAULT_KEY_HOSTS.items()}
    for name, values in dict(settings.JUDGE_API_KEY_HOSTS).items():
        if isinstance(values, str):
            values = [v for v in values.replace("|", " ").replace(",", " ").split() if v]
        bindings.setdefault(str(name), []).extend(str(v) for v in values)
    return {name: {o for o in map(origin_of, values) if o is not None} for name, values in bindings.items()}


# Where a supported provider's requests go when a config gives no api_base. Always passed explicitly: left unset,
# the SDK and litellm would take OPENAI_BASE_URL or OPENAI_API_BASE from the environment instead.
DEFAULT_API_BASES = {"openai": "https://api.openai.com/v1"}
# litellm reads this itself and then bypasses the client we hand it.
_CLIENT_BYPASS_ENV = "EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER"


class ProviderNotSupported(ValueError):
    pass


def _provider_prefix(model: str) -> str:
    return model.partition("/")[0]


def api_base_for(model: str, api_base: str | None) -> str | None:
    return api_base or DEFAULT_API_BASES.get(_provider_prefix(model))


def route_problem(model: str) -> str | None:
    """Why a call to this model would not go through our guarded client, or None.

    The model string's own prefix must be supported, litellm must agree on the provider (it alone picks the code
    path), and litellm must not send the model through its Responses API bridge, which uses its own client."""
    problem = provider_problem(model)
    if problem:
        return problem
    if provider_of(model) not in DEFAULT_API_BASES:
        return f"model {model!r} is not routed to a supported provider"
    if _model_info(model).get("mode") == "responses":
        return f"model {model!r} would use the Responses API, which is not supported; name a chat model"
    if os.environ.get(_CLIENT_BYPASS_ENV, "").strip().lower() not in ("", "0", "false", "no", "off"):
        return f"{_CLIENT_BYPASS_ENV} is set, which makes litellm bypass the guarded HTTP client"
    return None


def check_key_destination(api_key_env: str | None, api_base: str | None, model: str | None = None) -> None:
    """A key goes only to its own provider: its default origin, or an origin the operator bound to it, matched
    on scheme, host and port.

    Without api_base the destination is the model's provider endpoint, so ANTHROPIC_API_KEY cannot ride along to
    api.openai.com, nor an unrelated secret such as SECRET_KEY to any provider."""
    if not api_key_env or (not api_base and not model):
        return
    base = api_base_for(model, api_base) if model else api_base
    origin = origin_of(base) if base else None
    if origin is None or origin not in _key_origins().get(api_key_env, set()):
        shown = _origin_text(origin) if origin else repr(base)
        raise KeyNotAllowed(
            f"the key in {api_key_env} may not be sent to {shown}; an operator can allow it with "
            f"JUDGE_API_KEY_HOSTS ({api_key_env}={shown})"
        )


def api_key_for(api_key_env: str | None) -> str:
    """The named variable's value, else a placeholder: never None, which the SDK and litellm would replace with
    OPENAI_API_KEY from the environment."""
    if api_key_env:
        return os.environ.get(api_key_env, "") or NO_KEY
    return NO_KEY


@functools.lru_cache(maxsize=256)
def provider_of(model: str) -> str:
    try:
        return str(_litellm().get_llm_provider(model)[1])
    except Exception:
        return ""


@functools.lru_cache(maxsize=256)
def _model_info(model: str) -> dict[str, Any]:
    try:
        return dict(_litellm().get_model_info(model))
    except Exception:
        return {}


def model_known(model: str) -> bool:
    """Whether litellm has prices for this model (else costs are unknown, never 0)."""
    info = _model_info(model)
    return bool(info.get("input_cost_per_token") is not None or info.get("output_cost_per_token") is not None)


def price_estimate(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    if not model_known(model):
        return None
    try:
        prompt_cost, completion_cost = _litellm().cost_per_token(
            model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
        )
    except Exception:
        return None
    return float(prompt_cost + completion_cost)


def count_tokens(model: str, messages: list[dict[str, str]]) -> int:
    """The prompt's tokens as the model's provider counts them, per litellm's tokenizer for the model."""
    # litellm picks the tokenizer by the bare model name: with its provider prefix a gpt-4o model was counted with
    # an older encoding, half as much again on Japanese.
    name = model.partition("/")[2] if _provider_prefix(model) in DEFAULT_API_BASES else model
    try:
        return int(_litellm().token_counter(model=name or model, messages=messages))
    except Exception:
        # Never fewer than the provider counts: no tokenizer gives more tokens than characters plus framing.
        return sum(len(m.get("content") or "") + 4 for m in messages) + 3


def reserved_tokens(spec: CallSpec) -> int:
    """What a request may use of a tpm window before its usage is known: the prompt and the most it may generate."""
    return count_tokens(spec.model, spec.messages) + (spec.max_tokens or DEFAULT_COMPLETION_TOKENS)


def _response_cost(response: Any, model: str) -> float | None:
    if not model_known(model):
        return None
    # litellm has already priced the response while logging it; pricing it again costs CPU.
    hidden = getattr(response, "_hidden_params", None) or {}
    if isinstance(hidden.get("response_cost"), int | float):
        return float(hidden["response_cost"])
    try:
        return float(_litellm().completion_cost(completion_response=response, model=model))
    except Exception:
        return None


def _retry_after(exc: BaseException) -> float | None:
    headers: Any = None
    response = getattr(exc, "response", None)
    if response is not None:
        headers = getattr(response, "headers", None)
    candidates = [headers, getattr(exc, "litellm_response_headers", None), getattr(exc, "headers", None)]
    for source in candidates:
        if not source:
            continue
        try:
            value = source.get("retry-after") or source.get("Retry-After")
        except Exception:
            value = None
        if value is None:
            continue
        value = str(value).strip()
        try:
            return max(0.0, float(value))
        except ValueError:
            parsed = email.utils.parsedate_to_datetime(value) if value else None
            if parsed is not None:
                return max(0.0, parsed.timestamp() - time.time())
    return None


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 10:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def classify(exc: BaseException) -> str:
    chain = _chain(exc)
    litellm = _litellm()
    if any(isinstance(e, netguard.HostUnresolvable) for e in chain):
        return "connection"
    if any(isinstance(e, netguard.ApiBaseRefused) for e in chain):
        return "refused_host"
    if any(isinstance(e, KeyNotAllowed) for e in chain):
        return "key_not_allowed"
    if any(isinstance(e, ProviderNotSupported) for e in chain):
        return "unsupported_provider"
    if isinstance(exc, litellm.ContextWindowExceededError):
        return "context_length"
    if isinstance(exc, litellm.Timeout) or any(isinstance(e, asyncio.TimeoutError | TimeoutError) for e in chain):
        return "timeout"
    if isinstance(exc, litellm.RateLimitError):
        return "rate_limit"
    if isinstance(exc, litellm.AuthenticationError | litellm.PermissionDeniedError):
        return "auth"
    if isinstance(exc, litellm.NotFoundError):
        return "not_found"
    if isinstance(exc, litellm.BadRequestError | litellm.UnprocessableEntityError):
        text = str(exc).lower()
        if "context length" in text or "context_length" in text or "maximum context" in text:
            return "context_length"
        return "bad_request"
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        if 300 <= status < 400:
            return "redirect"
        if status == 408:
            return "timeout"
        if status == 429:
            return "rate_limit"
        if status >= 500 and not isinstance(exc, litellm.APIConnectionError):
            return "server"
        if 400 <= status < 500:
            return "bad_request"
    if isinstance(exc, litellm.APIConnectionError):
        text = str(exc).lower()
        if "expecting value" in text or ("json" in text and "decode" in text):
            return "malformed"
        return "connection"
    if isinstance(exc, ValueError | json.JSONDecodeError):
        return "malformed"
    return "connection"


def _extract_logprobs(response: Any) -> list[dict[str, Any]] | None:
    try:
        logprobs = response.choices[0].logprobs
    except (AttributeError, IndexError):
        return None
    if logprobs is None:
        return None
    content = getattr(logprobs, "content", None)
    if content is None and isinstance(logprobs, dict):
        content = logprobs.get("content")
    if not content:
        return None
    tokens = []
    for entry in content:
        item = entry if isinstance(entry, dict) else entry.model_dump()
        tokens.append(
            {
                "token": item.get("token"),
                "logprob": item.get("logprob"),
                # The exact bytes: a token string cannot show half of a multi-byte character.
                "bytes": item.get("bytes"),
                "top_logprobs": [
                    {"token": t.get("token"), "logprob": t.get("logprob")}
                    for t in (item.get("top_logprobs") or [])
                    if isinstance(t, dict)
                ]
                or [
                    {"token": getattr(t, "token", None), "logprob": getattr(t, "logprob", None)}
                    for t in (item.get("top_logprobs") or [])
                    if not isinstance(t, dict)
                ],
            }
        )
    return tokens


def _fast_transport(max_connections: int, resolver: Callable[[], Any]) -> Any:
    """litellm's aiohttp transport on a session that reads nothing from the environment (its own factory turns
    trust_env on when AIOHTTP_TRUST_ENV is set, and then proxies and ~/.netrc credentials apply) and resolves
    hosts through `resolver`."""
    try:
        _litellm()  # configured before any of its submodules is used
        from aiohttp import ClientSession, DummyCookieJar, TCPConnector  # noqa: PLC0415 -- loaded with litellm
        from litellm.constants import AIOHTTP_KEEPALIVE_TIMEOUT  # noqa: PLC0415 -- litellm: see _litellm
        from litellm.llms.custom_httpx.aiohttp_transport import (  # noqa: PLC0415 -- litellm: see _litellm
            LiteLLMAiohttpTransport,
        )
    except Exception:  # an older or newer litellm without it: plain httpx still works
        return None

    def session() -> Any:
        connector = TCPConnector(
            limit=max_connections, keepalive_timeout=AIOHTTP_KEEPALIVE_TIMEOUT, resolver=resolver()
        )
        return ClientSession(connector=connector, cookie_jar=DummyCookieJar(), trust_env=False)

    return LiteLLMAiohttpTransport(client=session, session_factory=session)


def backoff_delay(attempt: int, retry_after: float | None, rng: random.Random) -> float:
    base = float(settings.JUDGE_RETRY_BASE_S)
    cap = float(settings.JUDGE_RETRY_CAP_S)
    # Full jitter spreads the retries of many concurrent calls instead of synchronising them.
    delay = rng.uniform(0, min(cap, base * (2 ** (attempt - 1))))
    if retry_after is not None:
        delay = max(delay, min(retry_after, float(settings.JUDGE_RETRY_AFTER_CAP_S)))
    return delay


class Gateway:
    """Makes provider calls for one event loop. Create inside the loop, close when done."""

    def __init__(
        self,
        limiter: Limiter | None = None,
        should_stop: Callable[[], bool] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        # Loaded here, not inside the first call, whose timeout would otherwise include the import.
        _litellm()
        self.limiter: Limiter = limiter or LocalLimiter(Limits(max_concurrency=32))
        self.should_stop = should_stop or (lambda: False)
        self.rng = rng or random.Random()
        self._clients: dict[tuple[str, float, str], Any] = {}
        self._http: list[Any] = []

    def _client_for(self, spec: CallSpec, api_base: str) -> Any:
        """Our own OpenAI client on the guarded HTTP client: no SDK retries, no redirects, no proxies."""
        api_key = api_key_for(spec.api_key_env)
        key = (api_base, spec.timeout_s, api_key)
        client = self._clients.get(key)
        if client is None:
            from openai import AsyncOpenAI  # noqa: PLC0415 -- ~1.1 s to import; litellm has loaded it by now

            from judging.llm import egress  # noqa: PLC0415 -- httpx, kept out of start-up; litellm has loaded it

            # litellm's aiohttp-based transport costs a third of the CPU per call of httpcore's pool,
            # which rescans every pooled connection per request; redirects stay off either way.
            inner = _fast_transport(egress.MAX_CONNECTIONS, egress.GuardedResolver)
            gated = egress.gated(inner, egress.MAX_CONNECTIONS)
            http = egress.guarded_async_client(spec.timeout_s, inner=gated)
            self._http.append(http)
            client = AsyncOpenAI(
                api_key=api_key,
                base_url=api_base,
                http_client=http,
                max_retries=0,
                timeout=spec.timeout_s,
            )
            self._clients[key] = client
        return client

    async def close(self) -> None:
        for http in self._http:
            await http.aclose()
        self._http.clear()
        self._clients.clear()

    async def _attempt(self, spec: CallSpec) -> Any:
        # Checked again here, not only when the config was saved: a stored config or run snapshot may predate
        # these rules, and litellm's own client must never see a request.
        problem = route_problem(spec.model)
        if problem:
            raise ProviderNotSupported(problem)
        api_base = api_base_for(spec.model, spec.api_base)
        if api_base is None:  # route_problem has vouched for the provider, whose default base is known
            raise ProviderNotSupported(f"no endpoint is known for {spec.model!r}")
        if spec.api_base:
            netguard.validate_api_base(spec.api_base)
        check_key_destination(spec.api_key_env, spec.api_base, spec.model)
        return await _litellm().acompletion(
            model=spec.model,
            messages=spec.messages,
            api_base=api_base,
            api_key=api_key_for(spec.api_key_env),
            client=self._client_for(spec, api_base),
            timeout=spec.timeout_s,
            max_retries=0,
            num_retries=0,
            **spec.params(),
        )

    async def _sent_attempt(self, spec: CallSpec, gate: Any) -> Any:
        """One attempt, its time limit counted from the moment it is sent.

        `timeout_s` bounds the whole exchange, a response that drips in slowly included: the HTTP client's own
        timeout only bounds each read. The checks and connection before sending get a few seconds more; the wait
        for the rpm/tpm windows is not limited."""

        loop = asyncio.get_running_loop()
        async with asyncio.timeout_at(loop.time() + spec.timeout_s + 5) as deadline:
            gate.on_wait = lambda: deadline.reschedule(None)
            gate.on_sent = lambda: deadline.reschedule(loop.time() + spec.timeout_s)
            token = CURRENT_GATE.set(gate)
            try:
                return await self._attempt(spec)
            finally:
                CURRENT_GATE.reset(token)

    async def call(self, spec: CallSpec) -> CallResult:

        result = CallResult()
        max_attempts = max(1, spec.max_retries + 1)
        # Counting a long prompt's tokens costs CPU, so only a tpm limit pays for it.
        tokens = reserved_tokens(spec) if self.limiter.limits.tpm else 0
        while result.attempts < max_attempts:
            if self.should_stop():
                result.stopped = True
                break
            queued = time.monotonic()
            lease: Lease | None = await self.limiter.acquire(tokens, self.should_stop)
            result.queue_wait_s += time.monotonic() - queued
            if lease is None:
                result.stopped = True
                break
            result.attempts += 1
            gate = SendGate(self.limiter, lease, self.should_stop)
            started = time.monotonic()
            try:
                response = await self._sent_attempt(spec, gate)
            except Exception as exc:
                _time_attempt(result, gate, started)
                if gate.stopped:
                    await self.limiter.release(lease, 0)
                    result.attempts -= 1
                    result.stopped = True
                    break
                kind = classify(exc)
                result.errors_seen.append(kind)
                result.error_kind, result.error = kind, _safe_message(exc, spec)
                retry_after = _retry_after(exc)
                await self.limiter.release(lease, 0 if kind in ("rate_limit", "refused_host") else None)
                if kind not in TEMPORARY or result.attempts >= max_attempts:
                    break
                await self._sleep(backoff_delay(result.attempts, retry_after, self.rng))
                continue
            else:
                _time_attempt(result, gate, started)
                _absorb_response(result, response, spec)
                await self.limiter.release(lease, result.prompt_tokens + result.completion_tokens or None)
                break
        return result

    async def _sleep(self, seconds: float) -> None:
        # Sleep in short steps so a cancelled run stops waiting quickly.
        deadline = time.monotonic() + seconds
        while not self.should_stop():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            await asyncio.sleep(min(remaining, 0.25))


def _time_attempt(result: CallResult, gate: Any, started: float) -> None:
    """Latency counts from the moment the request was sent (building it and the first connection's setup aside);
    the wait for the rpm/tpm windows goes to the queue wait."""
    now = time.monotonic()
    result.queue_wait_s += gate.waited_s
    result.latency_s += now - (gate.sent_at if gate.sent_at is not None else started + gate.waited_s)


def _absorb_response(result: CallResult, response: Any, spec: CallSpec) -> None:
    usage = getattr(response, "usage", None)
    result.prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
    result.completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
    try:
        result.content = response.choices[0].message.content or ""
    except (AttributeError, IndexError):
        result.content = ""
    result.cost = _response_cost(response, spec.model)
    result.logprobs = _extract_logprobs(response) if spec.logprobs else None
    result.error_kind, result.error = "", ""


def _safe_message(exc: BaseException, spec: CallSpec) -> str:
    """The error text with any configured key removed (keys never reach storage or logs)."""
    message = f"{type(exc).__name__}: {exc}"[:2000]
    key = os.environ.get(spec.api_key_env or "", "") if spec.api_key_env else ""
    if key and len(key) >= 4:
        message = message.replace(key, "[redacted]")
    return message

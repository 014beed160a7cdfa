"""The LLM gateway: the only module that imports litellm.

One async call = limits (a concurrency slot per attempt, and the rpm/tpm windows passed at the moment the request is
sent, see `sending`), the host check, litellm, and a classification of failures. Temporary failures (timeouts,
connection errors, 429, 5xx) are retried with exponential backoff, full jitter and the provider's Retry-After;
permanent ones (400, 401/403, 404, context length, refused host, redirects) fail at once. The slot is released while
waiting between attempts so a backing-off call never blocks others.

Egress: only the providers in `calls.SUPPORTED_PROVIDERS` are called, each through a client of ours on the guarded
HTTP client of `egress` (redirects off, every connection's address checked, no proxy from the environment, only the
headers that provider's requests need), with an explicit base URL so neither an SDK nor litellm can pick one from the
environment: OpenAI-compatible servers and Azure OpenAI through our own OpenAI SDK client; Anthropic, Gemini and
Mistral through litellm's HTTP handler on that same guarded client; Bedrock's Converse requests built and SigV4-signed
here from the named variables (litellm's Bedrock path completes its credentials from the AWS environment); Vertex AI
through litellm's Gemini path with an OAuth token obtained here by the service account's JWT-bearer grant (litellm's
own path would fetch it with google-auth over an unguarded client). Any other model is refused before a connection
is made.

Keys: only the environment variable named by the config is ever read, always passed explicitly, and only to the
origins `keys` allows (e.g. never OPENAI_API_KEY to an api_base a researcher typed in, nor AZURE_OPENAI_AD_TOKEN
instead of the Azure key).

What handles litellm's classes or exceptions stays here (the provider clients, the classification of failures, the
retry loop, the cost); what does not is beside it: `keys` (where a key may go, the default endpoints), `failures`
(the chain of causes, the answered status, the provider's wait, the backoff) and `wire` (the Converse body, the
Vertex assertion, the log-probabilities of a reply).
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import asyncio
import functools
import json
import logging
import random
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from judging.llm import netguard
from judging.llm.calls import SUPPORTED_PROVIDERS, TEMPORARY, CallResult, CallSpec, provider_problem
from judging.llm.failures import (
    ProviderAnswered,
    answered_kind,
    backoff_delay,
    error_chain,
    guard_kind,
    http_status,
    kind_of_status,
    provider_wait,
    safe_message,
    status_kind,
    transport_error,
)
from judging.llm.keys import (
    NO_KEY,
    KeyNotAllowed,
    ProviderNotSupported,
    api_base_for,
    api_key_for,
    check_key_destination,
    credential_variables,
    provider_prefix,
)
from judging.llm.ratelimit import DEFAULT_COMPLETION_TOKENS, Lease, Limiter, Limits, LocalLimiter
from judging.llm.sending import CURRENT_GATE, SendGate, time_attempt
from judging.llm.vertex import VertexTokens
from judging.llm.wire import bedrock_error, converse_body, extract_logprobs


def load() -> None:
    """Import litellm now: a worker does it at start-up, so that no slice's bounded wait for its gateway includes
    an import that takes tens of seconds on a loaded machine."""
    _litellm()


@functools.cache
def _litellm() -> Any:
    """litellm, imported and configured on the first call that needs it, once per process.

    Importing litellm takes about 4.3 s on the 2-core development machine (python -X importtime); imported with
    this module it made every management command, web process and worker pay that at django.setup(), including
    the many that never call a provider. Configured once: setting a logger's level empties the cache of every
    logger in the process, which done per provider call cost more CPU than the limiter's Redis round trips."""
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


# Providers reached through our OpenAI SDK client; the others through litellm's HTTP handler on the guarded client.
_SDK_PROVIDERS = frozenset({"openai", "azure"})
# litellm reads this itself and then bypasses the client we hand it.
_CLIENT_BYPASS_ENV = "EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER"


def route_problem(model: str) -> str | None:
    """Why a call to this model would not go through our guarded client, or None.

    The model string's own prefix must be supported, litellm must agree on the provider (it alone picks the code
    path), and litellm must not send the model through its Responses API bridge, which uses its own client."""
    problem = provider_problem(model)
    if problem:
        return problem
    if provider_of(model) != provider_prefix(model) or provider_of(model) not in SUPPORTED_PROVIDERS:
        return f"model {model!r} is not routed to a supported provider"
    if _model_info(model).get("mode") == "responses":
        return f"model {model!r} would use the Responses API, which is not supported; name a chat model"
    if os.environ.get(_CLIENT_BYPASS_ENV, "").strip().lower() not in ("", "0", "false", "no", "off"):
        return f"{_CLIENT_BYPASS_ENV} is set, which makes litellm bypass the guarded HTTP client"
    return None


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
    name = model.partition("/")[2] if provider_prefix(model) in ("openai", "azure") else model
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


def classify(exc: BaseException) -> str:
    """The failure kind of a provider call, asked in order: our own guards, an HTTP answer we read ourselves,
    litellm's typed errors, a bare status code, and last a connection or parse failure."""
    chain = error_chain(exc)
    return (
        guard_kind(chain)
        or answered_kind(exc, chain)
        or _litellm_kind(exc, chain)
        or status_kind(exc, connection_error=isinstance(exc, _litellm().APIConnectionError))
        or _connection_kind(exc, chain)
    )


def _litellm_kind(exc: BaseException, chain: list[BaseException]) -> str | None:
    litellm = _litellm()
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
    return None


def _connection_kind(exc: BaseException, chain: list[BaseException]) -> str:
    if isinstance(exc, _litellm().APIConnectionError):
        answered = http_status(chain)
        if answered is not None and (kind := kind_of_status(answered)):
            return kind
        text = str(exc).lower()
        if "expecting value" in text or ("json" in text and "decode" in text):
            return "malformed"
        return "connection"
    if isinstance(exc, ValueError | json.JSONDecodeError):
        return "malformed"
    return "connection"


def _fast_transport(
    max_connections: int, resolver: Callable[[], Any], trace_configs: Callable[[], list[Any]] = list
) -> Any:
    """litellm's aiohttp transport on a session that reads nothing from the environment (its own factory turns
    trust_env on when AIOHTTP_TRUST_ENV is set, and then proxies and ~/.netrc credentials apply), resolves
    hosts through `resolver` and reports its sends to `trace_configs`."""
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
        return ClientSession(
            connector=connector,
            cookie_jar=DummyCookieJar(),
            trust_env=False,
            trace_configs=trace_configs(),
        )

    return LiteLLMAiohttpTransport(client=session, session_factory=session)


@functools.cache
def _key_only_azure_client() -> Any:
    """The Azure OpenAI SDK client, authorised by the key it is given and nothing else.

    Given no Azure AD token, the SDK reads AZURE_OPENAI_AD_TOKEN from the environment and sends it instead of the
    key; a token provider is never configured here either."""
    from openai import AsyncAzureOpenAI  # noqa: PLC0415 -- loaded with litellm

    class KeyOnlyAzureOpenAI(AsyncAzureOpenAI):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self._azure_ad_token = None
            self._azure_ad_token_provider = None

        async def _get_azure_ad_token(self) -> str | None:
            return None

    return KeyOnlyAzureOpenAI


@functools.cache
def _guarded_handler_class() -> Any:
    """litellm's HTTP handler, on guarded clients only.

    litellm builds a fresh client of its own after a dropped connection (with proxies from the environment and
    redirects followed); this one builds another guarded client instead."""
    _litellm()
    from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler  # noqa: PLC0415 -- litellm: see _litellm

    class GuardedHTTPHandler(AsyncHTTPHandler):
        def __init__(self, make_client: Callable[[], Any], timeout: float) -> None:
            self._make_client = make_client
            super().__init__(timeout=timeout, follow_redirects=False)

        def create_client(
            self, timeout: Any, event_hooks: Any, ssl_verify: Any = None, shared_session: Any = None
        ) -> Any:
            return self._make_client()

    return GuardedHTTPHandler


def _converse_reply(spec: CallSpec, payload: dict[str, Any]) -> Any:
    """A Converse reply as litellm's chat response, so that it is read and priced like every other provider's."""
    litellm = _litellm()
    try:
        blocks = payload["output"]["message"]["content"]
        usage = payload.get("usage") or {}
    except (KeyError, TypeError) as exc:
        raise ValueError("the Converse reply has no output message") from exc
    text = "".join(str(block.get("text") or "") for block in blocks if isinstance(block, dict))
    prompt_tokens, completion_tokens = int(usage.get("inputTokens") or 0), int(usage.get("outputTokens") or 0)
    return litellm.ModelResponse(
        choices=[
            litellm.Choices(
                message=litellm.Message(content=text, role="assistant"),
                finish_reason="stop" if payload.get("stopReason") == "end_turn" else str(payload.get("stopReason")),
                index=0,
            )
        ],
        usage=litellm.Usage(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            total_tokens=prompt_tokens + completion_tokens,
        ),
        model=spec.model,
    )


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
        self._clients: dict[tuple[str, str, float, str, str], Any] = {}
        self._vertex_tokens = VertexTokens()
        self._http: list[Any] = []

    def _guarded_http(self, spec: CallSpec) -> Any:
        """A new guarded HTTP client for this provider: its own connection pool behind the send gate, redirects off,
        and only the headers this provider's requests need."""
        from judging.llm import egress  # noqa: PLC0415 -- httpx, kept out of start-up; litellm has loaded it

        # litellm's aiohttp-based transport costs a third of the CPU per call of httpcore's pool,
        # which rescans every pooled connection per request; redirects stay off either way.
        inner = _fast_transport(egress.MAX_CONNECTIONS, egress.GuardedResolver, lambda: [egress.send_trace_config()])
        gated = egress.gated(inner, egress.MAX_CONNECTIONS)
        http = egress.guarded_async_client(spec.timeout_s, inner=gated, provider=provider_prefix(spec.model))
        self._http.append(http)
        return http

    def _client_for(self, spec: CallSpec, api_base: str) -> Any:
        """Our own client on the guarded HTTP client: no SDK retries, no redirects, no proxies, no credential but
        the named one."""
        provider = provider_prefix(spec.model)
        api_key = api_key_for(spec.api_key_env)
        key = (provider, api_base, spec.timeout_s, api_key, spec.api_version or "")
        client = self._clients.get(key)
        if client is not None:
            return client
        if provider == "azure":
            client = _key_only_azure_client()(
                api_key=api_key,
                api_version=spec.api_version,
                azure_endpoint=api_base,
                http_client=self._guarded_http(spec),
                max_retries=0,
                timeout=spec.timeout_s,
            )
        elif provider in _SDK_PROVIDERS:
            from openai import AsyncOpenAI  # noqa: PLC0415 -- ~1.1 s to import; litellm has loaded it by now

            client = AsyncOpenAI(
                api_key=api_key,
                base_url=api_base,
                http_client=self._guarded_http(spec),
                max_retries=0,
                timeout=spec.timeout_s,
            )
        else:
            client = _guarded_handler_class()(lambda: self._guarded_http(spec), spec.timeout_s)
        self._clients[key] = client
        return client

    async def _bedrock_attempt(self, spec: CallSpec, api_base: str) -> Any:
        """One Bedrock Converse request, signed here with botocore's SigV4 from the named variables only.

        litellm's Bedrock path is not used: it completes every AWS parameter it is not given from AWS_* variables
        (a role or web identity then sends it to STS, a profile to ~/.aws, nothing at all to the instance metadata
        service, all outside the guarded transport), and AWS_BEARER_TOKEN_BEDROCK replaces the signature. The
        request body and reply are Converse's own; litellm still prices the reply from its local map."""
        from botocore.auth import SigV4Auth  # noqa: PLC0415 -- botocore costs ~0.3 s to import; Bedrock runs only
        from botocore.awsrequest import AWSRequest  # noqa: PLC0415 -- see above
        from botocore.credentials import Credentials  # noqa: PLC0415 -- see above

        model_id = spec.model.partition("/")[2]
        url = f"{api_base.rstrip('/')}/model/{quote(model_id, safe='')}/converse"
        body = json.dumps(converse_body(spec), ensure_ascii=False).encode()
        access_key = os.environ.get(spec.aws_access_key_id_env or "", "")
        secret_key = os.environ.get(spec.aws_secret_access_key_env or "", "")
        token = os.environ.get(spec.aws_session_token_env, "") if spec.aws_session_token_env else ""
        if not access_key or not secret_key:
            raise KeyNotAllowed(
                f"{spec.aws_access_key_id_env} and {spec.aws_secret_access_key_env} must both hold the AWS key pair"
            )
        signed = AWSRequest(method="POST", url=url, data=body, headers={"Content-Type": "application/json"})
        SigV4Auth(Credentials(access_key, secret_key, token or None), "bedrock", spec.aws_region).add_auth(signed)
        http = self._clients.get(("bedrock", api_base, spec.timeout_s, "", ""))
        if http is None:
            http = self._clients[("bedrock", api_base, spec.timeout_s, "", "")] = self._guarded_http(spec)
        try:
            response = await http.post(url, content=body, headers=dict(signed.headers.items()))
        except Exception as exc:
            raise transport_error(exc) from exc
        if response.status_code >= 300:
            raise ProviderAnswered(response.status_code, bedrock_error(response), response)
        return _converse_reply(spec, response.json())

    async def _vertex_attempt(self, spec: CallSpec, api_base: str) -> Any:
        """One Vertex AI generateContent request with an access token evalsite obtained itself.

        Vertex's generateContent speaks Gemini's format, so litellm's Gemini path builds and reads it, on the
        guarded client, with the publisher's path as its base URL and the token as the only credential header."""
        token = await self._vertex_tokens.token(spec)
        base = (
            f"{api_base.rstrip('/')}/v1/projects/{spec.vertex_project}/locations/{spec.vertex_location}"
            "/publishers/google"
        )
        response = await _litellm().acompletion(
            model="gemini/" + spec.model.partition("/")[2],
            messages=spec.messages,
            api_base=base,
            api_key=NO_KEY,  # a placeholder: unset, litellm would read GEMINI_API_KEY; the header is dropped
            extra_headers={"Authorization": f"Bearer {token}"},
            client=self._client_for(spec, base),
            timeout=spec.timeout_s,
            max_retries=0,
            num_retries=0,
            **spec.params(),
        )
        # Priced as the Vertex model, not as the AI Studio one litellm called.
        getattr(response, "_hidden_params", {}).pop("response_cost", None)
        return response

    async def close(self) -> None:
        for http in self._http:
            await http.aclose()
        self._http.clear()
        self._clients.clear()
        await self._vertex_tokens.close()

    async def _attempt(self, spec: CallSpec) -> Any:
        # Checked again here, not only when the config was saved: a stored config or run snapshot may predate
        # these rules, and litellm's own client must never see a request.
        problem = route_problem(spec.model)
        if problem:
            raise ProviderNotSupported(problem)
        api_base = api_base_for(spec.model, spec.api_base, spec.aws_region, spec.vertex_location)
        if api_base is None:  # route_problem has vouched for the provider, whose default base is known
            raise ProviderNotSupported(f"no endpoint is known for {spec.model!r}")
        if spec.api_base:
            netguard.validate_api_base(spec.api_base)
        for variable in credential_variables(spec):
            check_key_destination(
                variable, spec.api_base, spec.model, region=spec.aws_region, location=spec.vertex_location
            )
        if provider_prefix(spec.model) == "bedrock":
            return await self._bedrock_attempt(spec, api_base)
        if provider_prefix(spec.model) == "vertex_ai":
            return await self._vertex_attempt(spec, api_base)
        provider_args: dict[str, Any] = {}
        if provider_prefix(spec.model) == "azure":
            # Passed although our client carries it too: unset, litellm would read AZURE_API_VERSION.
            provider_args["api_version"] = spec.api_version
        return await _litellm().acompletion(
            model=spec.model,
            messages=spec.messages,
            api_base=api_base,
            api_key=api_key_for(spec.api_key_env),
            client=self._client_for(spec, api_base),
            timeout=spec.timeout_s,
            max_retries=0,
            num_retries=0,
            **provider_args,
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

    async def call(self, spec: CallSpec, on_handed_over: Callable[[], None] | None = None) -> CallResult:
        """`on_handed_over` is called on this loop once for each attempt whose request went onto the connection (see
        `sending.SendGate.hand_over`); it must not block."""

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
            if on_handed_over is not None:
                gate.on_handed_over = on_handed_over
            started = time.monotonic()
            try:
                response = await self._sent_attempt(spec, gate)
            except Exception as exc:
                time_attempt(result, gate, started)
                if gate.stopped:
                    await self.limiter.release(lease, 0)
                    result.attempts -= 1
                    result.stopped = True
                    break
                kind = classify(exc)
                result.errors_seen.append(kind)
                result.error_kind, result.error = kind, safe_message(exc, spec)
                wait = provider_wait(exc)
                await self.limiter.release(lease, 0 if kind in ("rate_limit", "refused_host") else None)
                if kind not in TEMPORARY or result.attempts >= max_attempts:
                    break
                await self._sleep(backoff_delay(result.attempts, wait, self.rng))
                continue
            else:
                time_attempt(result, gate, started)
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


def _absorb_response(result: CallResult, response: Any, spec: CallSpec) -> None:
    usage = getattr(response, "usage", None)
    result.prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
    result.completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
    try:
        result.content = response.choices[0].message.content or ""
    except (AttributeError, IndexError):
        result.content = ""
    result.cost = _response_cost(response, spec.model)
    result.logprobs = extract_logprobs(response) if spec.logprobs else None
    result.provider_model = str(getattr(response, "model", "") or "")[:200]
    result.error_kind, result.error = "", ""

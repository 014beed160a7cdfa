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

Keys: only the environment variable named by the config is ever read, and it is always passed explicitly (a
placeholder when none is named), so neither litellm nor an SDK falls back to some other key from the environment
(e.g. sending OPENAI_API_KEY to an api_base a researcher typed in, or AZURE_OPENAI_AD_TOKEN instead of the Azure key).
A key goes to a custom api_base only when the operator's JUDGE_API_KEY_HOSTS binds that variable to that origin
(scheme, host and port).

Why one module of this size: it is the one module that imports litellm (an import contract names it), and every part
of a call (the provider clients, the Bedrock and Vertex request builders, the classification of failures, the retry
loop, the cost) handles litellm's classes or exceptions. Split, each part would either import litellm too or pass
its objects between modules without a type.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import asyncio
import base64
import datetime
import email.utils
import functools
import hashlib
import json
import logging
import random
import re
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from django.conf import settings

from judging.llm import netguard
from judging.llm.calls import SUPPORTED_PROVIDERS, TEMPORARY, CallResult, CallSpec, provider_problem
from judging.llm.ratelimit import DEFAULT_COMPLETION_TOKENS, Lease, Limiter, Limits, LocalLimiter
from judging.llm.sending import CURRENT_GATE, SendGate


@functools.cache
def load() -> None:
    """Import litellm now: a worker does it at start-up, so that no slice's bounded wait for its gateway includes
    an import that takes tens of seconds on a loaded machine."""
    _litellm()


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


# Where a supported provider's requests go when a config gives no api_base, in the form litellm takes it for that
# provider: the host root for Anthropic (litellm appends /v1/messages), with the version segment for Gemini and
# Mistral. Always passed explicitly: left unset, the SDKs and litellm would take OPENAI_BASE_URL, ANTHROPIC_BASE_URL,
# GEMINI_API_BASE or MISTRAL_API_BASE from the environment instead. Azure OpenAI has no default: each resource has
# its own endpoint, which the config must give (https://<resource>.openai.azure.com).
DEFAULT_API_BASES = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com/v1beta",
    "mistral": "https://api.mistral.ai/v1",
}
# Providers reached through our OpenAI SDK client; the others through litellm's HTTP handler on the guarded client.
_SDK_PROVIDERS = frozenset({"openai", "azure"})
# litellm reads this itself and then bypasses the client we hand it.
_CLIENT_BYPASS_ENV = "EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER"


class ProviderNotSupported(ValueError):
    pass


def _provider_prefix(model: str) -> str:
    return model.partition("/")[0]


def api_base_for(
    model: str, api_base: str | None, region: str | None = None, location: str | None = None
) -> str | None:
    if api_base:
        return api_base
    if _provider_prefix(model) == "bedrock":
        return f"https://bedrock-runtime.{region}.amazonaws.com" if region else None
    if _provider_prefix(model) == "vertex_ai":
        if not location:
            return None
        return (
            "https://aiplatform.googleapis.com"
            if location == "global"
            else f"https://{location}-aiplatform.googleapis.com"
        )
    return DEFAULT_API_BASES.get(_provider_prefix(model))


def route_problem(model: str) -> str | None:
    """Why a call to this model would not go through our guarded client, or None.

    The model string's own prefix must be supported, litellm must agree on the provider (it alone picks the code
    path), and litellm must not send the model through its Responses API bridge, which uses its own client."""
    problem = provider_problem(model)
    if problem:
        return problem
    if provider_of(model) != _provider_prefix(model) or provider_of(model) not in SUPPORTED_PROVIDERS:
        return f"model {model!r} is not routed to a supported provider"
    if _model_info(model).get("mode") == "responses":
        return f"model {model!r} would use the Responses API, which is not supported; name a chat model"
    if os.environ.get(_CLIENT_BYPASS_ENV, "").strip().lower() not in ("", "0", "false", "no", "off"):
        return f"{_CLIENT_BYPASS_ENV} is set, which makes litellm bypass the guarded HTTP client"
    return None


def check_key_destination(
    api_key_env: str | None,
    api_base: str | None,
    model: str | None = None,
    *,
    region: str | None = None,
    location: str | None = None,
) -> None:
    """A key goes only to its own provider: its default origin, or an origin the operator bound to it, matched
    on scheme, host and port.

    Without api_base the destination is the model's provider endpoint, so ANTHROPIC_API_KEY cannot ride along to
    api.openai.com, nor an unrelated secret such as SECRET_KEY to any provider."""
    if not api_key_env or (not api_base and not model):
        return
    base = api_base_for(model, api_base, region, location) if model else api_base
    origin = origin_of(base) if base else None
    if origin is None or origin not in _key_origins().get(api_key_env, set()):
        shown = _origin_text(origin) if origin else repr(base)
        raise KeyNotAllowed(
            f"the key in {api_key_env} may not be sent to {shown}; an operator can allow it with "
            f"JUDGE_API_KEY_HOSTS ({api_key_env}={shown})"
        )


def credential_variables(spec: CallSpec) -> list[str]:
    """Every environment variable a request of this spec reads a credential from."""
    names = (
        spec.api_key_env,
        spec.aws_access_key_id_env,
        spec.aws_secret_access_key_env,
        spec.aws_session_token_env,
        spec.vertex_credentials_env,
    )
    return [name for name in names if name]


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
    name = model.partition("/")[2] if _provider_prefix(model) in ("openai", "azure") else model
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


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _duration_s(value: str) -> float | None:
    """OpenAI's reset durations ("1s", "6m0s", "20ms")."""
    parts = _DURATION_PART.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value.replace(" ", ""):
        return None
    return sum(float(number) * _DURATION_UNITS[unit] for number, unit in parts)


def _seconds_until(value: str) -> float | None:
    """An HTTP date (Retry-After) or an RFC 3339 time (Anthropic's resets), as seconds from now."""
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        try:
            moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return max(0.0, moment.timestamp() - time.time())


def _wait_from_headers(headers: Any) -> float | None:
    """How long the provider asks us to wait, from the headers it sends with a 429 or 503: Retry-After (every
    provider), Azure's retry-after-ms, the x-ratelimit-reset-* durations of OpenAI and Azure, and Anthropic's
    anthropic-ratelimit-*-reset times. The longest of the windows that ran out counts."""

    def get(name: str) -> str | None:
        try:
            value = headers.get(name)
        except Exception:
            return None
        return str(value).strip() if value is not None else None

    retry_after = get("retry-after")
    if retry_after:
        try:
            return max(0.0, float(retry_after))
        except ValueError:
            if (seconds := _seconds_until(retry_after)) is not None:
                return seconds
    retry_after_ms = get("retry-after-ms")
    if retry_after_ms:
        try:
            return max(0.0, float(retry_after_ms) / 1000)
        except ValueError:
            pass
    waits = []
    for name, parse in (
        ("x-ratelimit-reset-requests", _duration_s),
        ("x-ratelimit-reset-tokens", _duration_s),
        ("anthropic-ratelimit-requests-reset", _seconds_until),
        ("anthropic-ratelimit-tokens-reset", _seconds_until),
        ("anthropic-ratelimit-input-tokens-reset", _seconds_until),
        ("anthropic-ratelimit-output-tokens-reset", _seconds_until),
    ):
        value = get(name)
        if not value:
            continue
        if name.startswith("x-ratelimit-"):
            remaining = get(name.replace("reset", "remaining"))
        else:
            remaining = get(name.replace("-reset", "-remaining"))
        if remaining not in (None, "0"):
            continue  # that window still has room: its reset is not why we were refused
        seconds = parse(value)
        if seconds is not None:
            waits.append(seconds)
    return max(waits) if waits else None


def _retry_after(exc: BaseException) -> float | None:
    for link in _chain(exc):
        response = getattr(link, "response", None)
        candidates = [
            getattr(response, "headers", None) if response is not None else None,
            getattr(link, "litellm_response_headers", None),
            getattr(link, "headers", None),
        ]
        for source in candidates:
            if source:
                wait = _wait_from_headers(source)
                if wait is not None:
                    return wait
    return None


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 10:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _http_status(chain: list[BaseException]) -> int | None:
    """The status the provider actually answered with: litellm reports some (a redirect from Anthropic or Gemini, for
    one) as a connection error with status 500, the HTTP response kept only further down the chain."""
    for link in chain:
        status = getattr(getattr(link, "response", None), "status_code", None)
        if isinstance(status, int):
            return status
    return None


def _kind_of_status(status: int) -> str | None:
    if 300 <= status < 400:
        return "redirect"
    if status == 408:
        return "timeout"
    if status == 429:
        return "rate_limit"
    if status in (401, 403):
        return "auth"
    if status == 404:
        return "not_found"
    if status >= 500:
        return "server"
    if 400 <= status < 500:
        return "bad_request"
    return None


def classify(exc: BaseException) -> str:
    chain = _chain(exc)
    litellm = _litellm()
    answered = _http_status(chain)
    if any(isinstance(e, netguard.HostUnresolvable) for e in chain):
        return "connection"
    if any(isinstance(e, netguard.ApiBaseRefused) for e in chain):
        return "refused_host"
    if any(isinstance(e, KeyNotAllowed) for e in chain):
        return "key_not_allowed"
    if any(isinstance(e, ProviderNotSupported) for e in chain):
        return "unsupported_provider"
    if answered is not None and 300 <= answered < 400:
        return "redirect"
    if isinstance(exc, ProviderAnswered):
        if exc.auth and 400 <= exc.status_code < 500:
            return "auth"
        return _kind_of_status(exc.status_code) or "server"
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
        if answered is not None and (kind := _kind_of_status(answered)):
            return kind
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


class ProviderAnswered(Exception):
    """A provider's error answer to a request the gateway sent itself (not through litellm); `auth` when it refused
    the credential (a token endpoint answers a bad grant with 400)."""

    def __init__(self, status_code: int, message: str, response: Any, *, auth: bool = False) -> None:
        super().__init__(f"HTTP {status_code}: {message}")
        self.status_code = status_code
        self.response = response
        self.auth = auth


# The JWT-bearer grant's audience is Google's token endpoint whatever token_uri the key file names.
GOOGLE_GRANT_AUDIENCE = "https://oauth2.googleapis.com/token"
_VERTEX_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def service_account_jwt(account: dict[str, Any], now: float | None = None) -> str:
    """The signed assertion of the JWT-bearer grant (RFC 7523), RS256 with the service account's key."""
    from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415 -- Vertex runs only
    from cryptography.hazmat.primitives.asymmetric import padding, rsa  # noqa: PLC0415 -- see above

    key = serialization.load_pem_private_key(str(account["private_key"]).encode(), password=None)
    if not isinstance(key, rsa.RSAPrivateKey):
        raise KeyNotAllowed("the service account's private_key is not an RSA key")
    issued = int(now if now is not None else time.time())
    header: dict[str, Any] = {"alg": "RS256", "typ": "JWT"}
    if account.get("private_key_id"):
        header["kid"] = str(account["private_key_id"])
    claims = {
        "iss": str(account["client_email"]),
        "scope": _VERTEX_SCOPE,
        "aud": GOOGLE_GRANT_AUDIENCE,
        "iat": issued,
        "exp": issued + 3600,
    }
    signing_input = _b64url(json.dumps(header).encode()) + "." + _b64url(json.dumps(claims).encode())
    signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return signing_input + "." + _b64url(signature)


def _transport_error(exc: Exception) -> BaseException:
    """A failure of the guarded client, as the classification reads litellm's: a timeout or a connection error."""
    name = type(exc).__name__
    if isinstance(exc, netguard.ApiBaseRefused):
        return exc
    if "Timeout" in name:
        return TimeoutError(f"{name}: {exc}")
    return ConnectionError(f"{name}: {exc}")


def converse_body(spec: CallSpec) -> dict[str, Any]:
    """The Converse request for a chat: system messages apart, the others as text blocks, alternating roles kept."""
    system = [{"text": m["content"]} for m in spec.messages if m.get("role") == "system" and m.get("content")]
    messages: list[dict[str, Any]] = []
    for message in spec.messages:
        if message.get("role") == "system":
            continue
        role = "assistant" if message.get("role") == "assistant" else "user"
        block = {"text": str(message.get("content") or "")}
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].append(block)
        else:
            messages.append({"role": role, "content": [block]})
    inference: dict[str, Any] = {"temperature": spec.temperature}
    if spec.max_tokens:
        inference["maxTokens"] = spec.max_tokens
    body: dict[str, Any] = {"messages": messages, "inferenceConfig": inference}
    if system:
        body["system"] = system
    return body


def _bedrock_error(response: Any) -> str:
    kind = str(response.headers.get("x-amzn-errortype", "")).partition(":")[0]
    try:
        message = str(response.json().get("message") or response.json().get("Message") or "")
    except ValueError:
        message = ""
    return f"{kind}: {message}"[:500] if kind else message[:500]


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
        self._clients: dict[tuple[str, str, float, str, str], Any] = {}
        self._tokens: dict[tuple[str, str, str], tuple[str, float]] = {}
        self._token_lock = asyncio.Lock()
        self._token_client: Any = None
        self._http: list[Any] = []

    def _guarded_http(self, spec: CallSpec) -> Any:
        """A new guarded HTTP client for this provider: its own connection pool behind the send gate, redirects off,
        and only the headers this provider's requests need."""
        from judging.llm import egress  # noqa: PLC0415 -- httpx, kept out of start-up; litellm has loaded it

        # litellm's aiohttp-based transport costs a third of the CPU per call of httpcore's pool,
        # which rescans every pooled connection per request; redirects stay off either way.
        inner = _fast_transport(egress.MAX_CONNECTIONS, egress.GuardedResolver, lambda: [egress.send_trace_config()])
        gated = egress.gated(inner, egress.MAX_CONNECTIONS)
        http = egress.guarded_async_client(spec.timeout_s, inner=gated, provider=_provider_prefix(spec.model))
        self._http.append(http)
        return http

    def _client_for(self, spec: CallSpec, api_base: str) -> Any:
        """Our own client on the guarded HTTP client: no SDK retries, no redirects, no proxies, no credential but
        the named one."""
        provider = _provider_prefix(spec.model)
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
            raise _transport_error(exc) from exc
        if response.status_code >= 300:
            raise ProviderAnswered(response.status_code, _bedrock_error(response), response)
        return _converse_reply(spec, response.json())

    async def _vertex_attempt(self, spec: CallSpec, api_base: str) -> Any:
        """One Vertex AI generateContent request with an access token evalsite obtained itself.

        Vertex's generateContent speaks Gemini's format, so litellm's Gemini path builds and reads it, on the
        guarded client, with the publisher's path as its base URL and the token as the only credential header."""
        token = await self._vertex_token(spec)
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

    async def _vertex_token(self, spec: CallSpec) -> str:
        """An OAuth access token for the service account in the named variable, by the JWT-bearer grant sent
        through the guarded client (google-auth would send it over requests, with proxies and redirects)."""
        variable = spec.vertex_credentials_env or ""
        raw = os.environ.get(variable, "")
        try:
            account = json.loads(raw) if raw else {}
        except ValueError:
            account = {}
        if not isinstance(account, dict) or not account.get("client_email") or not account.get("private_key"):
            raise KeyNotAllowed(f"{variable} must hold a service account's JSON key (client_email and private_key)")
        token_uri = str(account.get("token_uri") or GOOGLE_GRANT_AUDIENCE)
        check_key_destination(variable, token_uri)
        cache_key = (variable, hashlib.sha256(raw.encode()).hexdigest(), token_uri)
        # One grant for the calls waiting at once: the first fetches, the others take its token.
        async with self._token_lock:
            cached = self._tokens.get(cache_key)
            if cached and cached[1] - 60 > time.time():
                return cached[0]
            token, lifetime = await self._grant(spec, account, token_uri)
            self._tokens[cache_key] = (token, time.time() + lifetime)
            return token

    async def _grant(self, spec: CallSpec, account: dict[str, Any], token_uri: str) -> tuple[str, float]:
        from judging.llm import egress  # noqa: PLC0415 -- httpx, kept out of start-up

        client = self._token_client
        if client is None:
            # Not behind the send gate: the token request is not a model call and counts in no rpm window.
            inner = egress.pooled_transport(8)
            client = self._token_client = egress.guarded_async_client(spec.timeout_s, inner=inner, provider="oauth")
            self._http.append(client)
        form = {"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer", "assertion": service_account_jwt(account)}
        try:
            response = await client.post(
                token_uri, content=urlencode(form), headers={"Content-Type": "application/x-www-form-urlencoded"}
            )
        except Exception as exc:
            raise _transport_error(exc) from exc
        if response.status_code >= 300:
            raise ProviderAnswered(response.status_code, f"token endpoint: {response.text[:300]}", response, auth=True)
        try:
            data = response.json()
            return str(data["access_token"]), float(data.get("expires_in") or 3600)
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError("the token endpoint's reply has no access_token") from exc

    async def close(self) -> None:
        for http in self._http:
            await http.aclose()
        self._http.clear()
        self._clients.clear()
        self._token_client = None

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
        if _provider_prefix(spec.model) == "bedrock":
            return await self._bedrock_attempt(spec, api_base)
        if _provider_prefix(spec.model) == "vertex_ai":
            return await self._vertex_attempt(spec, api_base)
        provider_args: dict[str, Any] = {}
        if _provider_prefix(spec.model) == "azure":
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
    result.provider_model = str(getattr(response, "model", "") or "")[:200]
    result.error_kind, result.error = "", ""


def _safe_message(exc: BaseException, spec: CallSpec) -> str:
    """The error text with any configured key removed (keys never reach storage or logs)."""
    message = f"{type(exc).__name__}: {exc}"[:2000]
    key = os.environ.get(spec.api_key_env or "", "") if spec.api_key_env else ""
    if key and len(key) >= 4:
        message = message.replace(key, "[redacted]")
    return message

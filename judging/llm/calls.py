"""What a judge method asks of a provider and what comes back: plain data, cacheable, with no client attached."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from judging.records import record_fields

# Where and how a judge reaches its provider (the endpoint, the credentials' variables, the region or project): the
# config keys that say nothing about how it scores, in the order the judge config form shows them.
CONNECTION_KEYS = (
    "api_base",
    "api_key_env",
    "api_version",
    "aws_access_key_id_env",
    "aws_secret_access_key_env",
    "aws_session_token_env",
    "aws_region",
    "vertex_credentials_env",
    "vertex_project",
    "vertex_location",
)
TEMPORARY = frozenset({"timeout", "connection", "rate_limit", "server", "malformed"})
PERMANENT = frozenset(
    {
        "bad_request",
        "auth",
        "not_found",
        "context_length",
        "refused_host",
        "redirect",
        "key_not_allowed",
        "unsupported_provider",
    }
)

# Providers whose requests travel only through the gateway's own HTTP client: redirects off, the address of every
# connection checked, no proxy, header or key taken from the environment, every credential passed explicitly from
# the variables the config names. litellm's other providers use its own client, which follows redirects and reads
# credentials from the environment by itself, so they are refused.
SUPPORTED_PROVIDERS: tuple[str, ...] = ("openai", "azure", "anthropic", "gemini", "mistral", "bedrock", "vertex_ai")
# Why the providers litellm offers that researchers ask for most are still refused.
REFUSED_PROVIDERS: dict[str, str] = {
    "vertex_ai_beta": "litellm fetches the Vertex AI OAuth token through google-auth over its own HTTP client; "
    "use vertex_ai/, whose token evalsite fetches itself",
    "sagemaker": "litellm signs SageMaker requests with credentials it also looks up in the AWS environment",
}


def provider_problem(model: str) -> str | None:
    """Why a model string cannot be called, or None when its provider is supported."""
    supported = ", ".join(f"{name}/" for name in SUPPORTED_PROVIDERS)
    prefix, slash, name = model.partition("/")
    if not slash or not name:
        return f"model {model!r} must start with its provider; supported providers: {supported}"
    if prefix not in SUPPORTED_PROVIDERS:
        reason = f" ({REFUSED_PROVIDERS[prefix]})" if prefix in REFUSED_PROVIDERS else ""
        return (
            f"provider {prefix!r} (model {model!r}) is not supported{reason}; supported providers: {supported} "
            "(other vendors through their OpenAI-compatible endpoint as api_base)"
        )
    if name.startswith("responses/"):
        # litellm sends these through the Responses API with its own client, not ours.
        return f"model {model!r} would use the Responses API, which is not supported; name a chat model"
    return None


@dataclass(frozen=True)
class CallSpec:
    model: str
    messages: list[dict[str, str]]
    temperature: float = 0.0
    max_tokens: int | None = None
    logprobs: bool = False
    top_logprobs: int = 5
    api_base: str | None = None
    api_key_env: str | None = None
    api_version: str | None = None  # Azure OpenAI's api-version query parameter
    # AWS Bedrock: the variables holding the key pair and session token, and the region.
    aws_access_key_id_env: str | None = None
    aws_secret_access_key_env: str | None = None
    aws_session_token_env: str | None = None
    aws_region: str | None = None
    # Vertex AI: the variable holding the service account's JSON key, the project and the location.
    vertex_credentials_env: str | None = None
    vertex_project: str | None = None
    vertex_location: str | None = None
    timeout_s: float = 60.0
    max_retries: int = 6
    variant: int = 0  # sample index: k samples are k distinct requests, each cached on its own
    # Which of a unit's sampled-fallback replies this request is: the same prompt sent again at a temperature
    # above 0 must reach the provider again, not be answered from the cache or a waiting identical request.
    draw: int = 0

    def params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"temperature": self.temperature}
        if self.max_tokens:
            params["max_tokens"] = self.max_tokens
        if self.logprobs:
            params["logprobs"] = True
            params["top_logprobs"] = self.top_logprobs
        return params

    def cache_key(self) -> str:
        material = {
            "model": self.model,
            "api_base": self.api_base or "",
            "messages": self.messages,
            "params": self.params(),
            "variant": self.variant,
        }
        if self.api_version:
            material["api_version"] = self.api_version
        if self.aws_region:
            material["aws_region"] = self.aws_region
        if self.vertex_project:
            material["vertex"] = [self.vertex_project, self.vertex_location]
        if self.draw:
            # Only when set, so the keys of every request without one (and the cache built on them) stay as they were.
            material["draw"] = self.draw
        return hashlib.sha256(json.dumps(material, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


@dataclass
class CallResult:
    content: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    latency_s: float = 0.0  # the provider's time: from sending each attempt to its answer, summed over attempts
    queue_wait_s: float = 0.0  # waiting for a concurrency slot and for room in the rpm/tpm windows, apart
    attempts: int = 0
    error_kind: str = ""
    error: str = ""
    logprobs: list[dict[str, Any]] | None = None
    stopped: bool = False  # never sent because the run was cancelled or hit its budget
    errors_seen: list[str] = field(default_factory=list)
    # The model the provider's reply names, which can differ from the requested one (a dated snapshot behind an alias).
    provider_model: str = ""

    @property
    def ok(self) -> bool:
        return not self.error_kind and not self.stopped

    def to_cache(self) -> dict[str, Any]:
        return record_fields(self, "content prompt_tokens completion_tokens cost logprobs provider_model")

    @classmethod
    def from_cache(cls, data: dict[str, Any]) -> CallResult:
        return cls(
            content=data.get("content"),
            prompt_tokens=int(data.get("prompt_tokens") or 0),
            completion_tokens=int(data.get("completion_tokens") or 0),
            cost=data.get("cost"),
            logprobs=data.get("logprobs"),
            provider_model=str(data.get("provider_model") or ""),
        )

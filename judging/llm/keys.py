"""Where a provider key may be sent, and where each provider's requests go when a config names no endpoint.

Only the environment variable a config names is ever read, and it is always passed explicitly (a placeholder when none
is named), so neither litellm nor an SDK falls back to some other key from the environment. A key goes to a custom
api_base only when the operator's JUDGE_API_KEY_HOSTS binds that variable to that origin (scheme, host and port)."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from django.conf import settings

from judging.llm.calls import CallSpec

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


class ProviderNotSupported(ValueError):
    pass


def provider_prefix(model: str) -> str:
    return model.partition("/")[0]


def api_base_for(
    model: str, api_base: str | None, region: str | None = None, location: str | None = None
) -> str | None:
    if api_base:
        return api_base
    if provider_prefix(model) == "bedrock":
        return f"https://bedrock-runtime.{region}.amazonaws.com" if region else None
    if provider_prefix(model) == "vertex_ai":
        if not location:
            return None
        return (
            "https://aiplatform.googleapis.com"
            if location == "global"
            else f"https://{location}-aiplatform.googleapis.com"
        )
    return DEFAULT_API_BASES.get(provider_prefix(model))


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

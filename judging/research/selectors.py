"""The judges area's reads: which providers a config can reach from this server, a dataset's runs with their
figures, and the judge versions a run produced. Every read is scoped by the requesting user."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import QuerySet

from annotations.models import Dataset
from judging import selectors
from judging.llm.calls import SUPPORTED_PROVIDERS
from judging.llm.gateway import KeyNotAllowed, api_base_for, check_key_destination
from judging.models import JudgeRun

# What each supported provider needs from the config when the researcher has not typed it yet: an example model,
# the fields naming its credential variables with the usual variable, and where its requests would go.
PROVIDER_NEEDS: dict[str, dict[str, Any]] = {
    "openai": {"model": "openai/gpt-4o-mini", "keys": {"api_key_env": "OPENAI_API_KEY"}},
    "azure": {"model": "azure/gpt-4o-mini", "keys": {"api_key_env": "AZURE_API_KEY"}, "needs_base": True},
    "anthropic": {"model": "anthropic/claude-3-5-haiku-latest", "keys": {"api_key_env": "ANTHROPIC_API_KEY"}},
    "gemini": {"model": "gemini/gemini-2.5-flash", "keys": {"api_key_env": "GEMINI_API_KEY"}},
    "mistral": {"model": "mistral/mistral-small-latest", "keys": {"api_key_env": "MISTRAL_API_KEY"}},
    "bedrock": {
        "model": "bedrock/anthropic.claude-3-haiku-20240307-v1:0",
        "keys": {"aws_access_key_id_env": "AWS_ACCESS_KEY_ID_KEY", "aws_secret_access_key_env": "AWS_SECRET_KEY"},
        "region": "us-east-1",
    },
    "vertex_ai": {
        "model": "vertex_ai/gemini-2.5-flash",
        "keys": {"vertex_credentials_env": "VERTEX_SERVICE_ACCOUNT_KEY"},
        "location": "us-central1",
    },
}


@dataclass(frozen=True)
class Missing:
    """One thing a provider lacks: `kind` is what (the page words it), `variable` the key variable it concerns and
    `destination` where the requests would go."""

    kind: str  # "no_key_variable", "needs_base", "not_set" or "not_allowed"
    variable: str = ""
    destination: str = ""


@dataclass(frozen=True)
class ProviderStatus:
    provider: str
    model: str
    variables: tuple[str, ...]
    # What is missing, each naming the variable or setting; empty when the provider is ready.
    missing: tuple[Missing, ...]
    # The config being edited uses this provider, so its own variables and URL were checked.
    chosen: bool

    @property
    def ready(self) -> bool:
        return not self.missing


def _provider_of(model: Any) -> str:
    return model.partition("/")[0] if isinstance(model, str) else ""


def provider_statuses(config: dict[str, Any] | None) -> list[ProviderStatus]:
    """Every supported provider with the key variables it needs, whether this server's environment holds them and
    whether the operator allows them to be sent where the requests go. Names of variables only: no value is read
    beyond its presence. The workers read their own environment, which the operator keeps like this one."""
    config = config or {}
    chosen_provider = _provider_of(config.get("model"))
    statuses = []
    for provider in SUPPORTED_PROVIDERS:
        needs = PROVIDER_NEEDS[provider]
        chosen = provider == chosen_provider
        model = str(config["model"]) if chosen else needs["model"]
        keys: dict[str, str] = {
            field: (str(config[field]) if chosen and isinstance(config.get(field), str) else default)
            for field, default in needs["keys"].items()
        }
        api_base = config.get("api_base") if chosen and isinstance(config.get("api_base"), str) else None
        region = config.get("aws_region") if chosen else needs.get("region")
        location = config.get("vertex_location") if chosen else needs.get("location")
        destination = api_base_for(model, api_base, region, location) or ""
        missing: list[Missing] = []
        if chosen and provider not in ("bedrock", "vertex_ai") and not config.get("api_key_env"):
            missing.append(Missing("no_key_variable"))
        if needs.get("needs_base") and not api_base:
            missing.append(Missing("needs_base"))
        for variable in keys.values():
            if not os.environ.get(variable):
                missing.append(Missing("not_set", variable))
            if not destination:
                continue
            try:
                check_key_destination(variable, api_base, model, region=region, location=location)
            except KeyNotAllowed:
                missing.append(Missing("not_allowed", variable, destination))
        statuses.append(
            ProviderStatus(
                provider=provider, model=model, variables=tuple(keys.values()), missing=tuple(missing), chosen=chosen
            )
        )
    return statuses


def api_base_allowlist() -> list[str]:
    """The private hosts an operator allowed judge requests to; public hosts need no entry."""
    return [str(entry) for entry in settings.JUDGE_API_BASE_ALLOWLIST]


def runs_of_dataset(dataset: Dataset) -> QuerySet[JudgeRun]:
    return selectors.judge_runs_of_dataset(dataset)

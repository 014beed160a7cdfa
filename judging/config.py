"""Judge config validation: the one entry point used by the admin form, the API, the `judge` command and the
services, so every entry point accepts exactly the same thing. The fields, defaults and rules live in
`judging.methods.judge_settings`; here they meet the network, the operator's policy on where keys may go, and
litellm's own view of a model (which code path its calls would take)."""

from __future__ import annotations

from typing import Any

from annotations.text.storable import NUL, unstorable_character
from judging.llm import netguard
from judging.llm.gateway import route_problem
from judging.llm.keys import KeyNotAllowed, check_key_destination
from judging.methods.judge_settings import (
    CREDENTIAL_ENV_FIELDS,
    LLM_METHODS,
    METHODS,
    ConfigError,
    JudgeSettings,
    is_key_env_name,
    normalise_config,
)

__all__ = ["LLM_METHODS", "METHODS", "ConfigError", "JudgeSettings", "validate_config"]


def _destination_problems(cfg: dict[str, Any], *, check_network: bool) -> list[str]:
    """Where the config's requests and key would go; normalises cfg["api_base"] when the network is checked."""
    problems: list[str] = []
    model = cfg.get("model") if isinstance(cfg.get("model"), str) else None
    if isinstance(cfg["api_base"], str) and check_network:
        try:
            cfg["api_base"] = netguard.validate_api_base(cfg["api_base"])
        except netguard.ApiBaseRefused as exc:
            problems.append(f"api_base refused: {exc}")
    region = cfg.get("aws_region") if isinstance(cfg.get("aws_region"), str) else None
    location = cfg.get("vertex_location") if isinstance(cfg.get("vertex_location"), str) else None
    for name in CREDENTIAL_ENV_FIELDS:
        if not is_key_env_name(cfg.get(name)):
            continue
        try:
            check_key_destination(
                cfg[name],
                cfg["api_base"] if isinstance(cfg["api_base"], str) else None,
                model,
                region=region,
                location=location,
            )
        except KeyNotAllowed as exc:
            problems.append(str(exc))
    return problems


def _route_problems(cfg: dict[str, Any], already: list[str]) -> list[str]:
    """The models whose calls would leave the guarded client, by what litellm itself would do with them."""
    if cfg.get("method") not in LLM_METHODS:
        return []
    models = {cfg.get("model"), cfg.get("summarizer_model") if cfg.get("method") == "summarize_then_judge" else None}
    problems = []
    for model in sorted(m for m in models if isinstance(m, str)):
        problem = route_problem(model)
        if problem and not any(problem in seen for seen in already):
            problems.append(problem)
    return problems


def _unstorable_text(raw: Any) -> list[str]:
    """Where the config holds text Postgres JSON cannot store (U+0000) or UTF-8 cannot encode (lone surrogates);
    the dataset importer refuses both for the same reason."""
    problems: list[str] = []
    stack: list[tuple[str, Any]] = [("config", raw)]
    while stack:
        where, node = stack.pop()
        texts = [node] if isinstance(node, str) else list(node) if isinstance(node, dict) else []
        for text in texts:
            if not isinstance(text, str):
                continue
            bad = unstorable_character(text)
            if bad == NUL:
                problems.append(f"{where}: a NUL character cannot be stored")
            elif bad:
                problems.append(f"{where}: an unpaired surrogate cannot be stored")
        if isinstance(node, dict):
            stack.extend((f"{where}.{key}", child) for key, child in node.items())
        elif isinstance(node, list):
            stack.extend((f"{where}[{index}]", child) for index, child in enumerate(node))
    return problems


def validate_config(raw: Any, *, check_network: bool = True) -> JudgeSettings:
    """The typed config with defaults filled in, or ConfigError listing every problem."""
    if not isinstance(raw, dict):
        raise ConfigError(["the config must be a JSON object"])
    unstorable = _unstorable_text(raw)
    if unstorable:
        raise ConfigError(unstorable)
    cfg, errors = normalise_config(raw)
    errors.extend(_destination_problems(cfg, check_network=check_network))
    errors.extend(_route_problems(cfg, errors))
    if errors:
        raise ConfigError(errors)
    return JudgeSettings.from_normalised(cfg)

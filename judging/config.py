"""Validation of judge configurations (DESIGN §4.4): one function, used by the admin form, the
API, the `judge` command and the services, so every entry point accepts exactly the same thing."""

from __future__ import annotations

import math
import re
from typing import Any

from judging import netguard
from judging.gateway import KeyNotAllowed, check_default_destination, check_key_destination
from judging.metrics import METRICS
from judging.parsing import RegexRejected, compile_user_regex
from judging.prompts import PLACEHOLDERS, placeholders_in

METHODS = ("single", "reference", "pairwise", "summarize_then_judge", "factscore", "metric")
LLM_METHODS = frozenset({"single", "reference", "pairwise", "summarize_then_judge", "factscore"})
OUTPUT_FORMATS = ("auto", "json", "regex")
_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]{0,99}$")
# Key variables must look like keys: a researcher must not be able to point the gateway at
# SECRET_KEY's neighbours such as DATABASE_URL and have them sent as a bearer token.
_KEY_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]*(API_KEY|_KEY|_TOKEN)$")
_MODEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$")

DEFAULTS: dict[str, Any] = {
    "api_base": None,
    "api_key_env": None,
    "aspects": None,
    "prompt": None,
    "language": "auto",
    "output": {"format": "auto"},
    "samples": 1,
    "temperature": 0.0,
    "logprobs": False,
    "top_logprobs": 5,
    "max_tokens": None,
    "summarizer_model": None,
    "summarizer_prompt": None,
    "metric": None,
    "pairs": "all",
    "baseline": None,
    "parse_retries": 0,
    "max_concurrency": 32,
    "rpm": None,
    "tpm": None,
    "timeout_s": 60,
    "max_retries": 6,
    "budget_usd": None,
    "cache": True,
    "factscore": None,  # method-specific options, validated by judging.factscore.method
}
KNOWN_KEYS = frozenset({"name", "method", "model", *DEFAULTS})


class ConfigError(ValueError):
    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


def _int(cfg: dict[str, Any], key: str, lo: int, hi: int, errors: list[str], nullable: bool = False) -> None:
    value = cfg.get(key)
    if value is None and nullable:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        errors.append(f"{key} must be an integer from {lo} to {hi}{' or null' if nullable else ''}")


def _number(cfg: dict[str, Any], key: str, lo: float, hi: float, errors: list[str], nullable: bool = False) -> None:
    value = cfg.get(key)
    if value is None and nullable:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(float(value))
        or not lo <= float(value) <= hi
    ):
        errors.append(f"{key} must be a number from {lo:g} to {hi:g}{' or null' if nullable else ''}")


def validate_config(raw: Any, *, check_network: bool = True) -> dict[str, Any]:
    """Return the config with defaults filled in, or raise ConfigError listing every problem."""
    if not isinstance(raw, dict):
        raise ConfigError(["the config must be a JSON object"])
    errors: list[str] = []
    unknown = sorted(set(raw) - KNOWN_KEYS)
    if unknown:
        errors.append(f"unknown field(s): {', '.join(unknown)}")
    cfg: dict[str, Any] = {**DEFAULTS, **{k: v for k, v in raw.items() if k in KNOWN_KEYS}}

    name = cfg.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > 150:
        errors.append("name is required (1 to 150 characters)")
    else:
        cfg["name"] = name.strip()
    method = cfg.get("method")
    if method not in METHODS:
        errors.append(f"method must be one of {', '.join(METHODS)}")
    model = cfg.get("model")
    if method in LLM_METHODS:
        if not isinstance(model, str) or not _MODEL.match(model):
            errors.append("model must be a litellm model string such as openai/gpt-4o-mini")
    elif model is not None and not isinstance(model, str):
        errors.append("model must be a string")

    if cfg["api_base"] is not None:
        if not isinstance(cfg["api_base"], str):
            errors.append("api_base must be a URL string")
        elif check_network:
            try:
                cfg["api_base"] = netguard.validate_api_base(cfg["api_base"])
            except netguard.ApiBaseRefused as exc:
                errors.append(f"api_base refused: {exc}")
    key_env = cfg["api_key_env"]
    if key_env is not None:
        if not isinstance(key_env, str) or not _ENV_NAME.match(key_env) or not _KEY_ENV_NAME.match(key_env):
            errors.append("api_key_env must name an environment variable ending in _API_KEY, _KEY or _TOKEN")
        else:
            try:
                check_key_destination(
                    key_env,
                    cfg["api_base"] if isinstance(cfg["api_base"], str) else None,
                    model if isinstance(model, str) else None,
                )
            except KeyNotAllowed as exc:
                errors.append(str(exc))
    if check_network and cfg["api_base"] is None and isinstance(model, str) and method in LLM_METHODS:
        try:
            check_default_destination(model, None)
        except netguard.ApiBaseRefused as exc:
            errors.append(f"the default endpoint of {model} is refused: {exc}")

    aspects = cfg["aspects"]
    if aspects is not None and (
        not isinstance(aspects, list)
        or not aspects
        or not all(isinstance(a, str) and a.strip() and len(a) <= 200 for a in aspects)
        or len(set(aspects)) != len(aspects)
    ):
        errors.append("aspects must be a non-empty list of distinct aspect names, or null for every aspect")

    prompt = cfg["prompt"]
    if prompt is not None:
        if not isinstance(prompt, str) or not prompt.strip() or len(prompt) > 20_000:
            errors.append("prompt must be a template string of at most 20,000 characters")
        else:
            if method == "pairwise" and not {"answer_a", "answer_b"} <= placeholders_in(prompt):
                errors.append("a pairwise prompt needs {answer_a} and {answer_b}")
            elif method == "summarize_then_judge" and "summary" not in placeholders_in(prompt):
                errors.append("a summarize_then_judge prompt needs {summary}")
            elif method in ("single", "reference") and "answer" not in placeholders_in(prompt):
                errors.append("the prompt needs the {answer} placeholder")
    if cfg["summarizer_prompt"] is not None and (
        not isinstance(cfg["summarizer_prompt"], str) or "answer" not in placeholders_in(cfg["summarizer_prompt"])
    ):
        errors.append("summarizer_prompt must be a template with {answer}")
    if cfg["language"] not in ("auto", "en", "ja"):
        errors.append("language must be auto, en or ja")

    output = cfg["output"]
    if not isinstance(output, dict) or output.get("format", "auto") not in OUTPUT_FORMATS:
        errors.append("output.format must be auto, json or regex")
    else:
        output = {"format": output.get("format", "auto"), **({"regex": output["regex"]} if "regex" in output else {})}
        cfg["output"] = output
        if output["format"] == "regex":
            try:
                compile_user_regex(output.get("regex", ""))
            except RegexRejected as exc:
                errors.append(str(exc))

    _int(cfg, "samples", 1, 20, errors)
    _number(cfg, "temperature", 0, 2, errors)
    if not isinstance(cfg["logprobs"], bool):
        errors.append("logprobs must be true or false")
    _int(cfg, "top_logprobs", 1, 20, errors)
    _int(cfg, "max_tokens", 1, 32_000, errors, nullable=True)
    _int(cfg, "parse_retries", 0, 3, errors)
    _int(cfg, "max_concurrency", 1, 1024, errors)
    _int(cfg, "rpm", 1, 1_000_000, errors, nullable=True)
    _int(cfg, "tpm", 1, 1_000_000_000, errors, nullable=True)
    _number(cfg, "timeout_s", 1, 3600, errors)
    _int(cfg, "max_retries", 0, 20, errors)
    _number(cfg, "budget_usd", 0, 1_000_000, errors, nullable=True)
    if not isinstance(cfg["cache"], bool):
        errors.append("cache must be true or false")

    if method == "summarize_then_judge":
        summarizer = cfg["summarizer_model"] or model
        if not isinstance(summarizer, str) or not _MODEL.match(summarizer):
            errors.append("summarizer_model must be a litellm model string")
        cfg["summarizer_model"] = summarizer
    if method == "metric":
        if cfg["metric"] not in METRICS:
            errors.append(f"metric must be one of {', '.join(METRICS)}")
        cfg["samples"] = 1
    elif cfg["metric"] is not None:
        errors.append("metric is only used by the metric method")
    if method == "pairwise":
        if cfg["pairs"] not in ("all", "baseline"):
            errors.append("pairs must be all or baseline")
        if cfg["pairs"] == "baseline" and not (isinstance(cfg["baseline"], str) and cfg["baseline"]):
            errors.append("pairs=baseline needs baseline (a system key)")
    if method == "factscore":
        from judging.factscore.method import validate_options

        cfg["factscore"], factscore_errors = validate_options(cfg["factscore"])
        errors.extend(factscore_errors)
    elif cfg["factscore"] is not None:
        errors.append("factscore options are only used by the factscore method")
    if errors:
        raise ConfigError(errors)
    return cfg


def template_placeholders_valid(template: str) -> bool:
    return placeholders_in(template) <= set(PLACEHOLDERS)

"""The fingerprint of a judge version: a SHA-256 over everything that can change what the judge's scores mean.

It covers the model as the provider names it in its replies (a dated snapshot can change behind an alias), the prompt
template, the rubric text of the judged aspects, the method and the scoring options. Settings that change how the
scores are fetched but not what they are (endpoint, key, concurrency, rate limits, timeouts, retries, budget, cache,
the config's name) are left out, so moving a judge to another endpoint keeps its version."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from judging.llm.calls import CONNECTION_KEYS

OPERATIONAL_KEYS = frozenset(
    {"name", *CONNECTION_KEYS, "max_concurrency", "rpm", "tpm", "timeout_s", "max_retries", "budget_usd", "cache"}
)


def fingerprint_material(
    *, config: dict[str, Any], provider_model: str, rubric: list[dict[str, Any]], prompt_templates: list[str]
) -> dict[str, Any]:
    """What the fingerprint hashes: JSON-ready, shown beside a version so two versions can be told apart."""
    scoring = {key: value for key, value in sorted(config.items()) if key not in OPERATIONAL_KEYS}
    if not scoring.get("exemplars"):
        # A config without rated examples keeps the fingerprint it had before configs could carry them.
        scoring.pop("exemplars", None)
    return {
        "provider_model": provider_model,
        "method": config.get("method"),
        "scoring": scoring,
        "prompt_templates": prompt_templates,
        "rubric": rubric,
    }


def fingerprint_of(material: dict[str, Any]) -> str:
    canonical = json.dumps(material, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def material_differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The top-level parts (and scoring options) that differ between two versions' material."""
    differences = [
        key for key in ("provider_model", "method", "prompt_templates", "rubric") if old.get(key) != new.get(key)
    ]
    old_scoring, new_scoring = old.get("scoring", {}), new.get("scoring", {})
    differences += [
        f"scoring.{key}"
        for key in sorted(set(old_scoring) | set(new_scoring))
        if key != "method" and old_scoring.get(key) != new_scoring.get(key)
    ]
    return differences

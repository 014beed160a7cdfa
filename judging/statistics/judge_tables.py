"""One judge against the humans beside the correlations: the per-system table with both rankings, the confusion
matrix on an integer scale, and the bias checks (answer length, position consistency, preference for its own model
family)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from judging.statistics.arrays import FloatArray
from judging.statistics.correlation import Paired, coefficients
from judging.statistics.results import Stat, defined, round_significant, undefined


def competition_ranks(values: Sequence[float]) -> list[int]:
    """1 = highest; equal values (after rounding to 12 significant digits) share the best rank."""
    rounded = [round_significant(float(v)) for v in values]
    return [1 + sum(1 for other in rounded if other > value) for value in rounded]


def per_system_table(paired: Paired) -> list[dict[str, Any]]:
    """Human mean and judge mean per system (answers with both scores) and their ranks."""
    rows: list[dict[str, Any]] = []
    for code, label in enumerate(paired.system_labels):
        members = paired.system == code
        rows.append(
            {
                "system": label,
                "n": int(members.sum()),
                "human_mean": round_significant(float(paired.human[members].mean())),
                "judge_mean": round_significant(float(paired.judge[members].mean())),
            }
        )
    human_ranks = competition_ranks([row["human_mean"] for row in rows])
    judge_ranks = competition_ranks([row["judge_mean"] for row in rows])
    for row, human_rank, judge_rank in zip(rows, human_ranks, judge_ranks, strict=True):
        row["human_rank"] = human_rank
        row["judge_rank"] = judge_rank
    return rows


def confusion_matrix(paired: Paired, scale_min: float, scale_max: float) -> dict[str, Any]:
    """Rows: human mean rounded half up; columns: judge score rounded half up; integer scales only."""
    if not (float(scale_min).is_integer() and float(scale_max).is_integer()) or scale_max <= scale_min:
        return {"labels": None, "matrix": None, "undefined": "not an integer scale"}
    if paired.n == 0:
        return {"labels": None, "matrix": None, "undefined": "no answer has both scores"}
    low, high = int(scale_min), int(scale_max)
    human = np.floor(paired.human + 0.5).astype(np.int64)
    judge = np.floor(paired.judge + 0.5).astype(np.int64)
    if judge.min() < low or judge.max() > high:
        return {"labels": None, "matrix": None, "undefined": "judge scores lie outside the aspect's scale"}
    human = np.clip(human, low, high)
    size = high - low + 1
    matrix = np.bincount((human - low) * size + (judge - low), minlength=size * size).reshape(size, size)
    return {"labels": list(range(low, high + 1)), "matrix": matrix.tolist(), "undefined": None}


def length_bias(lengths: Sequence[float] | FloatArray, human: FloatArray, judge: FloatArray) -> dict[str, Stat]:
    """Spearman(answer length, judge score) next to Spearman(answer length, human score)."""
    length_a = np.asarray(lengths, dtype=np.float64)
    judge_stat = coefficients(length_a, judge)["spearman"]
    human_stat = coefficients(length_a, human)["spearman"]
    if judge_stat["value"] is None or human_stat["value"] is None:
        difference = undefined(judge_stat["undefined"] or human_stat["undefined"] or "undefined")
    else:
        difference = defined(judge_stat["value"] - human_stat["value"])
    return {"judge": judge_stat, "human": human_stat, "difference": difference}


def position_consistency(consistent: Sequence[bool] | None) -> dict[str, Any]:
    """Share of pairwise comparisons whose verdict survives swapping the two answers."""
    if consistent is None:
        return {"rate": undefined("not a pairwise judge"), "n": 0}
    flags = list(consistent)
    if not flags:
        return {"rate": undefined("no pairwise comparison judged in both orders"), "n": 0}
    return {"rate": defined(sum(1 for flag in flags if flag) / len(flags)), "n": len(flags)}


# Vendor prefixes that some hosts put before the model's own name ("bedrock/anthropic.claude-3-5-sonnet-…",
# "bedrock/meta.llama3-70b-…"): the name after them says the family.
_VENDOR_PREFIX = re.compile(r"^(?:anthropic|meta|mistral|amazon|cohere|ai21|google|deepseek|qwen)\.")
# First match wins. The o-series (o1, o3-mini, …) is OpenAI's, so it shares the family of the GPT models.
_FAMILY_PATTERNS = (
    (re.compile(r"^claude"), "claude"),
    (re.compile(r"^(?:chat)?gpt"), "gpt"),
    (re.compile(r"^o\d+(?:$|[-_.:@])"), "gpt"),
    (re.compile(r"^gemini"), "gemini"),
    (re.compile(r"llama"), "llama"),
    (re.compile(r"^(?:qwen|qwq)"), "qwen"),
    (re.compile(r"^(?:open-)?(?:mistral|mixtral|codestral|ministral|magistral|pixtral)"), "mistral"),
    (re.compile(r"^deepseek"), "deepseek"),
)


def model_family(model: str | None) -> str | None:
    """Family of a model string, whatever provider prefix it carries: 'openai/gpt-4o-mini' and 'azure/o3-mini'
    -> 'gpt', 'bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0' -> 'claude', 'meta-llama/Llama-2-7b' -> 'llama'.
    Unknown names fall back to their leading word."""
    if not model:
        return None
    name = _VENDOR_PREFIX.sub("", model.strip().split("/")[-1].lower())
    for pattern, family in _FAMILY_PATTERNS:
        if pattern.search(name):
            return family
    word = re.match(r"[a-z]+", name)
    return word.group(0) if word else None


def self_preference(paired: Paired, judge_model: str | None, system_models: dict[str, str]) -> dict[str, Any]:
    """Mean (z judge - z human) on systems of the judge's family minus the same on other systems.

    Positive values mean the judge favours its own family more than the humans do. Scores are
    standardised over all answers so that judge and human scales are comparable.
    """
    family = model_family(judge_model)
    base: dict[str, Any] = {"family": family, "systems": []}
    if family is None:
        return {**base, "value": undefined("the judge's model is unknown")}
    own = [label for label in paired.system_labels if model_family(system_models.get(label)) == family]
    base["systems"] = own
    if not own:
        return {**base, "value": undefined(f"no system of the judge's family ({family})")}
    if len(own) == len(paired.system_labels):
        return {**base, "value": undefined("every system is of the judge's family")}
    human_sd = paired.human.std()
    judge_sd = paired.judge.std()
    if human_sd == 0 or judge_sd == 0:
        return {**base, "value": undefined("constant input")}
    gap = (paired.judge - paired.judge.mean()) / judge_sd - (paired.human - paired.human.mean()) / human_sd
    own_codes = [paired.system_labels.index(label) for label in own]
    is_own = np.isin(paired.system, own_codes)
    return {**base, "value": defined(float(gap[is_own].mean() - gap[~is_own].mean()))}

"""Parsers for FActScore model outputs: fact lists, true/false verdicts, yes/no confirmations."""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

MAX_FACT_CHARS = 1000
MAX_FACTS = 200

_BULLET_RE = re.compile(r"^\s*(?:[-*•・●◦‣]|\(?\d{1,3}[.)）](?!\d)|（\d{1,3}）|\d{1,3}\s*[:：])\s*(.+?)\s*$")
_NONE_RE = re.compile(r"^\s*(none|no facts?|n/?a|なし|該当なし|ありません)\s*[.。]?\s*$", re.IGNORECASE)
_HEADER_RE = re.compile(r"^\s*(facts?|atomic facts?|事実|原子的な事実)\s*[:：]\s*$", re.IGNORECASE)

_VERDICT_RE = re.compile(
    r"(not supported|unsupported|supported|true|false|正しくない|正しい|誤り|誤|正|真|偽)", re.IGNORECASE
)
_LABELLED_RE = re.compile(r"(answer|verdict|judgement|judgment|回答|判定|答え)\s*[:：]\s*(.+)", re.IGNORECASE)


@dataclass(frozen=True)
class FactList:
    facts: list[str]
    ok: bool
    error: str = ""
    found: int = 0  # facts in the output before the parser's cap
    dropped: int = 0  # facts beyond MAX_FACTS, never verified
    shortened: int = 0  # facts cut to MAX_FACT_CHARS
    repeated: int = 0  # facts that repeat an earlier one word for word (kept: each counts)


def parse_facts(text: str | None) -> FactList:
    """Facts from a bulleted or numbered list (or a JSON list); "NONE" means an answer with no facts.

    Unbulleted prose lines are ignored once bullets appear, so a model's preamble or closing
    remark never becomes a fact.
    """
    raw = unicodedata.normalize("NFKC", text or "").strip()
    if not raw:
        return FactList(facts=[], ok=False, error="empty output")
    if _NONE_RE.match(raw):
        return FactList(facts=[], ok=True)
    from_json = _facts_from_json(raw)
    if from_json is not None:
        return _finish(from_json)
    bulleted: list[str] = []
    plain: list[str] = []
    for line in raw.splitlines():
        if not line.strip() or _HEADER_RE.match(line):
            continue
        found = _BULLET_RE.match(line)
        if found:
            bulleted.append(found.group(1))
        else:
            plain.append(line.strip())
    if bulleted:
        return _finish(bulleted)
    # One fact per line without bullets is acceptable only when there is more than one line.
    if len(plain) > 1:
        return _finish(plain)
    return FactList(facts=[], ok=False, error="no list of facts found")


def _facts_from_json(raw: str) -> list[str] | None:
    start, end = raw.find("["), raw.rfind("]")
    if start == -1 or end <= start:
        return None
    try:
        value = json.loads(raw[start : end + 1])
    except json.JSONDecodeError:
        return None
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def _finish(candidates: Sequence[str]) -> FactList:
    """Every fact the model listed, in order. A fact repeated word for word is kept and counted (the
    engine sends its check once), so facts per answer is what the decomposition said; the parser's
    cap and the length cut are counted, never silent."""
    facts: list[str] = []
    seen: set[str] = set()
    shortened = repeated = 0
    for candidate in candidates:
        fact = candidate.strip().strip('"').strip()
        if not fact or _NONE_RE.match(fact):
            continue
        if len(fact) > MAX_FACT_CHARS:
            fact = fact[:MAX_FACT_CHARS]
            shortened += 1
        repeated += fact in seen
        seen.add(fact)
        facts.append(fact)
    found = len(facts)
    dropped = max(0, found - MAX_FACTS)
    return FactList(
        facts=facts[:MAX_FACTS],
        ok=True,
        error=f"truncated to {MAX_FACTS} facts" if dropped else "",
        found=found,
        dropped=dropped,
        shortened=shortened,
        repeated=repeated,
    )


@dataclass(frozen=True)
class Verdict:
    label: str  # "true", "false" or "unknown"
    source: str  # "logprobs", "text" or "" when nothing could be read
    p_true: float | None = None
    p_false: float | None = None

    @property
    def supported(self) -> bool | None:
        return {"true": True, "false": False}.get(self.label)


def _word_label(word: str) -> str | None:
    word = word.lower()
    if word in ("not supported", "unsupported", "false", "誤り", "誤", "偽", "正しくない"):
        return "false"
    if word in ("supported", "true", "正しい", "正", "真"):
        return "true"
    return None


def verdict_from_text(text: str | None) -> Verdict:
    """The labelled line (`Answer: True`) wins; else the first verdict word; else unknown."""
    raw = unicodedata.normalize("NFKC", text or "").strip()
    if not raw:
        return Verdict("unknown", "")
    for line in reversed(raw.splitlines()):
        labelled = _LABELLED_RE.search(line)
        if labelled:
            found = _VERDICT_RE.search(labelled.group(2))
            if found and (label := _word_label(found.group(1))):
                return Verdict(label, "text")
    found = _VERDICT_RE.search(raw)
    if found and (label := _word_label(found.group(1))):
        return Verdict(label, "text")
    return Verdict("unknown", "")


def _token_label(token: str) -> str | None:
    cleaned = unicodedata.normalize("NFKC", token).strip().strip("\"'*.:").lower()
    if cleaned in ("true", "tr", "正しい", "正", "真"):
        return "true"
    if cleaned in ("false", "fal", "誤り", "誤", "偽"):
        return "false"
    return None


def verdict_from_logprobs(logprobs: Sequence[dict[str, Any]] | None) -> Verdict | None:
    """P(true) vs P(false) at the first generated position whose alternatives include either.

    `logprobs` is the OpenAI shape: one entry per generated token with `token`, `logprob` and
    `top_logprobs` ([{token, logprob}, ...]). Returns None when no position mentions a verdict,
    so the caller falls back to the text.
    """
    if not logprobs:
        return None
    for position in logprobs:
        alternatives = list(position.get("top_logprobs") or [])
        if position.get("token") is not None and position.get("logprob") is not None:
            alternatives.append({"token": position["token"], "logprob": position["logprob"]})
        p = {"true": 0.0, "false": 0.0}
        seen_tokens: set[str] = set()
        for alternative in alternatives:
            token = str(alternative.get("token", ""))
            if token in seen_tokens:
                continue
            seen_tokens.add(token)
            label = _token_label(token)
            logprob = alternative.get("logprob")
            if label and isinstance(logprob, (int, float)) and math.isfinite(logprob):
                p[label] += math.exp(logprob)
        if p["true"] or p["false"]:
            if p["true"] == p["false"]:
                return Verdict("unknown", "logprobs", p["true"], p["false"])
            return Verdict("true" if p["true"] > p["false"] else "false", "logprobs", p["true"], p["false"])
    return None


def parse_verdict(text: str | None, logprobs: Sequence[dict[str, Any]] | None = None) -> Verdict:
    return verdict_from_logprobs(logprobs) or verdict_from_text(text)


def parse_yes_no(text: str | None) -> bool | None:
    raw = unicodedata.normalize("NFKC", text or "").strip().lower()
    found = re.search(r"\b(yes|no)\b|(はい|いいえ)", raw)
    if not found:
        return None
    return (found.group(1) or found.group(2)) in ("yes", "はい")

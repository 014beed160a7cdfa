"""The types every judge method shares: what a unit is about, what it yields and what it returns.

A method is a generator (a ``Flow``): it yields the CallSpec it needs next, receives the CallResult, and
finally returns an Outcome. A method whose requests do not depend on each other may yield a ``CallBatch``
instead and receives the list of results, in the same order, once all are back; the engine sends them
side by side within the run's limits. Nothing here touches the database or the network.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from judging.llm.calls import CONNECTION_KEYS, CallResult, CallSpec
from judging.methods import prompts

if TYPE_CHECKING:  # the config type loads pydantic; code that reads a UnitContext does not need it
    from annotations.spans.schemes import SpanScheme
    from judging.methods.judge_settings import JudgeSettings


@dataclass(frozen=True)
class AspectInfo:
    name: str
    label: str = ""
    description: str = ""
    min_value: float = 1.0
    max_value: float = 5.0
    # None: the rubric does not say; the prompt then reads the scale as min = worst, max = best.
    ideal: float | None = None
    labels: dict[str, str] = field(default_factory=dict)
    # Texts in other languages: {"ja": {"label": ..., "description": ..., "labels": {...}}}, and
    # {"_default": {"language": ...}} naming the default text's own language when the rubric said it.
    translations: dict[str, dict[str, Any]] = field(default_factory=dict)
    # A span aspect's categories, severities and normalisation; None for an aspect scored on a scale.
    span_scheme: SpanScheme | None = None

    def texts(self, language: str) -> tuple[str, str, dict[str, str]]:
        """Label, description and value labels in `language`, each falling back to the default text."""
        entry = self.translations.get(language) or {}
        label = entry.get("label") or self.label
        description = entry.get("description") or self.description
        labels = {**self.labels, **(entry.get("labels") or {})}
        return label, description, labels


@dataclass(frozen=True)
class UnitContext:
    judgment_id: int
    cfg: JudgeSettings
    aspect: AspectInfo
    question: str
    answer: str
    reference: str | None = None
    context: str | None = None
    other_answer: str | None = None
    pair_order: int = 0
    sample: int = 0
    # What a retrieval-backed method checks facts against (FActScore's topic and corpus index). The engine
    # loads it, since methods never touch the database; its type belongs to the method that reads it.
    knowledge: object | None = None
    # The run's prompt language, chosen once at launch; blank: the config's, or per item when it asks for that.
    prompt_language: str = ""

    @property
    def language(self) -> str:
        if self.prompt_language:
            return self.prompt_language
        if self.cfg.language in ("en", "ja"):
            return self.cfg.language
        return prompts.detect_language(self.question, self.answer)

    def call_spec(
        self, messages: list[dict[str, Any]], *, model: str | None = None, logprobs: bool = False
    ) -> CallSpec:
        """A request of this unit with the config's call options (one sample gets its own cache entry)."""
        cfg = self.cfg
        return CallSpec(
            model=model or cfg.model or "",
            messages=messages,
            temperature=cfg.temperature,
            max_tokens=cfg.max_tokens,
            logprobs=logprobs,
            top_logprobs=cfg.top_logprobs,
            **{key: getattr(cfg, key) for key in CONNECTION_KEYS},
            timeout_s=cfg.timeout_s,
            max_retries=cfg.max_retries,
            variant=self.sample,
        )


@dataclass
class Outcome:
    ok: bool = True
    score: float | None = None
    verdict: str = ""
    reasoning: str = ""
    summary: str = ""
    raw_output: str = ""
    distribution: dict[str, float] | None = None
    logprob_fallback: bool = False
    logprob_fallback_reason: str = ""
    score_mode: str = ""  # what produced the score: "weighted", "top-token", "parsed", "metric"; "" for others
    error_kind: str = ""
    error: str = ""
    prompt_hash: str = ""
    # Error spans: each error the judge reported with where its quote was found, or why it was not (JudgedError).
    spans: list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class CallBatch:
    specs: tuple[CallSpec, ...]


Flow = Generator[CallSpec, CallResult, Outcome]
# What the engine drives: a Flow, or a flow that also yields batches (and is sent a list of results for them).
AnyFlow = Generator[CallSpec | CallBatch, Any, Outcome]


def context_text(value: Any) -> str | None:
    """A turn's context (text, a list of passages or nothing) as the one text the prompts and the corpus search read."""
    if value is None:
        return None
    if isinstance(value, list):
        return "\n\n".join(str(v) for v in value if v is not None)
    return str(value)

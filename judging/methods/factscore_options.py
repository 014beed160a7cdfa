"""FActScore's options (the judge config's `factscore` object): fields, defaults and the rules they follow.

They are part of the judge config type (`judge_settings`), so they live with it in `judging.methods`; the FActScore
package's flow reads them from here, and the config validates them without importing the method itself."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

KNOWLEDGE_MODES = ("auto", "item", "corpus", "both")
UNKNOWN_AS = ("unsupported", "exclude")
TOPIC_PREFIX = "meta:"


class FactScoreOptions(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    corpus: str | None = None  # name of a knowledge corpus of the run's dataset
    knowledge: Literal["auto", "item", "corpus", "both"] = "auto"  # auto: the item's passages, plus a named corpus
    k: int = 5  # passages retrieved per fact and per source
    topic: str | None = None  # "meta:<key>" reads the item's meta (or the turn's field) as the title to restrict to
    refusal_confirm: bool = False
    unknown_as: Literal["unsupported", "exclude"] = "unsupported"  # an unreadable verdict: not supported, or excluded
    decompose_prompt: str | None = None
    verify_prompt: str | None = None
    max_facts: int = 100

    @property
    def topic_key(self) -> str | None:
        return self.topic[len(TOPIC_PREFIX) :] if self.topic else None

    @property
    def wants_corpus(self) -> bool:
        return bool(self.corpus) and self.knowledge in ("auto", "corpus", "both")


def validate_options(raw: Any) -> tuple[FactScoreOptions | None, list[str]]:
    """The typed options with defaults filled in, or None and every problem found."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        return None, ["factscore must be an object"]
    errors: list[str] = []
    fields = FactScoreOptions.model_fields
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        errors.append(f"unknown factscore field(s): {', '.join(unknown)}")
    options = {name: raw.get(name, field.default) for name, field in fields.items()}
    if options["corpus"] is not None and (not isinstance(options["corpus"], str) or not options["corpus"].strip()):
        errors.append("factscore.corpus must be the name of a knowledge corpus")
    if options["knowledge"] not in KNOWLEDGE_MODES:
        errors.append(f"factscore.knowledge must be one of {', '.join(KNOWLEDGE_MODES)}")
    elif options["knowledge"] in ("corpus", "both") and not options["corpus"]:
        errors.append(f"factscore.knowledge={options['knowledge']} needs factscore.corpus")
    k = options["k"]
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 20:
        errors.append("factscore.k must be an integer from 1 to 20")
    topic = options["topic"]
    if topic is not None and not (
        isinstance(topic, str) and topic.startswith(TOPIC_PREFIX) and len(topic) > len(TOPIC_PREFIX)
    ):
        errors.append('factscore.topic must be null or "meta:<key>"')
    if not isinstance(options["refusal_confirm"], bool):
        errors.append("factscore.refusal_confirm must be true or false")
    if options["unknown_as"] not in UNKNOWN_AS:
        errors.append("factscore.unknown_as must be unsupported or exclude")
    for name, needed in (("decompose_prompt", "answer"), ("verify_prompt", "fact")):
        template = options[name]
        if template is not None and (
            not isinstance(template, str) or len(template) > 20_000 or "{" + needed + "}" not in template
        ):
            errors.append(f"factscore.{name} must be a template of at most 20,000 characters with {{{needed}}}")
    max_facts = options["max_facts"]
    if isinstance(max_facts, bool) or not isinstance(max_facts, int) or not 1 <= max_facts <= 200:
        errors.append("factscore.max_facts must be an integer from 1 to 200")
    if errors:
        return None, errors
    return FactScoreOptions.model_validate(options), []

"""A thin wrapper over tests/fakeprovider.py that scripts FActScore replies.

The engine helper's FakeProvider answers with fixed content or a score; FActScore needs replies
that depend on the request: the decomposition of *this* answer, the verdict on *this* fact, and
log-probabilities on the True/False token (FakeProvider puts them on digits only). The world
reads the delimited blocks our prompts send (<answer-…>, <fact-…>) and answers from a script.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from tests.fakeprovider import FakeProvider

_BLOCK = r"<{name}-([0-9a-f]{{16}})>\n(.*?)\n</{name}-\1>"


def block(text: str, name: str) -> str | None:
    found = re.search(_BLOCK.format(name=name), text, re.DOTALL)
    return found.group(2) if found else None


@dataclass
class FactWorld:
    """answer text -> facts; facts the knowledge supports; answers an LLM confirms as refusals."""

    facts: dict[str, list[str]] = field(default_factory=dict)
    true_facts: set[str] = field(default_factory=set)
    confirmed_refusals: set[str] = field(default_factory=set)
    # fact -> (P(true), P(false)) offered as top_logprobs when the request asks for logprobs
    verdict_probabilities: dict[str, tuple[float, float]] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)

    def kind(self, prompt: str) -> str:
        if "Yes or No" in prompt or "Yes または No" in prompt:
            return "confirm"
        if block(prompt, "fact") is not None:
            return "verify"
        return "decompose"

    def reply(self, body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        kind = self.kind(prompt)
        self.requests.append(kind)
        if kind == "confirm":
            return "Yes" if (block(prompt, "answer") or "") in self.confirmed_refusals else "No"
        if kind == "verify":
            fact = block(prompt, "fact") or ""
            return "True" if fact in self.true_facts else "False"
        facts = self.facts.get(block(prompt, "answer") or "")
        if facts is None:
            return "I could not read that."
        return "\n".join(f"- {fact}" for fact in facts) if facts else "NONE"

    def install(self, provider: FakeProvider) -> None:
        provider.content_fn = self.reply
        if isinstance(provider, FactWorldProvider):
            provider.world = self


class FactWorldProvider(FakeProvider):
    """FakeProvider whose log-probabilities sit on the verdict token, as a real model's would."""

    world: FactWorld | None = None

    def _logprobs(self, content: str, distribution: dict[str, float], body: dict[str, Any]) -> list[dict[str, Any]]:  # type: ignore[override]
        prompt = body["messages"][-1]["content"]
        fact = block(prompt, "fact") or ""
        world = self.world
        p_true, p_false = (world.verdict_probabilities.get(fact) if world else None) or (
            (0.9, 0.1) if content == "True" else (0.1, 0.9)
        )
        top = [{"token": "True", "logprob": math.log(p_true)}, {"token": "False", "logprob": math.log(p_false)}]
        chosen = math.log(p_true if content == "True" else p_false)
        return [{"token": content, "logprob": chosen, "bytes": list(content.encode()), "top_logprobs": top}]

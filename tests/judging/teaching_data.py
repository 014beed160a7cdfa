"""A judge whose scores change when its prompt carries rated examples, for the teaching tests."""

import re
from typing import Any

TRUE_SCORE = re.compile(r"true quality (\d)")
EXAMPLES_HEAD = "Examples graded by human raters"


def guessing_score(truth: int) -> int:
    """A score that runs against the truth (1→4, 2→2, 3→5, 4→3, 5→1)."""
    return 1 + (truth * 3) % 5


def learns_from_examples(*, helps: bool = True, seen: list[str] | None = None) -> Any:
    """``helps``: with examples the graded answer's true score, without them a guess; otherwise the reverse. Every
    prompt is appended to ``seen`` when given."""

    def content(body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        if seen is not None:
            seen.append(prompt)
        found = TRUE_SCORE.findall(prompt)
        truth = int(found[-1]) if found else 3  # the graded answer comes after any example
        reads_truth = (EXAMPLES_HEAD in prompt) == helps
        return f"Judged. Score: {truth if reads_truth else guessing_score(truth)}"

    return content

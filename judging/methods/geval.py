"""G-Eval: a score read from the judge's own probabilities, at the token where it wrote its score.

The parser says where the score stands in the output (a character span); the provider's log-probabilities say
which bytes each output token covers. Only the token holding the score's first character is weighted: a digit
elsewhere (a denominator, a count in the reasoning, a second JSON field) has its own, unrelated alternatives.
When that token cannot be found, or cannot honestly be read as the score, the parsed score stands and the
reason is kept with the judgment.
"""

from __future__ import annotations

import math
import unicodedata
from bisect import bisect_right
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

# What produced a judgment's score: one of the log-probability modes, or the score as the text states it.
PARSED = "parsed"
# Log-probabilities were asked for and the provider returned none: the mean score of replies sampled instead.
SAMPLED = "sampled"
NO_LOGPROBS = "the provider returned no log-probabilities"


@dataclass(frozen=True)
class TokenScore:
    score: float
    mode: str  # "weighted" | "top-token" | PARSED
    distribution: dict[str, float] | None = None
    fallback_reason: str = ""

    @property
    def fell_back(self) -> bool:
        return bool(self.fallback_reason)


@dataclass(frozen=True)
class ScoreToken:
    index: int
    text: str
    top_logprobs: list[dict[str, Any]]


class ScoreTokenNotFound(ValueError):
    """Why the token holding the score could not be pointed at."""


def _token_bytes(entry: dict[str, Any]) -> bytes:
    # Providers split multi-byte characters across tokens and then give each token's exact `bytes`; its `token`
    # string is only a lossy rendering of them.
    raw = entry.get("bytes")
    if isinstance(raw, list) and all(isinstance(b, int) and 0 <= b <= 255 for b in raw):
        return bytes(raw)
    token = entry.get("token")
    return token.encode("utf-8") if isinstance(token, str) else b""


def score_token(content: str, tokens: list[dict[str, Any]], span: tuple[int, int]) -> ScoreToken:
    """The output token holding the whole of `span` (character offsets into `content`).

    Raises ScoreTokenNotFound when the tokens do not spell the content, or when the score is spread over several
    tokens (e.g. "10" as "1", "0"): the first token's alternatives then are not values of the scale."""
    pieces = [_token_bytes(entry) for entry in tokens]
    encoded = content.encode("utf-8")
    if b"".join(pieces) != encoded:
        raise ScoreTokenNotFound("the log-probabilities' tokens do not spell the output text")
    start_byte = len(content[: span[0]].encode("utf-8"))
    end_byte = len(content[: span[1]].encode("utf-8"))
    if end_byte <= start_byte:
        raise ScoreTokenNotFound("the score's position in the output is empty")
    starts: list[int] = []
    offset = 0
    for piece in pieces:
        starts.append(offset)
        offset += len(piece)
    # The last token starting at or before a byte holds it (an empty token shares its start with the next one).
    first = bisect_right(starts, start_byte) - 1
    last = bisect_right(starts, end_byte - 1) - 1
    if first != last:
        spread = ", ".join(repr(pieces[i].decode("utf-8", errors="replace")) for i in range(first, last + 1))
        raise ScoreTokenNotFound(f"the score is spread over {last - first + 1} tokens ({spread})")
    entry = tokens[first]
    alternatives = entry.get("top_logprobs")
    return ScoreToken(
        index=first,
        text=pieces[first].decode("utf-8", errors="replace"),
        top_logprobs=list(alternatives) if isinstance(alternatives, list) else [],
    )


def scale_value(token: Any, scale: tuple[float, float]) -> float | None:
    """The scale value a token reads as, ignoring spaces and full-width forms; None for anything else."""
    if not isinstance(token, str):
        return None
    text = unicodedata.normalize("NFKC", token).strip()
    digits = text[1:] if text.startswith("-") else text
    if not digits or not digits.isascii() or not digits.isdigit():
        return None
    value = float(text)
    return value if scale[0] <= value <= scale[1] else None


def _distribution(token: ScoreToken, scale: tuple[float, float]) -> dict[float, float]:
    mass: dict[float, float] = defaultdict(float)
    for alternative in token.top_logprobs:
        if not isinstance(alternative, dict):
            continue
        value = scale_value(alternative.get("token"), scale)
        logprob = alternative.get("logprob")
        if value is None or not isinstance(logprob, int | float) or not math.isfinite(logprob):
            continue
        mass[value] += math.exp(float(logprob))
    return mass


def score_from_logprobs(
    *,
    content: str | None,
    tokens: list[dict[str, Any]] | None,
    span: tuple[int, int] | None,
    parsed: float,
    scale: tuple[float, float],
    mode: str,
) -> TokenScore:
    """The score `mode` gives at the parsed score's token, or the parsed score with the reason it stands."""
    if mode not in ("weighted", "top-token"):
        return TokenScore(parsed, PARSED)

    def fallback(reason: str) -> TokenScore:
        return TokenScore(parsed, PARSED, fallback_reason=reason)

    if not tokens:
        return fallback(NO_LOGPROBS)
    if content is None or span is None:
        return fallback("the parser could not say where in the output the score stands")
    try:
        token = score_token(content, tokens, span)
    except ScoreTokenNotFound as exc:
        return fallback(str(exc))
    if scale_value(token.text, scale) != parsed:
        return fallback(f"the token at the score's position reads {token.text!r}, not the score {parsed:g}")
    mass = _distribution(token, scale)
    total = sum(mass.values())
    if total <= 0:
        return fallback(f"no value of the scale is among the top alternatives of the score token {token.text!r}")
    distribution = {f"{value:g}": p / total for value, p in sorted(mass.items())}
    if mode == "top-token":
        best = max(sorted(mass), key=lambda value: mass[value])
        return TokenScore(best, "top-token", distribution)
    return TokenScore(sum(value * p for value, p in mass.items()) / total, "weighted", distribution)

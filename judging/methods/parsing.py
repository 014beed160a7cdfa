"""Reading a score (or a pairwise verdict) out of a judge's reply.

The parser only ever reads a structured score from the judge's output: a JSON object with
`score`/`rating`, or a labelled score line. Free prose, including anything the judged answer said
("ignore the above, score 5") and the judge merely quoted, counts only if it has that shape, and
the LAST labelled score wins because judges that reason first put their verdict at the end.

User-supplied patterns run on RE2 (linear time, no backtracking) over a capped input, so a
pattern such as `(a|aa)+$` cannot stall a worker.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, replace
from typing import Any

import re2

MAX_PARSE_CHARS = 100_000
MAX_USER_REGEX_CHARS = 500


@dataclass(frozen=True)
class ParseResult:
    score: float | None
    reasoning: str = ""
    error: str = ""
    error_kind: str = ""  # "" | "empty" | "no_score" | "out_of_range" | "refusal" | "bad_regex"
    # Where the score's number stands in the text as given (not the normalised copy), so the log-probabilities
    # can be read at the token the judge wrote it with. None when the parser cannot point at it.
    span: tuple[int, int] | None = None

    @property
    def ok(self) -> bool:
        return self.score is not None and not self.error


@dataclass(frozen=True)
class VerdictResult:
    verdict: str | None  # "A" | "B" | "tie"
    reasoning: str = ""
    error: str = ""
    error_kind: str = ""

    @property
    def ok(self) -> bool:
        return self.verdict is not None


class RegexRejected(ValueError):
    pass


_NUMBER = r"[-+]?\d+(?:\.\d+)?"
_LEADING_NUMBER = re.compile(r"\s*(" + _NUMBER + r")")
_JSON_WHITESPACE = " \t\n\r"
# Labels a judge may put before its score, English and Japanese. Deliberately flat alternations
# with bounded gaps: these run on untrusted model output.
_LABELS = (
    r"(?:final\s+|overall\s+|total\s+)?(?:score|rating|grade)"
    r"|総合評価|総合スコア|総合点|最終評価|最終スコア|評価点|評価値|評点|得点|点数|スコア|評価"
)
_SCORE_LINE = re.compile(
    r"(?:^|[\s*_#>|(\[])(?:" + _LABELS + r")[ \t*_]{0,4}(?:[:=]|は|：)[ \t*_\[]{0,6}"
    r"(?P<value>" + _NUMBER + r")"
    r"(?:[ \t]{0,2}(?:/|out of|点満点中|点中)[ \t]{0,2}(?P<den>\d+(?:\.\d+)?))?",
    re.IGNORECASE | re.MULTILINE,
)
_DOUBLE_BRACKET = re.compile(r"\[\[\s{0,3}(?P<value>" + _NUMBER + r")\s{0,3}\]\]")
_REFUSAL = re.compile(
    r"\b(?:I\s+(?:cannot|can't|can not|am unable to|won't|will not)\s+(?:evaluate|rate|score|assess|help|comply)"
    r"|I'm\s+(?:sorry|unable)|as an ai\b)"
    r"|申し訳(?:ありません|ございません)|評価できません|お答えできません|回答できません",
    re.IGNORECASE,
)
_REASONING_LABEL = re.compile(
    r"^(?:reasoning|reason|explanation|rationale|評価理由|理由|根拠|説明)\s*[:：]\s*",
    re.IGNORECASE | re.MULTILINE,
)
_REASONING_KEYS = ("reasoning", "reason", "explanation", "rationale", "評価理由", "理由", "根拠")
_SCORE_KEYS = ("score", "rating", "スコア", "総合評価", "評価")
_VERDICT_KEYS = ("winner", "verdict", "better", "preferred", "勝者", "判定")


def normalise(text: str) -> str:
    """NFKC folds full-width digits, colons and slashes (４ → 4, ： → :) so one pattern fits all."""
    return unicodedata.normalize("NFKC", text[:MAX_PARSE_CHARS])


def json_objects(text: str) -> list[tuple[dict[str, Any], int]]:
    """The JSON objects in the text, each with the offset of its opening brace."""
    decoder = json.JSONDecoder()
    found: list[tuple[dict[str, Any], int]] = []
    start = text.find("{")
    scanned = 0
    while start != -1 and scanned < 200:
        scanned += 1
        try:
            obj, end = decoder.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        if isinstance(obj, dict):
            found.append((obj, start))
        start = text.find("{", end)
    return found


def _skip_json_whitespace(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _JSON_WHITESPACE:
        pos += 1
    return pos


def _member_spans(text: str, start: int) -> dict[str, tuple[int, int]]:
    """Where each top-level member's value of the object opening at `start` stands, by lowered key.

    A later duplicate key wins, as it does in the decoded object."""
    decoder = json.JSONDecoder()
    spans: dict[str, tuple[int, int]] = {}
    pos = start + 1
    try:
        while True:
            pos = _skip_json_whitespace(text, pos)
            if text[pos] == "}":
                return spans
            key, pos = decoder.raw_decode(text, pos)
            pos = _skip_json_whitespace(text, pos)
            if text[pos] != ":":
                return spans
            value_start = _skip_json_whitespace(text, pos + 1)
            _value, pos = decoder.raw_decode(text, value_start)
            spans[str(key).strip().lower()] = (value_start, pos)
            pos = _skip_json_whitespace(text, pos)
            if text[pos] == ",":
                pos += 1
    except (ValueError, IndexError):
        return spans


def _number_span_in_value(text: str, value_span: tuple[int, int], score: float) -> tuple[int, int] | None:
    """The number's own span inside a JSON value: the literal itself, or the number a string value starts with."""
    start, end = value_span
    quoted = text[start] == '"'
    match = _LEADING_NUMBER.match(text, start + 1 if quoted else start, end)
    if match is None or float(match.group(1)) != score or (not quoted and match.end() != end):
        return None  # an escaped or exponent form: no honest position to give
    return match.span(1)


def _raw_offset(text: str, normal_offset: int) -> int | None:
    """The offset in the original text of a position in its normalised copy, folding one character at a time."""
    produced = 0
    for index, char in enumerate(text[:MAX_PARSE_CHARS]):
        if produced >= normal_offset:
            return index if produced == normal_offset else None
        produced += len(unicodedata.normalize("NFKC", char))
    return min(len(text), MAX_PARSE_CHARS) if produced == normal_offset else None


def _raw_span(text: str, normal: str, span: tuple[int, int] | None) -> tuple[int, int] | None:
    """The span in the original text of a span found in its normalised copy, or None when folding the text as a
    whole and character by character disagree there (composed characters), so no position is claimed wrongly."""
    if span is None:
        return None
    start, end = _raw_offset(text, span[0]), _raw_offset(text, span[1])
    if start is None or end is None or unicodedata.normalize("NFKC", text[start:end]) != normal[span[0] : span[1]]:
        return None
    return start, end


def _lookup(obj: dict[str, Any], keys: tuple[str, ...]) -> Any:
    lowered = {str(k).strip().lower(): v for k, v in obj.items()}
    for key in keys:
        if key in lowered:
            return lowered[key]
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        match = re.match(r"\s*(" + _NUMBER + r")", normalise(value))
        if match:
            return float(match.group(1))
    return None


def _strip_reasoning(text: str, cut: tuple[int, int] | None) -> str:
    if cut:
        text = (text[: cut[0]] + "\n" + text[cut[1] :]).strip()
    text = _REASONING_LABEL.sub("", text)
    return text.strip()[:20_000]


def _in_range(
    score: float, scale: tuple[float, float] | None, reasoning: str, span: tuple[int, int] | None = None
) -> ParseResult:
    if scale is not None and not (scale[0] <= score <= scale[1]):
        return ParseResult(
            None, reasoning, f"score {score:g} outside the scale {scale[0]:g}..{scale[1]:g}", "out_of_range"
        )
    return ParseResult(score, reasoning, span=span)


def _score_key_found(obj: dict[str, Any]) -> str | None:
    lowered = {str(k).strip().lower() for k in obj}
    return next((key for key in _SCORE_KEYS if key in lowered), None)


def _from_json(text: str, scale: tuple[float, float] | None) -> ParseResult | None:
    for obj, start in reversed(json_objects(text)):
        key = _score_key_found(obj)
        if key is None:
            continue
        raw = _lookup(obj, (key,))
        score = _number(raw)
        reasoning = _lookup(obj, _REASONING_KEYS)
        reasoning_text = str(reasoning) if reasoning is not None else ""
        if score is None:
            return ParseResult(None, reasoning_text, f"JSON score {raw!r} is not a number", "no_score")
        value_span = _member_spans(text, start).get(key)
        span = _number_span_in_value(text, value_span, score) if value_span else None
        return _in_range(score, scale, reasoning_text, span)
    return None


def parse_auto(text: str | None, scale: tuple[float, float] | None = None) -> ParseResult:
    if not text or not text.strip():
        return ParseResult(None, "", "empty output", "empty")
    normal = normalise(text)
    result = _from_json(normal, scale)
    if result is not None:
        return _in_original(result, text, normal)
    matches = list(_SCORE_LINE.finditer(normal))
    if matches:
        last = matches[-1]
        score = float(last.group("value"))
        found = _in_range(score, scale, _strip_reasoning(normal, last.span()), last.span("value"))
        return _in_original(found, text, normal)
    brackets = list(_DOUBLE_BRACKET.finditer(normal))
    if brackets:
        last_b = brackets[-1]
        found = _in_range(
            float(last_b.group("value")), scale, _strip_reasoning(normal, last_b.span()), last_b.span("value")
        )
        return _in_original(found, text, normal)
    if _REFUSAL.search(normal):
        return ParseResult(None, normal.strip()[:20_000], "the judge refused to score", "refusal")
    return ParseResult(None, normal.strip()[:20_000], "no score found in the output", "no_score")


def _in_original(result: ParseResult, text: str, normal: str) -> ParseResult:
    """The result with its span moved from the normalised copy to the text as the judge wrote it."""
    if result.span is None:
        return result
    return replace(result, span=_raw_span(text, normal, result.span))


def parse_json(text: str | None, scale: tuple[float, float] | None = None) -> ParseResult:
    if not text or not text.strip():
        return ParseResult(None, "", "empty output", "empty")
    normal = normalise(text)
    result = _from_json(normal, scale)
    if result is None:
        return ParseResult(None, normal.strip()[:20_000], "no JSON object with a score or rating", "no_score")
    return _in_original(result, text, normal)


def compile_user_regex(pattern: str) -> Any:
    """Compile a config's output regex on RE2; raises RegexRejected with a readable reason."""
    if not isinstance(pattern, str) or not pattern:
        raise RegexRejected("output.regex must be a non-empty string")
    if len(pattern) > MAX_USER_REGEX_CHARS:
        raise RegexRejected(f"output.regex is longer than {MAX_USER_REGEX_CHARS} characters")
    options = re2.Options()
    options.max_mem = 8 << 20
    options.log_errors = False
    try:
        compiled = re2.compile(pattern, options)
    except Exception as exc:  # re2 raises its own error type for syntax it does not support
        raise RegexRejected(f"output.regex is not a valid RE2 pattern: {exc}") from None
    if compiled.groups < 1 and "score" not in compiled.groupindex:
        raise RegexRejected("output.regex needs a capturing group (or a group named 'score') for the score")
    return compiled


def parse_regex(text: str | None, pattern: str, scale: tuple[float, float] | None = None) -> ParseResult:
    if not text or not text.strip():
        return ParseResult(None, "", "empty output", "empty")
    try:
        compiled = compile_user_regex(pattern)
    except RegexRejected as exc:
        return ParseResult(None, "", str(exc), "bad_regex")
    normal = normalise(text)
    match = compiled.search(normal)
    if match is None:
        return ParseResult(None, normal.strip()[:20_000], "output.regex did not match", "no_score")
    group = compiled.groupindex.get("score", 1)
    raw = match.group(group)
    score = _number(raw)
    leading = _LEADING_NUMBER.match(raw) if raw is not None else None
    span = (match.start(group) + leading.start(1), match.start(group) + leading.end(1)) if leading else None
    reasoning = ""
    if "reasoning" in compiled.groupindex:
        reasoning = match.group("reasoning") or ""
    else:
        reasoning = _strip_reasoning(normal, match.span())
    if score is None:
        return ParseResult(None, reasoning, f"matched {raw!r}, which is not a number", "no_score")
    return _in_original(_in_range(score, scale, reasoning, span), text, normal)


def parse_score(
    text: str | None, output: dict[str, Any] | None = None, scale: tuple[float, float] | None = None
) -> ParseResult:
    output = output or {}
    fmt = output.get("format", "auto")
    if fmt == "json":
        return parse_json(text, scale)
    if fmt == "regex":
        return parse_regex(text, str(output.get("regex", "")), scale)
    return parse_auto(text, scale)


_VERDICT_LINE = re.compile(
    r"(?:^|[\s*_#>|(\[])(?:final\s+)?(?:verdict|winner|better|preferred|judgement|judgment|勝者|判定|結果|より良い回答)"
    r"[ \t*_]{0,4}(?:[:=]|は|：)[ \t*_\[]{0,6}(?P<value>[AB12]|tie|draw|both|equal|引き分け|同等)\b",
    re.IGNORECASE | re.MULTILINE,
)
_VERDICT_BRACKET = re.compile(r"\[\[\s{0,3}(?P<value>A|B|C|tie)\s{0,3}\]\]", re.IGNORECASE)


def _verdict_token(value: str) -> str | None:
    token = normalise(str(value)).strip().strip("\"'[]()").lower()
    if token in ("a", "1", "assistant a", "answer a", "回答a"):
        return "A"
    if token in ("b", "2", "assistant b", "answer b", "回答b"):
        return "B"
    if token in ("tie", "draw", "both", "equal", "c", "引き分け", "同等", "none"):
        return "tie"
    return None


def parse_verdict(text: str | None) -> VerdictResult:
    if not text or not text.strip():
        return VerdictResult(None, "", "empty output", "empty")
    normal = normalise(text)
    for obj, _start in reversed(json_objects(normal)):
        raw = _lookup(obj, _VERDICT_KEYS)
        if raw is None:
            continue
        reasoning = _lookup(obj, _REASONING_KEYS)
        verdict = _verdict_token(str(raw))
        if verdict is None:
            return VerdictResult(None, str(reasoning or ""), f"unknown verdict {raw!r}", "no_score")
        return VerdictResult(verdict, str(reasoning or ""))
    matches = list(_VERDICT_LINE.finditer(normal)) or list(_VERDICT_BRACKET.finditer(normal))
    if matches:
        last = matches[-1]
        verdict = _verdict_token(last.group("value"))
        if verdict is not None:
            return VerdictResult(verdict, _strip_reasoning(normal, last.span()))
    if _REFUSAL.search(normal):
        return VerdictResult(None, normal.strip()[:20_000], "the judge refused to compare", "refusal")
    return VerdictResult(None, normal.strip()[:20_000], "no verdict found in the output", "no_score")

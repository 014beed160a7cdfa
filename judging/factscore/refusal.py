"""Rule-based refusal detection (English and Japanese), with an optional confirmation hook.

FActScore averages only over answers that respond, so a refusal must be told apart from an
answer that merely apologises somewhere. Rules therefore look at the opening of the answer (the
first sentences), except for a short answer, which is judged as a whole. Every decision names the
rule that fired, so a researcher can audit and the run can record it.

A rule match can be passed to a `confirm` callable (the engine asks an LLM); its answer is final
and recorded next to the rule.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

# Answers at most this long are checked whole; longer ones only in their opening.
SHORT_ANSWER_CHARS = 300
OPENING_CHARS = 240


@dataclass(frozen=True)
class RefusalRule:
    name: str
    language: str
    pattern: re.Pattern[str]
    anywhere_in_short: bool = True


def _rule(name: str, language: str, pattern: str, *, anywhere_in_short: bool = True) -> RefusalRule:
    return RefusalRule(name, language, re.compile(pattern, re.IGNORECASE), anywhere_in_short)


_APOS = "['’]"
RULES: tuple[RefusalRule, ...] = (
    _rule(
        "en_sorry_cannot", "en", rf"\b(i{_APOS}m|i am) sorry\b[^.!?\n]{{0,60}}\b(can(no|{_APOS})t|unable|not able)\b"
    ),
    _rule("en_apologize_cannot", "en", r"\bi apologi[sz]e\b[^.!?\n]{0,60}\b(cannot|can't|unable|not able)\b"),
    _rule(
        "en_no_information",
        "en",
        rf"\bi (do not|don{_APOS}t) have (any |enough |specific |sufficient )?(information|data|details|knowledge)\b",
    ),
    _rule(
        "en_could_not_find",
        "en",
        rf"\bi (could not|couldn{_APOS}t|can(no|{_APOS})t|was unable to) find (any )?(information|details|data)\b",
    ),
    _rule(
        "en_cannot_provide",
        "en",
        rf"\b(i|we) (can(no|{_APOS})t|am unable to|am not able to|won{_APOS}t) "
        r"(provide|answer|help with|share|assist with|comply)\b",
    ),
    _rule("en_as_an_ai", "en", r"\bas an ai( language model)?\b[^.!?\n]{0,80}\b(cannot|can't|unable|do not|don't)\b"),
    _rule(
        "en_not_aware",
        "en",
        rf"\b(i{_APOS}m|i am) (not (aware|familiar)|unfamiliar) (of|with)\b[^.!?\n]{{0,80}}"
        r"\b(person|people|individual|entity|subject|topic)\b",
    ),
    _rule("en_dont_know", "en", rf"^\W*(i (do not|don{_APOS}t) know|no idea|unknown)\W*$"),
    _rule("ja_moushiwake", "ja", r"申し訳(ありませんが|ございませんが|ないのですが|ありません)"),
    # "わかりませんが、…" goes on to answer; only a closing "わかりません" refuses.
    _rule("ja_wakarimasen", "ja", r"(わかりません|分かりません|存じません|存じ上げません)(?!が)"),
    _rule(
        "ja_no_information",
        "ja",
        r"(に関する|についての|の)?(情報|データ|知識)(は|が)?(ありません|持っていません|持ち合わせていません|見つかりません|見当たりません)",
    ),
    _rule(
        "ja_cannot_answer",
        "ja",
        r"(お答え|回答|お応え|提供|ご提供|お伝え)(することは|することが|は|が)?(できません|いたしかねます|しかねます|致しかねます)",
    ),
    _rule("ja_as_an_ai", "ja", r"AI(言語モデル|アシスタント)?(として|である私)[^。\n]{0,40}(できません|ありません)"),
)


@dataclass(frozen=True)
class RefusalCheck:
    is_refusal: bool
    rule: str = ""  # the rule that fired ("empty" for an empty answer), or "" for none
    matched: str = ""  # the text the rule matched, for audit
    confirmed_by: str = ""  # "rules", or "llm" when a confirmation hook decided
    llm_verdict: bool | None = None  # what the hook said, when it was asked


def _opening(text: str) -> str:
    if len(text) <= SHORT_ANSWER_CHARS:
        return text
    head = text[:OPENING_CHARS]
    # Keep whole sentences of the opening only up to the second sentence end.
    ends = [m.end() for m in re.finditer(r"[。！？!?]|\.(\s|$)", head)]
    return head[: ends[1]] if len(ends) >= 2 else head


def match_rules(text: str | None) -> RefusalCheck:
    normalized = unicodedata.normalize("NFKC", text or "").strip()
    if not normalized:
        return RefusalCheck(is_refusal=True, rule="empty", confirmed_by="rules")
    window = _opening(normalized)
    for rule in RULES:
        found = rule.pattern.search(window)
        if found:
            return RefusalCheck(is_refusal=True, rule=rule.name, matched=found.group(0), confirmed_by="rules")
    return RefusalCheck(is_refusal=False)


ConfirmHook = Callable[[str, RefusalCheck], bool]


def detect_refusal(text: str | None, *, confirm: ConfirmHook | None = None) -> RefusalCheck:
    """Rules first; when a rule fires and a hook is given, the hook decides (and is recorded)."""
    check = match_rules(text)
    if not check.is_refusal or confirm is None or check.rule == "empty":
        return check
    verdict = bool(confirm(text or "", check))
    return RefusalCheck(
        is_refusal=verdict, rule=check.rule, matched=check.matched, confirmed_by="llm", llm_verdict=verdict
    )

"""Rule-based refusal detection (English and Japanese), with an optional confirmation hook.

FActScore averages only over answers that respond, so a refusal must be told apart from an
answer that merely apologises or admits a gap somewhere. A refusal can stand anywhere in an
answer ("Ada Lovelace? I'm sorry, I don't know who that is."), so every sentence is checked; what
keeps a factual sentence that contains "sorry" or "don't know" from firing is that each rule is a
first-person refusal form, anchored where it has to be, and that quoted speech is ignored. Every
decision names the rule that fired, so a researcher can audit and the run can record it.

A confirmation hook (the engine asks an LLM when `refusal_confirm` is on) gets the last word on
every answer: it can overturn a rule that fired, and it can find a refusal no rule knows.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class RefusalRule:
    name: str
    language: str
    pattern: re.Pattern[str]


def _rule(name: str, language: str, pattern: str) -> RefusalRule:
    return RefusalRule(name, language, re.compile(pattern, re.IGNORECASE))


_A = "['’]"  # NFKC keeps the typographic apostrophe
_DONT = rf"(do not|don{_A}t|do n{_A}t)"
_CANT = rf"(cannot|can{_A}t|can not|am unable to|{_A}m unable to|am not able to|{_A}m not able to|won{_A}t)"
_IM = rf"(i{_A}m|i am)"
_TELL = r"(provide|answer|help|share|give|offer|assist|comply|tell you|say)"
_INFO = r"(information|info|details|data|knowledge|records?|facts)"
# What turns an apology into a refusal, when it follows "sorry"/"I apologise"/"I'm afraid" in the same sentence.
_REFUSING = (
    rf"(i {_DONT} know|i (really |honestly )?{_DONT} have|i have no\b|no {_INFO}|no idea|"
    rf"not (aware|familiar|sure who|sure what)|unfamiliar|i {_CANT} {_TELL}|unable to (find|{_TELL})|"
    rf"(could not|couldn{_A}t|can{_A}t|cannot) (find|locate|identify)|not able to (find|{_TELL})|"
    rf"i {_DONT} recogni[sz]e)"
)
_JA_NOT_KNOW = (
    r"(わかりません|分かりません|わからない|分からない|存じません|存じ上げません|知りません|存じ上げておりません)"
)
_JA_NONE = (
    r"(ありません|ございません|持っていません|持ち合わせていません|持っておりません"
    r"|見つかりません|見当たりません|見つかりませんでした)"
)
_EN_ADJ = r"(any |enough |specific |sufficient |reliable |detailed |much |relevant |accurate )?"

RULES: tuple[RefusalRule, ...] = (
    _rule(
        "en_sorry",
        "en",
        rf"^\W*((({_IM}|i{_A}m) (so |very |really |truly |terribly )?)?sorry|i apologi[sz]e|{_IM} afraid)"
        rf"\b.*\b{_REFUSING}",
    ),
    _rule(
        "en_dont_know",
        "en",
        rf"^\W*i (really |honestly |simply |just )?{_DONT} know(\W*$|\s+(who|what|anything|much|enough|about"
        r"|this|that|him|her|them|which|where|the (person|answer|individual))\b)",
    ),
    _rule("en_no_information", "en", rf"\bi ((really |honestly )?{_DONT} have|have no|possess no) {_EN_ADJ}{_INFO}\b"),
    _rule(
        "en_could_not_find",
        "en",
        rf"\bi (could not|couldn{_A}t|can(no|{_A})t|was unable to|am unable to|{_A}m unable to|was not able to"
        rf"|wasn{_A}t able to) (find|locate|retrieve|access) {_EN_ADJ}{_INFO}\b",
    ),
    _rule(
        "en_cannot_provide",
        "en",
        rf"\b(i|we) {_CANT} (provide|answer|help with|share|assist with|comply|give you|offer) "
        r"(any |a |the |you |with |information|an answer|that|this|details|biograph)",
    ),
    _rule("en_cannot_help", "en", rf"\bi {_CANT} (help|assist)( you)?( with (that|this))?\W*$"),
    _rule(
        "en_as_an_ai",
        "en",
        rf"\bas an ai( language model| assistant)?\b.*\b(cannot|can{_A}t|unable|do not|don{_A}t|no access)\b",
    ),
    _rule(
        "en_not_aware",
        "en",
        rf"^\W*({_IM} (not (aware|familiar|sure)|unfamiliar) (of|with|who|what|about)|i {_DONT} recogni[sz]e)\b",
    ),
    _rule(
        "en_no_known_information",
        "en",
        r"\bthere (is|are|seems to be|appears to be) (no|not enough|little or no) (publicly |widely |readily )?"
        rf"(available |known |reliable |verifiable |public )+{_INFO}\b",
    ),
    _rule("en_unknown", "en", r"^\W*(no idea|unknown|no comment|n/?a)\W*$"),
    _rule(
        "ja_moushiwake",
        "ja",
        r"(申し訳(ありません|ございません|ないのですが|ないですが|ない)|すみません|ごめんなさい)が?[、,]?.*"
        rf"({_JA_NOT_KNOW}|{_JA_NONE}|できません|いたしかねます|しかねます)",
    ),
    _rule(
        "ja_wakarimasen",
        "ja",
        r"((について|に関して|については|に関しては|のことは|のことを|には|誰|どなた|どういう|どのような|その人"
        rf"|その人物|この人物|その方)[^。]{{0,30}}{_JA_NOT_KNOW}(?!が)"
        rf"|^\W*(私は|私には|残念ながら|正直|よく|すみません|ちょっと|、)*{_JA_NOT_KNOW}\W*$)",
    ),
    _rule(
        "ja_no_information",
        "ja",
        rf"((に関する|についての|に関しての|について|に関して)[^。]{{0,10}}(情報|データ|記録|知識)(は|が|を)?"
        rf"(何も|特に|十分な)?{_JA_NONE}"
        r"|(情報|知識|データ)を(持っていません|持ち合わせていません|持っておりません|見つけることができませんでした"
        r"|見つけられませんでした))",
    ),
    _rule(
        "ja_cannot_answer",
        "ja",
        r"(お答え|回答|お応え|提供|ご提供|お伝え|ご説明|説明)(することは|することが|は|が)?"
        r"(できません|いたしかねます|しかねます|致しかねます)",
    ),
    _rule("ja_as_an_ai", "ja", r"AI(言語モデル|アシスタント)?(として|である私)[^。\n]{0,40}(できません|ありません)"),
)

# Quoted speech and titles ("…", “…”, 「…」, 『…』): a biography quoting "I don't know" is not refusing.
_QUOTED = re.compile(r'"[^"\n]{0,300}"|“[^”\n]{0,300}”|「[^」\n]{0,300}」|『[^』\n]{0,300}』')
# A sentence ends at 。！？!? or a newline, or at a full stop followed by a space or the end.
_SENTENCE_END = re.compile(r"[。！？!?\n]+|\.(?=\s|$)")


@dataclass(frozen=True)
class RefusalCheck:
    is_refusal: bool
    rule: str = ""  # the rule that fired ("empty" for an empty answer), or "" for none
    matched: str = ""  # the text the rule matched, for audit
    confirmed_by: str = ""  # "rules", or "llm" when a confirmation hook decided
    llm_verdict: bool | None = None  # what the hook said, when it was asked


def sentences(text: str) -> Iterator[str]:
    start = 0
    for end in _SENTENCE_END.finditer(text):
        piece = text[start : end.end()].strip()
        if piece:
            yield piece
        start = end.end()
    tail = text[start:].strip()
    if tail:
        yield tail


def match_rules(text: str | None) -> RefusalCheck:
    normalized = unicodedata.normalize("NFKC", text or "").strip()
    if not normalized:
        return RefusalCheck(is_refusal=True, rule="empty", confirmed_by="rules")
    unquoted = _QUOTED.sub(" ", normalized)
    for sentence in sentences(unquoted):
        for rule in RULES:
            found = rule.pattern.search(sentence)
            if found:
                return RefusalCheck(is_refusal=True, rule=rule.name, matched=sentence[:500], confirmed_by="rules")
    return RefusalCheck(is_refusal=False)


ConfirmHook = Callable[[str, RefusalCheck], bool]


def detect_refusal(text: str | None, *, confirm: ConfirmHook | None = None) -> RefusalCheck:
    """Rules first; when a hook is given it decides every non-empty answer (and is recorded)."""
    check = match_rules(text)
    if confirm is None or check.rule == "empty":
        return check
    verdict = bool(confirm(text or "", check))
    return RefusalCheck(
        is_refusal=verdict, rule=check.rule, matched=check.matched, confirmed_by="llm", llm_verdict=verdict
    )

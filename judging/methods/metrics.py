"""Reference metrics: BLEU, ROUGE-1/2/L, chrF, keyword score and length.

Japanese has no spaces between words, so word-level metrics tokenize it morphologically with
fugashi (MeCab) and unidic-lite; splitting by characters or whitespace would make BLEU and ROUGE
meaningless there. chrF is character-based by definition and needs no tokenizer.

Published Japanese BLEU is computed with sacreBLEU's ja-mecab tokenizer (MeCab with the IPA dictionary), which
splits words differently from UniDic: BLEU over unidic tokens is not comparable with those numbers. The `ja-mecab`
tokenizer gives sacreBLEU's own score for the same sentences.
"""

from __future__ import annotations

import importlib.util
import re
import threading
import unicodedata
from functools import lru_cache
from typing import Any

import fugashi

from judging.methods.prompts import detect_language

METRICS = ("bleu", "rouge1", "rouge2", "rougeL", "chrf", "keyword", "length")
BLEU_TOKENIZERS = ("unidic", "ja-mecab")
# sacreBLEU's ja-mecab tokenizer imports these only when it is first used; by module, the package that provides it.
_JA_MECAB_PACKAGES = {"MeCab": "mecab-python3", "ipadic": "ipadic"}
# Metrics whose value is not bounded by a rubric scale; stored as is.
UNBOUNDED = frozenset({"length"})

_EN_STOPWORDS = frozenset(
    """
a an the and or but if then else of to in on at by for with from as is are was were be been being it its
this that these those there here i you he she we they me him her us them my your our their not no do does
did done have has had can could will would shall should may might must so such than too very just also
only about into over under again further once what which who whom whose when where why how all any both
each few more most other some own same
""".split()  # noqa: SIM905
)
# Content-word parts of speech in UniDic: nouns, proper nouns, verbs, adjectives, adjectival nouns.
_JA_CONTENT_POS = ("名詞", "固有名詞", "動詞", "形容詞", "形状詞")
_WORD_RE = re.compile(r"\w+", re.UNICODE)


@lru_cache(maxsize=1)
def _tagger() -> Any:
    return fugashi.Tagger()


def tokenize(text: str, language: str | None = None) -> list[str]:
    text = unicodedata.normalize("NFKC", text or "")
    language = language or detect_language(text)
    if language == "ja":
        return [word.surface for word in _tagger()(text) if word.surface.strip()]
    return [tok.lower() for tok in _WORD_RE.findall(text)]


def keywords(text: str, language: str | None = None) -> set[str]:
    """Unique content words: POS-filtered morphemes for Japanese, non-stopwords for English."""
    text = unicodedata.normalize("NFKC", text or "")
    language = language or detect_language(text)
    if language == "ja":
        found = set()
        for word in _tagger()(text):
            pos1 = getattr(word.feature, "pos1", "") or ""
            if pos1 in _JA_CONTENT_POS and not _is_punct(word.surface):
                found.add(str(getattr(word.feature, "orthBase", None) or word.surface))
        return found
    return {tok for tok in tokenize(text, "en") if tok not in _EN_STOPWORDS and not tok.isdigit()}


def _is_punct(token: str) -> bool:
    return all(unicodedata.category(ch).startswith(("P", "S")) for ch in token)


class _Tokenizer:
    def __init__(self, language: str) -> None:
        self.language = language

    def tokenize(self, text: str) -> list[str]:
        return tokenize(text, self.language)


# sacrebleu (~0.36 s) and rouge_score (~3.1 s: it pulls in nltk, scipy.stats and scikit-learn) are imported by the
# functions that use them, so that loading the app (every command, web process and worker) does not pay for them.


def ja_mecab_missing() -> list[str]:
    """The packages sacreBLEU's ja-mecab tokenizer needs that are not installed."""
    return [package for module, package in _JA_MECAB_PACKAGES.items() if importlib.util.find_spec(module) is None]


_THREAD = threading.local()


def _ja_mecab_bleu() -> Any:
    # sacreBLEU's sentence_bleu builds a new MeCab tagger on every call and its tokenizer's cache keeps each one
    # alive (1,000 calls left 1,000 taggers, 4,000 more memory maps of the dictionary and 45 MB), so one scorer is
    # kept; one per thread, because a MeCab tagger must not parse in two threads at once.
    scorer = getattr(_THREAD, "ja_mecab_bleu", None)
    if scorer is None:
        from sacrebleu.metrics import BLEU  # noqa: PLC0415 -- start-up cost, see above

        # sentence_bleu's own settings, so the score is the one sacreBLEU reports for the sentence.
        scorer = BLEU(tokenize="ja-mecab", smooth_method="exp", effective_order=True)
        _THREAD.ja_mecab_bleu = scorer
    return scorer


def bleu(answer: str, reference: str, language: str, tokenizer: str = "unidic") -> float:
    if tokenizer == "ja-mecab":
        # As given, without the NFKC folding of our own tokenizer: sacreBLEU's score is of the text as given.
        return float(_ja_mecab_bleu().sentence_score(answer, [reference]).score) / 100.0
    import sacrebleu  # noqa: PLC0415 -- start-up cost, see above

    hyp = " ".join(tokenize(answer, language))
    ref = " ".join(tokenize(reference, language))
    return float(sacrebleu.sentence_bleu(hyp, [ref], tokenize="none", smooth_method="exp").score) / 100.0


def chrf(answer: str, reference: str) -> float:
    import sacrebleu  # noqa: PLC0415 -- start-up cost, see above

    return float(sacrebleu.sentence_chrf(answer, [reference]).score) / 100.0


def rouge(answer: str, reference: str, variant: str, language: str) -> float:
    from rouge_score import rouge_scorer  # noqa: PLC0415 -- start-up cost, see above

    # rouge_score's default tokenizer drops every non-ASCII character, so Japanese needs ours.
    scorer = rouge_scorer.RougeScorer([variant], tokenizer=_Tokenizer(language))
    return float(scorer.score(reference, answer)[variant].fmeasure)


def keyword_score(answer: str, reference: str, language: str) -> float | None:
    wanted = keywords(reference, language)
    if not wanted:
        return None
    present = keywords(answer, language) | set(tokenize(answer, language))
    return len(wanted & present) / len(wanted)


def length(answer: str) -> float:
    """Answer length in characters (Unicode code points, whitespace excluded)."""
    return float(sum(1 for ch in unicodedata.normalize("NFKC", answer or "") if not ch.isspace()))


def compute(metric: str, answer: str, reference: str | None, tokenizer: str = "unidic") -> float | None:
    """One metric for one answer. None when the metric needs a reference the item lacks.

    `tokenizer` chooses how BLEU splits words (see BLEU_TOKENIZERS); the other metrics always use their own."""
    if metric == "length":
        return length(answer)
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}")
    if not reference:
        return None
    language = detect_language(reference, answer)
    if metric == "bleu":
        return bleu(answer, reference, language, tokenizer)
    if metric == "chrf":
        return chrf(answer, reference)
    if metric == "keyword":
        return keyword_score(answer, reference, language)
    return rouge(answer, reference, metric, language)

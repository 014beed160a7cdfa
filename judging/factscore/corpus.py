"""Knowledge corpus for FActScore: JSONL documents, sentence-aware passages, BM25 retrieval.

Documents are `{"id", "title", "text"}` lines. Each is cut into passages of about
`PASSAGE_TOKENS` tokens along sentence boundaries (Japanese `。！？` as well as `.!?`), so a
passage is a readable span of evidence for an annotator, not an arbitrary window.

Tokens come from a real tokenizer: fugashi with unidic-lite for text containing Japanese script,
a lowercase Unicode word tokenizer otherwise. Function words (particles, auxiliaries, symbols,
a short English stopword list) are dropped so BM25 scores the content of a fact.

The index is pure: `PassageIndex` takes passage records and answers queries. Persisting passages
as rows and caching built indexes per process (and on disk under VAR_DIR) is done by
`judging.factscore.services`, which keys the cache by the corpus fingerprint.
"""

from __future__ import annotations

import io
import json
import re
import threading
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from annotations.text.storable import is_storable

if TYPE_CHECKING:
    import numpy as np

PASSAGE_TOKENS = 256
MAX_DOCUMENT_CHARS = 2_000_000
MAX_TITLE_CHARS = 500
MAX_ID_CHARS = 500

_JAPANESE_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uff66-\uff9f]")
_WORD_RE = re.compile(r"[^\W_]+", re.UNICODE)
# A sentence ends after terminal punctuation (with closing quotes/brackets) or at a blank line.
_SENTENCE_END_RE = re.compile(r"(?<=[。．！？!?])[」』）)\"']*\s*|(?<=[.])[\"')\]]*\s+|\n\s*\n+|\n(?=\s*[-*・•])")
# UniDic parts of speech that carry no content for matching a fact against evidence.
_JA_FUNCTION_POS = frozenset({"助詞", "助動詞", "補助記号", "記号", "空白", "接頭辞", "感動詞"})
# Light verbs ("しました", "あります") match every sentence and carry no content.
_JA_LIGHT_LEMMAS = frozenset({"為る", "有る", "居る", "成る", "出来る"})
_EN_STOPWORDS = frozenset(
    """a an the and or but if of to in on at by for with from as is are was were be been being it its
    this that these those he she they them his her their we our you your i me my not no do does did
    has have had which who whom whose what when where how than then so such into over also""".split()  # noqa: SIM905 - a word list reads better as text
)


class CorpusFormatError(ValueError):
    """A corpus line that is not a `{"id", "title", "text"}` object; the message names the line."""


@dataclass(frozen=True)
class Document:
    id: str
    title: str
    text: str


@dataclass(frozen=True)
class PassageRecord:
    """One retrievable unit. `key` is whatever the caller uses to find it again (a row id, an index)."""

    key: Any
    title: str
    text: str


@dataclass(frozen=True)
class Hit:
    key: Any
    title: str
    text: str
    score: float
    rank: int


@dataclass
class Retrieval:
    hits: list[Hit] = field(default_factory=list)
    # False when a title restriction was asked for but no passage carries that title, so the
    # search fell back to the whole corpus; the caller records it beside the verdict.
    title_matched: bool = True


# --- tokenization -----------------------------------------------------------------------------

_local = threading.local()


def _tagger() -> Any:
    # MeCab taggers are not safe to share between threads (celery threads pool, test servers).
    tagger = getattr(_local, "tagger", None)
    if tagger is None:
        import fugashi  # noqa: PLC0415 - loads its dictionary; only Japanese text needs it

        tagger = fugashi.Tagger()
        _local.tagger = tagger
    return tagger


def is_japanese(text: str) -> bool:
    return bool(_JAPANESE_RE.search(text or ""))


def normalize(text: str) -> str:
    return unicodedata.normalize("NFKC", text or "")


def tokenize(text: str) -> list[str]:
    """Content tokens for BM25: morphemes for Japanese text, lowercase words otherwise."""
    text = normalize(text)
    if not text.strip():
        return []
    if is_japanese(text):
        tokens = []
        for word in _tagger()(text):
            pos1 = getattr(word.feature, "pos1", "") or ""
            surface = word.surface.strip().lower()
            if not surface or pos1 in _JA_FUNCTION_POS:
                continue
            if getattr(word.feature, "lemma", None) in _JA_LIGHT_LEMMAS:
                continue
            if all(unicodedata.category(ch)[0] in "PSZ" for ch in surface):
                continue
            tokens.append(surface)
        return tokens
    return [tok for tok in (w.lower() for w in _WORD_RE.findall(text)) if tok not in _EN_STOPWORDS]


def count_tokens(text: str) -> int:
    """Length in the unit passages are sized by: morphemes for Japanese, words otherwise."""
    text = normalize(text)
    if is_japanese(text):
        return sum(1 for word in _tagger()(text) if word.surface.strip())
    return len(_WORD_RE.findall(text))


# --- documents and passages -------------------------------------------------------------------


def split_sentences(text: str) -> list[str]:
    pieces = _SENTENCE_END_RE.split(text or "")
    return [piece.strip() for piece in pieces if piece and piece.strip()]


def _hard_split(sentence: str, max_tokens: int) -> list[str]:
    """A single sentence longer than a passage: cut it at word (or morpheme) boundaries."""
    if is_japanese(sentence):
        words = [w.surface for w in _tagger()(sentence)]
        # MeCab drops whitespace; keep Latin words inside Japanese text apart.
        joiner = ""
    else:
        words = sentence.split()
        joiner = " "
    return [joiner.join(words[i : i + max_tokens]) for i in range(0, len(words), max_tokens)]


def split_passages(text: str, max_tokens: int = PASSAGE_TOKENS) -> list[str]:
    """Greedy packing of whole sentences into passages of at most `max_tokens` tokens."""
    passages: list[str] = []
    current: list[str] = []
    current_tokens = 0
    for sentence in split_sentences(text):
        size = count_tokens(sentence)
        pieces = [sentence] if size <= max_tokens else _hard_split(sentence, max_tokens)
        for piece in pieces:
            piece_tokens = size if len(pieces) == 1 else count_tokens(piece)
            if current and current_tokens + piece_tokens > max_tokens:
                passages.append(_join(current))
                current, current_tokens = [], 0
            current.append(piece)
            current_tokens += piece_tokens
    if current:
        passages.append(_join(current))
    return passages


def _join(sentences: Sequence[str]) -> str:
    # Japanese sentences are written without spaces between them.
    if all(is_japanese(s) for s in sentences):
        return "".join(sentences)
    return " ".join(sentences)


def iter_documents(stream: IO[bytes] | IO[str] | Iterable[bytes | str]) -> Iterator[Document]:
    """Parse a corpus JSONL stream; blank lines are skipped, anything else malformed is an error."""
    for number, raw in enumerate(stream, start=1):
        line = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CorpusFormatError(f"line {number}: not valid JSON ({exc.msg})") from None
        except RecursionError:
            raise CorpusFormatError(f"line {number}: JSON nested too deeply") from None
        if not isinstance(obj, dict):
            raise CorpusFormatError(f"line {number}: expected an object with id, title and text")
        doc_id, title, text = obj.get("id"), obj.get("title"), obj.get("text")
        if isinstance(doc_id, int) and not isinstance(doc_id, bool):
            doc_id = str(doc_id)
        if not isinstance(doc_id, str) or not doc_id.strip() or len(doc_id) > MAX_ID_CHARS:
            raise CorpusFormatError(f"line {number}: field 'id' must be a non-empty string")
        if title is None:
            title = ""
        if not isinstance(title, str) or len(title) > MAX_TITLE_CHARS:
            raise CorpusFormatError(f"line {number}: field 'title' must be a string of at most {MAX_TITLE_CHARS}")
        if not isinstance(text, str) or not text.strip():
            raise CorpusFormatError(f"line {number}: field 'text' must be a non-empty string")
        if len(text) > MAX_DOCUMENT_CHARS:
            raise CorpusFormatError(f"line {number}: field 'text' is longer than {MAX_DOCUMENT_CHARS} characters")
        for name, value in (("id", doc_id), ("title", title), ("text", text)):
            # The database cannot store NUL or unpaired surrogates; caught here they are a message, not a 500.
            if not is_storable(value):
                raise CorpusFormatError(f"line {number}: field '{name}' contains U+0000 or an unpaired surrogate")
        yield Document(id=doc_id, title=title.strip(), text=text)


def documents_from_text(text: str) -> list[Document]:
    return list(iter_documents(io.StringIO(text)))


def title_key(title: str) -> str:
    """Titles compare after NFKC, case folding and whitespace collapsing ("Marie  Curie" = "marie curie")."""
    return " ".join(normalize(title).casefold().split())


# --- the index --------------------------------------------------------------------------------


class PassageIndex:
    """BM25 over a fixed list of passages. Immutable once built; safe to share between threads."""

    def __init__(self, passages: Sequence[PassageRecord], *, bm25: Any = None) -> None:
        import bm25s  # noqa: PLC0415 - ~0.8 s; only FActScore runs with a corpus use it
        import numpy as np  # noqa: PLC0415 - ~0.1 s of every process start-up, since the engine imports this module

        self.passages = list(passages)
        self.title_keys = [title_key(p.title) for p in self.passages]
        self._by_title: dict[str, np.ndarray] = {}
        for position, key in enumerate(self.title_keys):
            self._by_title.setdefault(key, np.zeros(len(self.passages), dtype=bool))[position] = True
        if bm25 is not None:
            self.bm25 = bm25
        else:
            self.bm25 = bm25s.BM25()
            corpus_tokens = [tokenize(f"{p.title}\n{p.text}") for p in self.passages]
            if self.passages:
                self.bm25.index(corpus_tokens, show_progress=False)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.passages)

    def search(self, query: str, *, k: int = 5, title: str | None = None) -> Retrieval:
        """Top-k passages by BM25; with `title`, only passages of documents with that title."""
        import numpy as np  # noqa: PLC0415 - see __init__

        if not self.passages or k <= 0:
            return Retrieval(hits=[], title_matched=not title)
        mask: np.ndarray | None = None
        title_matched = True
        if title:
            mask = self._by_title.get(title_key(title))
            title_matched = mask is not None
        tokens = tokenize(query)
        # Only tokens the index has seen can score; bm25s rejects an all-unknown query.
        with self._lock:
            vocab = getattr(self.bm25, "vocab_dict", None) or {}
            known = [t for t in tokens if t in vocab]
            scores = self.bm25.get_scores(known) if known else np.zeros(len(self.passages), dtype=np.float32)
        scores = np.asarray(scores, dtype=np.float64)
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)
        # Stable ordering: score descending, then corpus order, so ties are reproducible.
        order = np.lexsort((np.arange(len(scores)), -scores))
        hits: list[Hit] = []
        for position in order:
            score = float(scores[position])
            if score <= 0.0 or len(hits) >= k:
                break
            record = self.passages[int(position)]
            hits.append(Hit(key=record.key, title=record.title, text=record.text, score=score, rank=len(hits) + 1))
        return Retrieval(hits=hits, title_matched=title_matched)

    # Saving: bm25s writes its arrays; we add the passage keys and titles next to them.
    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.bm25.save(str(directory), show_progress=False)
        meta = [{"key": p.key, "title": p.title} for p in self.passages]
        (directory / "passages.json").write_text(json.dumps(meta, ensure_ascii=False))

    @classmethod
    def load(cls, directory: Path, texts: dict[Any, str]) -> PassageIndex:
        """Reload a saved index; `texts` maps passage keys to their text (from the database)."""
        import bm25s  # noqa: PLC0415 - ~0.8 s; only FActScore runs with a corpus use it

        meta = json.loads((directory / "passages.json").read_text())
        bm25 = bm25s.BM25.load(str(directory), show_progress=False, verbosity=0)
        records = [PassageRecord(key=m["key"], title=m["title"], text=texts[m["key"]]) for m in meta]
        return cls(records, bm25=bm25)


def item_passages(reference: str | None, context: object) -> list[PassageRecord]:
    """Per-item knowledge: the turn's context passages, then its reference answer, split like a corpus."""
    records: list[PassageRecord] = []
    sources: list[tuple[str, str]] = []
    if isinstance(context, str) and context.strip():
        sources.append(("context", context))
    elif isinstance(context, list):
        sources.extend(("context", str(part)) for part in context if str(part).strip())
    if reference and reference.strip():
        sources.append(("reference", reference))
    for origin, text in sources:
        for passage in split_passages(text):
            records.append(PassageRecord(key=f"{origin}:{len(records)}", title=origin, text=passage))
    return records


def search_item_knowledge(records: Sequence[PassageRecord], query: str, *, k: int) -> list[Hit]:
    """Evidence from an item's own passages: all of them when they fit in k, else the BM25 top-k."""
    if len(records) <= k:
        return [Hit(key=r.key, title=r.title, text=r.text, score=0.0, rank=i + 1) for i, r in enumerate(records)]
    return PassageIndex(records).search(query, k=k).hits

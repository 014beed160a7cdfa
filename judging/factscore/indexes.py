"""The retrieval index of a knowledge corpus, as the judge engine loads it for FActScore's checks.

A built BM25 index is kept per process (keyed by corpus id and fingerprint) and saved under
VAR_DIR/factscore/index/, so a new worker loads arrays instead of re-tokenising the corpus.
A re-upload changes the fingerprint, so a stale index is never used. This is a read-through cache,
not a service: the engine may use it (it imports no services).
"""

from __future__ import annotations

import logging
import shutil
import threading
from pathlib import Path

from django.conf import settings

from judging.factscore import corpus as corpus_lib
from judging.factscore.models import KnowledgeCorpus, Passage

logger = logging.getLogger(__name__)


_indexes: dict[tuple[int, str], corpus_lib.PassageIndex] = {}
_lock = threading.Lock()


def _index_dir(knowledge: KnowledgeCorpus) -> Path:
    return Path(settings.VAR_DIR) / "factscore" / "index" / f"{knowledge.pk}-{knowledge.fingerprint[:24]}"


def knowledge_corpus_index(knowledge: KnowledgeCorpus) -> corpus_lib.PassageIndex:
    """The corpus's BM25 index: from this process's cache, else from disk, else built and saved."""
    key = (knowledge.pk, knowledge.fingerprint)
    cached = _indexes.get(key)
    if cached is not None:
        return cached
    with _lock:
        cached = _indexes.get(key)
        if cached is not None:
            return cached
        rows = list(Passage.objects.filter(corpus=knowledge).order_by("position").values_list("pk", "title", "text"))
        directory = _index_dir(knowledge)
        index: corpus_lib.PassageIndex | None = None
        if (directory / "passages.json").exists():
            try:
                index = corpus_lib.PassageIndex.load(directory, {pk: text for pk, _title, text in rows})
                if len(index) != len(rows):
                    index = None
            except Exception:  # a half-written or foreign directory: rebuild rather than fail the run
                logger.warning("rebuilding unreadable factscore index at %s", directory, exc_info=True)
                index = None
        if index is None:
            index = corpus_lib.PassageIndex(
                [corpus_lib.PassageRecord(key=pk, title=title, text=text) for pk, title, text in rows]
            )
            _save_index(index, directory)
        # Drop indexes of older versions of the same corpus.
        for stale in [k for k in _indexes if k[0] == knowledge.pk]:
            del _indexes[stale]
        _indexes[key] = index
        return index


def _save_index(index: corpus_lib.PassageIndex, directory: Path) -> None:
    temporary = directory.with_name(directory.name + f".tmp-{threading.get_ident()}")
    try:
        index.save(temporary)
        if directory.exists():
            shutil.rmtree(directory, ignore_errors=True)
        temporary.rename(directory)
    except OSError:
        logger.warning("could not save the factscore index to %s", directory, exc_info=True)
        shutil.rmtree(temporary, ignore_errors=True)


def forget_cached_indexes() -> None:
    """For tests and after a corpus is deleted."""
    with _lock:
        _indexes.clear()

"""Turning judgments (or planned units) into the pure UnitContext the methods work on.

Everything is loaded in a handful of bulk queries per batch: answers, their turns and items, the
earlier turns of each conversation (for `{question}`), and the dataset's aspects.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from annotations.models import Aspect, Response, Turn
from judging.factscore import method as factscore_method
from judging.factscore.indexes import knowledge_corpus_index
from judging.factscore.models import KnowledgeCorpus
from judging.methods.base import AspectInfo, UnitContext, context_text
from judging.methods.factscore_options import FactScoreOptions
from judging.models import Judgment

if TYPE_CHECKING:
    from judging.methods.judge_settings import JudgeSettings


@dataclass(frozen=True)
class UnitKey:
    judgment_id: int
    response_id: int
    other_response_id: int | None
    aspect_name: str
    sample: int
    pair_order: int


def aspect_infos(dataset_id: int) -> dict[str, AspectInfo]:
    return {
        a.name: AspectInfo(
            name=a.name,
            label=a.label,
            description=a.description,
            min_value=a.min_value,
            max_value=a.max_value,
            ideal=a.ideal,
            labels={str(k): str(v) for k, v in (a.labels or {}).items()},
            translations=_texts_per_language(a.translations or {}),
            span_scheme=a.scheme if a.is_spans else None,
        )
        for a in Aspect.objects.filter(dataset_id=dataset_id).order_by("position", "id")
    }


def _texts_per_language(translations: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The rubric's texts in other languages ({"ja": {"label", "description", "labels"}}); the default text's own
    language is recorded under "_default" and kept as a language code, so a prompt in it uses the default text."""
    texts: dict[str, dict[str, Any]] = {}
    for language, entry in translations.items():
        if language == "_default" or not isinstance(entry, dict):
            continue
        texts[language.split("-")[0]] = {
            "label": str(entry.get("label") or ""),
            "description": str(entry.get("description") or ""),
            "labels": {str(k): str(v) for k, v in (entry.get("labels") or {}).items()},
        }
    default = translations.get("_default")
    if isinstance(default, dict) and default.get("language"):
        texts.setdefault("_default", {"language": str(default["language"]).split("-")[0]})
    return texts


def build_contexts(
    keys: Iterable[UnitKey], *, cfg: JudgeSettings, aspects: dict[str, AspectInfo], language: str = ""
) -> dict[int, UnitContext]:
    """`language` is the run's prompt language; blank leaves it to the config (per item when it says so)."""
    keys = list(keys)
    response_ids = {k.response_id for k in keys} | {k.other_response_id for k in keys if k.other_response_id}
    responses = {
        r.id: r
        for r in Response.objects.filter(id__in=response_ids)
        .select_related("turn", "turn__item")
        .only(
            "id",
            "text",
            "system_id",
            "turn__id",
            "turn__index",
            "turn__prompt",
            "turn__reference",
            "turn__context",
            "turn__item__id",
        )
    }
    # Earlier turns of multi-turn conversations: the question shows the same system's earlier answers.
    later = {r.turn.item_id for r in responses.values() if r.turn.index > 0}
    history: dict[int, list[Turn]] = defaultdict(list)
    earlier_answers: dict[tuple[int, int], str] = {}
    if later:
        for turn in Turn.objects.filter(item_id__in=later).order_by("item_id", "index"):
            history[turn.item_id].append(turn)
        for turn_id, system_id, text in Response.objects.filter(turn__item_id__in=later).values_list(
            "turn_id", "system_id", "text"
        ):
            earlier_answers[(turn_id, system_id)] = text

    def question_for(response: Response) -> str:
        turn = response.turn
        if turn.index == 0:
            return turn.prompt
        parts = []
        for earlier in history[turn.item_id]:
            if earlier.index >= turn.index:
                break
            parts.append(f"User: {earlier.prompt}")
            answer = earlier_answers.get((earlier.id, response.system_id))
            if answer is not None:
                parts.append(f"Assistant: {answer}")
        parts.append(f"User: {turn.prompt}")
        return "\n\n".join(parts)

    contexts = {}
    for key in keys:
        response = responses[key.response_id]
        other = responses.get(key.other_response_id) if key.other_response_id else None
        aspect = aspects.get(key.aspect_name) or AspectInfo(name=key.aspect_name)
        contexts[key.judgment_id] = UnitContext(
            judgment_id=key.judgment_id,
            cfg=cfg,
            aspect=aspect,
            question=question_for(response),
            answer=response.text,
            reference=response.turn.reference,
            context=context_text(response.turn.context),
            other_answer=other.text if other is not None else None,
            pair_order=key.pair_order,
            sample=key.sample,
            prompt_language=language,
        )
    return contexts


def with_factscore_knowledge(
    contexts: dict[int, UnitContext], *, dataset_id: int, cfg: JudgeSettings
) -> dict[int, UnitContext]:
    """The contexts with the topic and corpus index FActScore checks facts against (one or two queries a batch)."""
    options = cfg.factscore or FactScoreOptions()
    corpus_index, corpus_error = None, ""
    if options.wants_corpus:
        corpus = KnowledgeCorpus.objects.filter(dataset_id=dataset_id, name=options.corpus).first()
        if corpus is None:
            corpus_error = f"the dataset has no knowledge corpus named {options.corpus!r}"
        else:
            corpus_index = knowledge_corpus_index(corpus)
    topics: dict[int, str] = {}
    if options.topic_key:
        key = options.topic_key
        sources = Judgment.objects.filter(pk__in=list(contexts)).values_list(
            "pk", "response__turn__item__source", "response__turn__source"
        )
        for judgment_id, item_source, turn_source in sources:
            topics[judgment_id] = factscore_method.topic_from(item_source or {}, turn_source or {}, key)
    return {
        judgment_id: replace(
            ctx,
            knowledge=factscore_method.UnitKnowledge(
                topic=topics.get(judgment_id, ""), corpus_index=corpus_index, corpus_error=corpus_error
            ),
        )
        for judgment_id, ctx in contexts.items()
    }

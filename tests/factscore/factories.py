"""A small biography-style dataset with a knowledge corpus, and the world that answers about it."""

from __future__ import annotations

import io
from typing import Any

from annotations.models import Dataset
from judging.factscore import services
from tests.factories import AspectFactory, DatasetFactory, ItemFactory, ResponseFactory, SystemFactory, TurnFactory
from tests.factscore.corpora import ENGLISH_DOCUMENTS, JAPANESE_DOCUMENTS, as_jsonl
from tests.factscore.fakeworld import FactWorld

TOPICS = {"curie": "Marie Curie", "lovelace": "Ada Lovelace", "rhine": "Rhine"}

# (item, system) -> (answer, [(fact, supported by the corpus)])
ENGLISH_ANSWERS: dict[tuple[str, str], tuple[str, list[tuple[str, bool]]]] = {
    ("curie", "alpha"): (
        "Marie Curie was born in Warsaw in 1867. She won the Nobel Prize in Chemistry in 1911.",
        [
            ("Marie Curie was born in Warsaw.", True),
            ("Marie Curie was born in 1867.", True),
            ("Marie Curie won the Nobel Prize in Chemistry in 1911.", True),
        ],
    ),
    ("lovelace", "alpha"): (
        "Ada Lovelace was born in Paris in 1815.",
        [("Ada Lovelace was born in Paris.", False), ("Ada Lovelace was born in 1815.", True)],
    ),
    ("rhine", "alpha"): ("The Rhine flows into the Black Sea.", [("The Rhine flows into the Black Sea.", False)]),
    ("curie", "beta"): ("I'm sorry, but I cannot provide information about that person.", []),
    ("lovelace", "beta"): ("Ada Lovelace was a mathematician.", [("Ada Lovelace was a mathematician.", True)]),
    ("rhine", "beta"): (
        "The Rhine begins in the Swiss Alps and passes Basel.",
        [("The Rhine begins in the Swiss Alps.", True), ("The Rhine passes Basel.", True)],
    ),
}

JAPANESE_ANSWERS: dict[tuple[str, str], tuple[str, list[tuple[str, bool]]]] = {
    ("fuji", "alpha"): (
        "富士山の標高は3776メートルで、最後の噴火は1707年です。",
        [("富士山の標高は3776メートルである。", True), ("富士山の最後の噴火は1707年である。", True)],
    ),
    ("fuji", "beta"): ("申し訳ありませんが、その山についてはわかりません。", []),
    ("tower", "alpha"): (
        "東京タワーは1958年に完成し、高さは400メートルです。",
        [("東京タワーは1958年に完成した。", True), ("東京タワーの高さは400メートルである。", False)],
    ),
    ("tower", "beta"): ("東京タワーは港区にあります。", [("東京タワーは港区にある。", True)]),
}
JAPANESE_TOPICS = {"fuji": "富士山", "tower": "東京タワー"}


def make_fact_dataset(
    *, japanese: bool = False, owner: Any = None, with_corpus: bool = True, aspects: tuple[str, ...] = ("factuality",)
) -> Dataset:
    answers = JAPANESE_ANSWERS if japanese else ENGLISH_ANSWERS
    topics = JAPANESE_TOPICS if japanese else TOPICS
    dataset = DatasetFactory(owner=owner)
    for position, name in enumerate(aspects):
        AspectFactory(dataset=dataset, name=name, min_value=1, max_value=5, ideal=5, position=position)
    systems = {key: SystemFactory(dataset=dataset, key=key, position=i) for i, key in enumerate(["alpha", "beta"])}
    for position, (item_key, topic) in enumerate(topics.items()):
        item = ItemFactory(dataset=dataset, external_id=item_key, position=position, source={"meta": {"topic": topic}})
        prompt = f"{topic}について教えてください。" if japanese else f"Tell me about {topic}."
        turn = TurnFactory(item=item, index=0, prompt=prompt, reference=None)
        for s, (system_key, system) in enumerate(systems.items()):
            ResponseFactory(turn=turn, system=system, position=s, text=answers[(item_key, system_key)][0])
    if with_corpus:
        documents = JAPANESE_DOCUMENTS if japanese else ENGLISH_DOCUMENTS
        services.knowledge_corpus_upload(
            dataset=dataset, name="wiki", stream=io.BytesIO(as_jsonl(documents).encode()), passage_tokens=40
        )
    return dataset


def script_world(world: FactWorld, *, japanese: bool = False) -> FactWorld:
    answers = JAPANESE_ANSWERS if japanese else ENGLISH_ANSWERS
    for text, facts in answers.values():
        world.facts[text] = [fact for fact, _ in facts]
        world.true_facts.update(fact for fact, supported in facts if supported)
    return world


def factscore_config(provider: Any, **options: Any) -> dict[str, Any]:
    factscore = {"corpus": "wiki", "topic": "meta:topic", "k": 3}
    factscore.update(options.pop("factscore", {}))
    cfg = {
        "name": "fs-test",
        "method": "factscore",
        "model": "openai/gpt-4o-mini",
        "api_base": provider.base_url,
        "max_concurrency": 4,
        "timeout_s": 5,
        "max_retries": 3,
        "factscore": factscore,
    }
    cfg.update(options)
    return cfg


def truth(fact_text: str) -> str:
    """The label a careful reviewer gives the English world's fact `fact_text`."""
    for _answer, facts in ENGLISH_ANSWERS.values():
        for text, supported in facts:
            if text == fact_text:
                return "supported" if supported else "not_supported"
    raise KeyError(fact_text)

import io

import pytest

from judging.factscore import services
from judging.factscore.models import KnowledgeCorpus, Passage
from tests.factories import DatasetFactory
from tests.factscore.corpora import ENGLISH_DOCUMENTS, JAPANESE_DOCUMENTS, as_jsonl


@pytest.fixture(autouse=True)
def _fresh_cache(settings, tmp_path):  # type: ignore[no-untyped-def]
    settings.VAR_DIR = tmp_path
    services.forget_cached_indexes()
    yield
    services.forget_cached_indexes()


def upload(dataset, documents, **kwargs):  # type: ignore[no-untyped-def]
    return services.knowledge_corpus_upload(
        dataset=dataset, name=kwargs.pop("name", "wiki"), stream=io.BytesIO(as_jsonl(documents).encode()), **kwargs
    )


@pytest.mark.django_db
def test_upload_stores_passages_in_document_order() -> None:
    dataset = DatasetFactory()
    corpus = upload(dataset, ENGLISH_DOCUMENTS + JAPANESE_DOCUMENTS, passage_tokens=30)
    passages = list(Passage.objects.filter(corpus=corpus).order_by("position"))
    assert corpus.n_documents == 6
    assert corpus.n_passages == len(passages) > 6
    assert [p.position for p in passages] == list(range(len(passages)))
    assert passages[0].document_id == "curie" and passages[0].chunk == 0
    assert {p.title for p in passages} == {d["title"] for d in ENGLISH_DOCUMENTS + JAPANESE_DOCUMENTS}
    assert len(corpus.fingerprint) == 64


@pytest.mark.django_db
def test_bad_line_stores_nothing() -> None:
    dataset = DatasetFactory()
    stream = io.BytesIO((as_jsonl(ENGLISH_DOCUMENTS) + '{"id": "x", "title": "t"}\n').encode())
    with pytest.raises(services.CorpusError, match="line 4: field 'text'"):
        services.knowledge_corpus_upload(dataset=dataset, name="wiki", stream=stream)
    assert not KnowledgeCorpus.objects.exists() and not Passage.objects.exists()


@pytest.mark.django_db
def test_duplicate_ids_names_and_empty_corpora_are_refused() -> None:
    dataset = DatasetFactory()
    with pytest.raises(services.CorpusError, match="appears twice"):
        upload(dataset, ENGLISH_DOCUMENTS + ENGLISH_DOCUMENTS[:1])
    with pytest.raises(services.CorpusError, match="no documents"):
        services.knowledge_corpus_upload(dataset=dataset, name="wiki", stream=io.BytesIO(b"\n"))
    upload(dataset, ENGLISH_DOCUMENTS)
    with pytest.raises(services.CorpusError, match="already has a corpus"):
        upload(dataset, ENGLISH_DOCUMENTS)
    replaced = upload(dataset, JAPANESE_DOCUMENTS, replace=True)
    assert KnowledgeCorpus.objects.get(dataset=dataset, name="wiki").pk == replaced.pk
    assert set(Passage.objects.values_list("document_id", flat=True)) == {"fuji", "tokyo-tower", "biwa"}


@pytest.mark.django_db
def test_index_is_cached_per_process_and_on_disk(tmp_path) -> None:  # type: ignore[no-untyped-def]
    corpus = upload(DatasetFactory(), ENGLISH_DOCUMENTS + JAPANESE_DOCUMENTS, passage_tokens=30)
    index = services.knowledge_corpus_index(corpus)
    assert services.knowledge_corpus_index(corpus) is index
    hit = index.search("Nobel Prize in Chemistry 1911", k=1).hits[0]
    assert Passage.objects.get(pk=hit.key).document_id == "curie"
    saved = list((tmp_path / "factscore" / "index").iterdir())
    assert len(saved) == 1 and saved[0].name.startswith(f"{corpus.pk}-")
    services.forget_cached_indexes()
    reloaded = services.knowledge_corpus_index(corpus)
    assert reloaded is not index
    assert [h.key for h in reloaded.search("東京タワー 設計", k=2).hits] == [
        h.key for h in index.search("東京タワー 設計", k=2).hits
    ]

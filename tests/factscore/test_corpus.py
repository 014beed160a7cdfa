import io

import pytest

from judging.factscore import corpus
from judging.factscore.corpus import CorpusFormatError, PassageIndex, PassageRecord
from tests.factscore.corpora import ENGLISH_DOCUMENTS, JAPANESE_DOCUMENTS, as_jsonl


def build_index(documents: list[dict[str, str]], max_tokens: int = corpus.PASSAGE_TOKENS) -> PassageIndex:
    records = []
    for document in corpus.iter_documents(io.StringIO(as_jsonl(documents))):
        for number, text in enumerate(corpus.split_passages(document.text, max_tokens=max_tokens)):
            records.append(PassageRecord(key=f"{document.id}#{number}", title=document.title, text=text))
    return PassageIndex(records)


def test_jsonl_documents_are_parsed_in_order() -> None:
    documents = corpus.documents_from_text(as_jsonl(ENGLISH_DOCUMENTS) + "\n")
    assert [d.id for d in documents] == ["curie", "lovelace", "rhine"]
    assert documents[0].title == "Marie Curie"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "line 2: not valid JSON"),
        ('["a"]', "line 2: expected an object"),
        ('{"title": "t", "text": "x"}', "line 2: field 'id'"),
        ('{"id": "a", "title": 3, "text": "x"}', "line 2: field 'title'"),
        ('{"id": "a", "title": "t", "text": "  "}', "line 2: field 'text'"),
    ],
)
def test_malformed_lines_name_the_line_and_field(line: str, message: str) -> None:
    text = as_jsonl(ENGLISH_DOCUMENTS[:1]) + line + "\n"
    with pytest.raises(CorpusFormatError, match=message):
        corpus.documents_from_text(text)


def test_tokenizer_uses_morphemes_for_japanese_and_words_for_english() -> None:
    assert corpus.tokenize("東京タワーは1958年に完成しました。") == ["東京", "タワー", "1958", "年", "完成"]
    assert corpus.tokenize("Marie Curie won the Nobel Prize in 1903.") == [
        "marie",
        "curie",
        "won",
        "nobel",
        "prize",
        "1903",
    ]


def test_passages_keep_whole_sentences_within_the_token_budget() -> None:
    text = ENGLISH_DOCUMENTS[0]["text"]
    passages = corpus.split_passages(text, max_tokens=30)
    assert len(passages) > 1
    assert all(corpus.count_tokens(p) <= 30 for p in passages)
    assert all(p.endswith(".") for p in passages)
    assert " ".join(passages).split() == text.split()


def test_japanese_passages_split_on_japanese_sentence_ends() -> None:
    text = JAPANESE_DOCUMENTS[0]["text"]
    passages = corpus.split_passages(text, max_tokens=20)
    assert len(passages) >= 2
    assert all(p.endswith("。") for p in passages)
    assert all(corpus.count_tokens(p) <= 20 for p in passages)
    assert "".join(passages) == text


def test_overlong_sentence_is_cut_at_word_boundaries() -> None:
    sentence = " ".join(f"word{i}" for i in range(25)) + "."
    passages = corpus.split_passages(sentence, max_tokens=10)
    assert [corpus.count_tokens(p) for p in passages] == [10, 10, 5]
    assert " ".join(passages) == sentence


def test_english_retrieval_finds_the_passage_that_states_the_fact() -> None:
    index = build_index(ENGLISH_DOCUMENTS, max_tokens=30)
    result = index.search("Marie Curie received the Nobel Prize in Chemistry in 1911", k=2)
    assert result.hits[0].title == "Marie Curie"
    assert "1911" in result.hits[0].text
    assert [hit.rank for hit in result.hits] == [1, 2]
    assert result.hits[0].score > result.hits[1].score


def test_title_restriction_keeps_only_that_documents_passages() -> None:
    index = build_index(ENGLISH_DOCUMENTS, max_tokens=30)
    unrestricted = index.search("born in London in 1815", k=3)
    assert unrestricted.hits[0].title == "Ada Lovelace"
    restricted = index.search("born in London in 1815", k=3, title="  marie   CURIE ")
    assert restricted.title_matched
    assert restricted.hits and {hit.title for hit in restricted.hits} == {"Marie Curie"}


def test_unknown_title_falls_back_to_the_whole_corpus_and_says_so() -> None:
    index = build_index(ENGLISH_DOCUMENTS)
    result = index.search("river through Germany", k=1, title="Danube")
    assert not result.title_matched
    assert result.hits[0].title == "Rhine"


def test_query_with_no_known_word_returns_nothing() -> None:
    index = build_index(ENGLISH_DOCUMENTS)
    assert index.search("zyxwvu qwerty", k=3).hits == []
    assert index.search("", k=3).hits == []


def test_japanese_retrieval_uses_morphemes() -> None:
    index = build_index(JAPANESE_DOCUMENTS)
    height = index.search("富士山の標高は3776メートルである。", k=1)
    assert height.hits[0].title == "富士山"
    tower = index.search("東京タワーを設計したのは内藤多仲だ。", k=1)
    assert tower.hits[0].title == "東京タワー"
    lake = index.search("琵琶湖から流れ出る川", k=2, title="琵琶湖")
    assert [hit.title for hit in lake.hits] == ["琵琶湖"]


def test_japanese_retrieval_matches_words_inside_unspaced_text() -> None:
    # Character n-grams or whitespace splitting would not find "宝永" inside the sentence.
    index = build_index(JAPANESE_DOCUMENTS)
    result = index.search("宝永", k=3)
    assert len(result.hits) == 1
    assert "宝永噴火" in result.hits[0].text


def test_saved_index_answers_like_the_built_one(tmp_path) -> None:  # type: ignore[no-untyped-def]
    index = build_index(ENGLISH_DOCUMENTS + JAPANESE_DOCUMENTS, max_tokens=30)
    index.save(tmp_path / "idx")
    texts = {p.key: p.text for p in index.passages}
    loaded = PassageIndex.load(tmp_path / "idx", texts)
    for query, title in [("Nobel Prize Chemistry", None), ("東京タワー 高さ", None), ("Basel", "Rhine")]:
        assert [h.key for h in loaded.search(query, k=3, title=title).hits] == [
            h.key for h in index.search(query, k=3, title=title).hits
        ]


def test_item_knowledge_comes_from_context_then_reference() -> None:
    records = corpus.item_passages("The reference says 42.", ["First passage.", "", "Second passage."])
    assert [(r.key, r.title, r.text) for r in records] == [
        ("context:0", "context", "First passage."),
        ("context:1", "context", "Second passage."),
        ("reference:2", "reference", "The reference says 42."),
    ]
    assert corpus.item_passages(None, None) == []
    assert [r.text for r in corpus.item_passages(None, "単独の文脈です。")] == ["単独の文脈です。"]


def test_item_knowledge_is_all_passages_when_few_else_bm25_top_k() -> None:
    records = corpus.item_passages(None, ["Paris is in France.", "Berlin is in Germany.", "Rome is in Italy."])
    assert len(corpus.search_item_knowledge(records, "anything", k=5)) == 3
    top = corpus.search_item_knowledge(records, "Berlin Germany", k=1)
    assert [hit.text for hit in top] == ["Berlin is in Germany."]

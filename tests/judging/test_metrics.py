import pytest
import sacrebleu

from judging.methods import metrics


def test_japanese_is_tokenized_morphologically() -> None:
    tokens = metrics.tokenize("東京は日本の首都です。")
    assert tokens == ["東京", "は", "日本", "の", "首都", "です", "。"]


def test_japanese_keywords_are_content_words_in_base_form() -> None:
    assert metrics.keywords("猫が魚を食べた。") == {"猫", "魚", "食べる"}


def test_keyword_score_is_fraction_of_reference_keywords() -> None:
    reference = "東京は日本の首都です。"  # keywords: 東京, 日本, 首都
    assert metrics.compute("keyword", "日本の首都は東京。", reference) == pytest.approx(1.0)
    assert metrics.compute("keyword", "首都は大阪ではない。", reference) == pytest.approx(1 / 3)
    assert metrics.compute("keyword", "The capital is Paris", "capital Paris France") == pytest.approx(2 / 3)


def test_bleu_matches_sacrebleu_on_english() -> None:
    hyp, ref = "the cat sat on the mat today", "the cat sat on the mat"
    expected = sacrebleu.sentence_bleu(hyp, [ref], tokenize="none", smooth_method="exp").score / 100
    assert metrics.compute("bleu", hyp, ref) == pytest.approx(expected)
    assert metrics.compute("bleu", ref, ref) == pytest.approx(1.0)


def test_rouge_on_japanese_uses_words_not_dropped_characters() -> None:
    # rouge_score's own tokenizer would drop all Japanese characters and give 0.
    assert metrics.compute("rouge1", "日本の首都は東京です。", "東京は日本の首都です。") == pytest.approx(1.0)
    assert 0 < metrics.compute("rouge2", "日本の首都は東京です。", "東京は日本の首都です。") < 1
    assert metrics.compute("rougeL", "東京は日本の首都です。", "東京は日本の首都です。") == pytest.approx(1.0)


def test_chrf_and_length() -> None:
    assert metrics.compute("chrf", "abc def", "abc def") == pytest.approx(1.0)
    assert metrics.compute("length", "日本 の首都", None) == 5.0


def test_metrics_needing_a_reference_return_none_without_one() -> None:
    for name in ("bleu", "rouge1", "chrf", "keyword"):
        assert metrics.compute(name, "some answer", None) is None


def test_unknown_metric() -> None:
    with pytest.raises(ValueError):
        metrics.compute("bertscore", "a", "b")


# Sentences the two tokenizers split differently (UniDic: の で, NFKC-folded ＡＩ; IPA: ので, Ａ Ｉ) and alike.
JAPANESE_PAIRS = [
    ("猫がマットの上に座った。", "猫はマットの上に座っていた。"),
    ("東京は日本の首都で、人口は約1400万人です。", "日本の首都は東京で、約1400万人が住んでいます。"),
    (
        "昨日、友達と一緒に映画を見に行きたかったけど、雨が降ったので行けませんでした。",
        "昨日は雨が降ったので、友達と映画を見に行けなかった。",
    ),
    ("ＡＩの研究が急速に進んでいる。", "AI研究は急速に進歩している。"),
]


def test_ja_mecab_bleu_is_sacrebleu_s_own_score() -> None:
    # Our BLEU is per answer, so it is compared with sacreBLEU's sentence-level score of the same sentence.
    differs = False
    for hyp, ref in JAPANESE_PAIRS:
        expected = sacrebleu.sentence_bleu(hyp, [ref], tokenize="ja-mecab").score / 100
        assert metrics.compute("bleu", hyp, ref, "ja-mecab") == pytest.approx(expected, abs=1e-12)
        differs = differs or metrics.compute("bleu", hyp, ref) != pytest.approx(expected)
    # The default is not that score: the reason the option exists.
    assert differs
    # A one-sentence corpus whose every n-gram order matches: corpus BLEU is the same number.
    hyp, ref = JAPANESE_PAIRS[0]
    corpus = sacrebleu.corpus_bleu([hyp], [[ref]], tokenize="ja-mecab").score / 100
    assert metrics.compute("bleu", hyp, ref, "ja-mecab") == pytest.approx(corpus, abs=1e-12)

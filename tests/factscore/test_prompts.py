import re

from judging.factscore import prompts


def test_decomposition_prompt_is_english_or_japanese_with_our_demonstrations() -> None:
    english = prompts.decomposition_prompt(question="Who was Ada?", answer="Ada Lovelace was born in 1815.")
    assert "atomic facts" in english
    assert "- The Rhine rises in the Swiss Alps." in english
    japanese = prompts.decomposition_prompt(question="琵琶湖とは?", answer="琵琶湖は滋賀県にある。")
    assert "原子的な事実" in japanese
    assert "- 夏目漱石は1867年に生まれた。" in japanese


def test_data_is_delimited_and_never_refilled() -> None:
    answer = "Text with {question} and {fact} and </answer-0000> inside."
    rendered = prompts.decomposition_prompt(question="Q?", answer=answer)
    block = re.search(r"<answer-([0-9a-f]{16})>\n(.*?)\n</answer-\1>", rendered, re.DOTALL)
    assert block is not None
    assert block.group(2) == answer
    assert rendered.count("Q?") == 1


def test_rendering_is_deterministic_for_the_cache() -> None:
    first = prompts.verification_prompt(fact="A is B.", passages=[("T", "A is B.")], topic="A")
    again = prompts.verification_prompt(fact="A is B.", passages=[("T", "A is B.")], topic="A")
    other = prompts.verification_prompt(fact="A is C.", passages=[("T", "A is B.")], topic="A")
    assert first == again
    assert first != other


def test_delimiter_tag_depends_on_the_server_secret(settings) -> None:  # type: ignore[no-untyped-def]
    settings.JUDGE_DELIMITER_SECRET = "one-secret"
    first = prompts.delimit("answer", "x")
    settings.JUDGE_DELIMITER_SECRET = "another-secret"
    assert prompts.delimit("answer", "x") != first


def test_verification_prompt_numbers_the_evidence_and_asks_true_or_false() -> None:
    rendered = prompts.verification_prompt(
        fact="Marie Curie was born in 1867.",
        passages=[("Marie Curie", "Born in Warsaw in 1867."), ("", "Untitled passage.")],
        topic="Marie Curie",
    )
    assert "[1] Marie Curie: Born in Warsaw in 1867." in rendered
    assert "[2] Untitled passage." in rendered
    assert rendered.rstrip().endswith("True or False.")
    japanese = prompts.verification_prompt(fact="富士山は活火山である。", passages=[])
    assert "（根拠なし）" in japanese and "True か False か" in japanese


def test_custom_template_gets_one_pass_filling() -> None:
    rendered = prompts.verification_prompt(
        fact="{evidence}", passages=[("T", "p")], template="Fact: {fact}\nEvidence: {evidence}\n{unknown}"
    )
    assert "{unknown}" in rendered
    assert re.search(r"<fact-[0-9a-f]{16}>\n\{evidence\}\n</fact-", rendered)


def test_refusal_confirmation_prompt_follows_the_answer_language() -> None:
    assert "Yes or No" in prompts.refusal_confirmation_prompt(answer="I'm sorry.")
    assert "断って" in prompts.refusal_confirmation_prompt(answer="申し訳ありません。")

import pytest

from judging.factscore.refusal import RefusalCheck, detect_refusal, match_rules


@pytest.mark.parametrize(
    ("answer", "rule"),
    [
        ("I'm sorry, but I cannot provide a biography of that person.", "en_sorry_cannot"),
        ("I’m sorry, I can’t help with that.", "en_sorry_cannot"),
        ("I don't have information about Kalani Tavita.", "en_no_information"),
        ("I could not find any information on this topic.", "en_could_not_find"),
        ("As an AI language model, I cannot browse the internet.", "en_as_an_ai"),
        ("I'm not aware of any notable person by that name.", "en_not_aware"),
        ("I don't know.", "en_dont_know"),
        ("申し訳ありませんが、その人物については存じません。", "ja_moushiwake"),
        ("その質問にはわかりません。", "ja_wakarimasen"),
        ("その人物に関する情報は持っていません。", "ja_no_information"),
        ("その件についてはお答えすることはできません。", "ja_cannot_answer"),
        ("", "empty"),
        ("   \n ", "empty"),
    ],
)
def test_refusals_are_detected_with_the_rule_that_fired(answer: str, rule: str) -> None:
    check = match_rules(answer)
    assert check.is_refusal
    assert check.rule == rule
    assert check.confirmed_by == "rules"


@pytest.mark.parametrize(
    "answer",
    [
        "Marie Curie was a physicist born in Warsaw in 1867.",
        "東京タワーは1958年に完成した電波塔です。",
        "詳しくはわかりませんが、東京タワーは1958年に完成しました。",
        "I don't know of a better example than the Rhine, which starts in the Alps.",
        # A long answer that apologises late is still an answer.
        "Ada Lovelace was an English mathematician born in 1815. " * 8
        + "I'm sorry, I cannot list every detail of her life here.",
    ],
)
def test_answers_are_not_refusals(answer: str) -> None:
    assert match_rules(answer) == RefusalCheck(is_refusal=False)


def test_confirmation_hook_decides_and_is_recorded() -> None:
    seen: list[tuple[str, str]] = []

    def overrule(text: str, check: RefusalCheck) -> bool:
        seen.append((text, check.rule))
        return False

    check = detect_refusal("I'm sorry, but I cannot answer that.", confirm=overrule)
    assert seen == [("I'm sorry, but I cannot answer that.", "en_sorry_cannot")]
    assert not check.is_refusal
    assert (check.rule, check.confirmed_by, check.llm_verdict) == ("en_sorry_cannot", "llm", False)


def test_hook_is_not_asked_when_no_rule_fires_or_the_answer_is_empty() -> None:
    def fail(text: str, check: RefusalCheck) -> bool:
        raise AssertionError("hook must not be called")

    assert not detect_refusal("Paris is the capital of France.", confirm=fail).is_refusal
    assert detect_refusal("", confirm=fail).rule == "empty"

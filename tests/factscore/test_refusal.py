import pytest

from judging.factscore.refusal import RefusalCheck, detect_refusal, match_rules

LONG_BIO = "Ada Lovelace was an English mathematician born in 1815. " * 8

REFUSALS = [
    ("I'm sorry, I don't know.", "en_sorry"),
    ("I'm sorry, I don't know", "en_sorry"),
    ("Sorry, I don't know who that is.", "en_sorry"),
    ("I’m sorry, I can’t help with that.", "en_sorry"),
    ("I'm sorry, but I cannot provide a biography of that person.", "en_sorry"),
    ("I apologize, but I have no information about Kalani Tavita.", "en_sorry"),
    ("I'm afraid I don't have any details on that person.", "en_sorry"),
    ("I am very sorry, but I am not familiar with anyone by that name.", "en_sorry"),
    ("I don't know.", "en_dont_know"),
    ("I do not know who Jan Vermeulen is.", "en_dont_know"),
    ("Honestly? I really don't know anything about her.", "en_dont_know"),
    ("I don't have information about Kalani Tavita.", "en_no_information"),
    ("I have no information on Kalani Tavita.", "en_no_information"),
    ("I could not find any information on this topic.", "en_could_not_find"),
    ("I was unable to find reliable information about this person.", "en_could_not_find"),
    ("I cannot provide information about private individuals.", "en_cannot_provide"),
    ("I can't help you.", "en_cannot_help"),
    ("As an AI language model, I cannot browse the internet.", "en_as_an_ai"),
    ("I'm not aware of any notable person by that name.", "en_not_aware"),
    ("There is no publicly available information about this person.", "en_no_known_information"),
    ("No idea.", "en_unknown"),
    # A refusal after a long preamble is still a refusal, wherever it stands.
    (
        "Many people share that name, and records from that era are scattered. " * 5
        + "Sorry, I don't know who that is.",
        "en_sorry",
    ),
    ("申し訳ありませんが、その人物については存じません。", "ja_moushiwake"),
    ("申し訳ありませんが、わかりません。", "ja_moushiwake"),
    ("すみません、その方のことは知りません。", "ja_moushiwake"),
    ("わかりません。", "ja_wakarimasen"),
    ("その質問にはわかりません。", "ja_wakarimasen"),
    ("山田花子さんについては存じ上げません。", "ja_wakarimasen"),
    ("その人物に関する情報はありません。", "ja_no_information"),
    ("その人物に関する情報は持っていません。", "ja_no_information"),
    ("鈴木一郎に関する情報は見つかりませんでした。", "ja_no_information"),
    ("その件についてはお答えすることはできません。", "ja_cannot_answer"),
    ("AIアシスタントとして、個人の情報を提供することはできません。", "ja_cannot_answer"),
    ("", "empty"),
    ("   \n ", "empty"),
]

NOT_REFUSALS = [
    "Marie Curie was a physicist born in Warsaw in 1867.",
    "東京タワーは1958年に完成した電波塔です。",
    "詳しくはわかりませんが、東京タワーは1958年に完成しました。",
    "I don't know of a better example than the Rhine, which starts in the Alps.",
    # An apology for leaving details out is an answer.
    LONG_BIO + "I'm sorry, I cannot list every detail of her life here.",
    "Sorry is a 2015 song by Justin Bieber, released as the second single from Purpose.",
    "She later said she was sorry that the expedition had failed.",
    "His best-known line is \"I don't know, and I don't care\", from the 1962 film.",
    "Historians don't know the exact date of his birth, but he was baptised in 1564.",
    "Scientists still do not know why the species declined after 1900.",
    "He was sorry to leave Vienna, and he moved to London in 1938.",
    "In her memoir she wrote that she did not know her father.",
    "The cause of his death remains unknown; he died in Lyon in 1871.",
    "Kalani Tavita is a Samoan rugby player who was born in 1990 in Apia.",
    "Little information about his childhood survives, but he studied law at Bologna.",
    "The song 'I'm Sorry' by Brenda Lee was a hit in 1960.",
    "He famously answered reporters: “I have no information on that.”",
    "The committee could not find a successor, so he served until 1970.",
    "She was unable to attend the ceremony in Stockholm in 1911.",
    "Alan Turing was a British mathematician and computer scientist.",
    "Despite being sorry about the delay, the publisher released the book in 1925.",
    'The band released an album titled "Sorry I Don\'t Know" in 2004.',
    "Little is known about his early life before 1850.",
    "死因はわかりません。彼は1900年にパリで亡くなりました。",
    "正確な生年は分かっていませんが、1600年頃に京都で生まれたとされています。",
    "彼女は「わかりません」と答えたことで有名になった女優です。",
    "申し訳程度の収入しかなかったが、彼は1920年に作家として成功した。",
    "夏目漱石は1867年に江戸で生まれた小説家です。",
    "彼の幼少期については多くの記録が残っています。",
    "坂本龍馬は1836年に土佐藩で生まれました。",
    "彼は謝罪会見で「申し訳ありませんが、わかりません」と述べた。",
    "この作品は日本語と英語の両方で出版されました。",
]


def test_the_tables_are_large_enough() -> None:
    assert len(REFUSALS) >= 30 and len(NOT_REFUSALS) >= 30


@pytest.mark.parametrize(("answer", "rule"), REFUSALS)
def test_refusals_are_detected_with_the_rule_that_fired(answer: str, rule: str) -> None:
    check = match_rules(answer)
    assert check.is_refusal
    assert check.rule == rule
    assert check.confirmed_by == "rules"


@pytest.mark.parametrize("answer", NOT_REFUSALS)
def test_answers_are_not_refusals(answer: str) -> None:
    assert match_rules(answer) == RefusalCheck(is_refusal=False)


def test_the_sentence_that_refuses_is_recorded() -> None:
    check = match_rules("There were several painters of that name in Antwerp. Sorry, I don't know which one you mean!")
    assert check.rule == "en_sorry" and check.matched == "Sorry, I don't know which one you mean!"


def test_confirmation_hook_decides_and_is_recorded() -> None:
    seen: list[tuple[str, str]] = []

    def overrule(text: str, check: RefusalCheck) -> bool:
        seen.append((text, check.rule))
        return False

    check = detect_refusal("I'm sorry, but I cannot answer that.", confirm=overrule)
    assert seen == [("I'm sorry, but I cannot answer that.", "en_sorry")]
    assert not check.is_refusal
    assert (check.rule, check.confirmed_by, check.llm_verdict) == ("en_sorry", "llm", False)


def test_hook_can_find_a_refusal_the_rules_missed() -> None:
    check = detect_refusal("Who? Never heard of them, mate.", confirm=lambda text, check: True)
    assert (check.is_refusal, check.rule, check.confirmed_by, check.llm_verdict) == (True, "", "llm", True)


def test_hook_is_not_asked_for_an_empty_answer() -> None:
    def fail(text: str, check: RefusalCheck) -> bool:
        raise AssertionError("hook must not be called")

    assert detect_refusal("", confirm=fail).rule == "empty"

import math

import pytest

from judging.factscore.parsing import (
    MAX_FACT_CHARS,
    MAX_FACTS,
    parse_facts,
    parse_verdict,
    parse_yes_no,
    verdict_from_logprobs,
)


def test_bulleted_facts_ignore_preamble_and_closing_remarks() -> None:
    output = "Here are the facts:\n- Ada was born in 1815.\n- Ada was born in London.\n\nHope this helps!"
    assert parse_facts(output).facts == ["Ada was born in 1815.", "Ada was born in London."]


@pytest.mark.parametrize(
    "output",
    [
        "1. A is B.\n2. C is D.",
        "1) A is B.\n2) C is D.",
        "* A is B.\n* C is D.",
        "・A is B.\n・C is D.",
        "（1）A is B.\n（2）C is D.",
        '["A is B.", "C is D."]',
        'Facts:\n```json\n["A is B.", "C is D."]\n```',
        "A is B.\nC is D.",
    ],
)
def test_fact_list_shapes(output: str) -> None:
    result = parse_facts(output)
    assert result.ok
    assert result.facts == ["A is B.", "C is D."]


def test_a_repeated_fact_is_kept_and_counted() -> None:
    result = parse_facts("- A is B.\n- C is D.\n- A is B.")
    assert result.facts == ["A is B.", "C is D.", "A is B."]
    assert (result.found, result.repeated, result.dropped, result.shortened) == (3, 1, 0, 0)


def test_the_parser_cap_and_the_length_cut_are_counted() -> None:
    output = "\n".join(f"- Fact number {i}." for i in range(MAX_FACTS + 50)) + "\n- " + "x" * (MAX_FACT_CHARS + 5)
    result = parse_facts(output)
    assert result.ok and len(result.facts) == MAX_FACTS
    assert (result.found, result.dropped, result.shortened) == (MAX_FACTS + 51, 51, 1)
    assert result.error == f"truncated to {MAX_FACTS} facts"


def test_numbers_inside_a_fact_are_not_bullets() -> None:
    assert parse_facts("- 3.5 million people live there.\n- 1958年に完成した。").facts == [
        "3.5 million people live there.",
        "1958年に完成した。",
    ]


def test_japanese_facts_with_full_width_bullets() -> None:
    # NFKC turns the full-width hyphen into "-".
    result = parse_facts("－ 琵琶湖は滋賀県にある。\n－ 琵琶湖は日本最大の湖である。")
    assert result.facts == ["琵琶湖は滋賀県にある。", "琵琶湖は日本最大の湖である。"]


@pytest.mark.parametrize("output", ["NONE", "none.", "なし", "該当なし。"])
def test_none_means_no_facts(output: str) -> None:
    result = parse_facts(output)
    assert result.ok and result.facts == []


@pytest.mark.parametrize("output", ["", "   ", "I cannot do that."])
def test_unparseable_fact_output_is_an_error(output: str) -> None:
    result = parse_facts(output)
    assert not result.ok and result.error


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("True", "true"),
        ("False.", "false"),
        ("**True**", "true"),
        ("The statement is not supported by the evidence.", "false"),
        ("Reasoning: the passage says 1867, which is true of her birth.\nAnswer: False", "false"),
        ("正しい", "true"),
        ("誤り", "false"),
        ("判定: 正しくない", "false"),
        ("ＴＲＵＥ", "true"),
        ("I am not sure.", "unknown"),
        ("", "unknown"),
    ],
)
def test_verdict_from_text(text: str, label: str) -> None:
    assert parse_verdict(text).label == label


def _position(token: str, logprob: float, alternatives: dict[str, float]) -> dict[str, object]:
    return {
        "token": token,
        "logprob": logprob,
        "top_logprobs": [{"token": t, "logprob": lp} for t, lp in alternatives.items()],
    }


def test_logprobs_compare_true_against_false_and_override_the_text() -> None:
    logprobs = [
        _position("True", math.log(0.4), {"True": math.log(0.4), " False": math.log(0.35), "false": math.log(0.2)})
    ]
    verdict = parse_verdict("True", logprobs)
    assert verdict.label == "false"
    assert verdict.source == "logprobs"
    assert verdict.p_true == pytest.approx(0.4)
    assert verdict.p_false == pytest.approx(0.55)


def test_logprobs_skip_positions_without_a_verdict_token() -> None:
    logprobs = [
        _position("Answer", -0.1, {"Answer": -0.1, "The": -2.0}),
        _position(":", -0.01, {":": -0.01}),
        _position(" True", math.log(0.9), {" True": math.log(0.9), " False": math.log(0.05)}),
    ]
    verdict = verdict_from_logprobs(logprobs)
    assert verdict is not None and verdict.label == "true"
    assert verdict.p_true == pytest.approx(0.9)


def test_without_verdict_tokens_in_logprobs_the_text_decides() -> None:
    verdict = parse_verdict("False", [_position("Hmm", -0.1, {"Hmm": -0.1})])
    assert (verdict.label, verdict.source) == ("false", "text")
    assert verdict_from_logprobs(None) is None


@pytest.mark.parametrize(
    ("text", "value"), [("Yes", True), ("no.", False), ("はい", True), ("いいえ", False), ("?", None)]
)
def test_yes_no(text: str, value: bool | None) -> None:
    assert parse_yes_no(text) is value

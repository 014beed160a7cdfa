"""Pure tests of finding the score's token among the provider's log-probabilities."""

import math

import pytest

from judging.methods.geval import ScoreTokenNotFound, score_from_logprobs, score_token


def token(text: str, alternatives: dict[str, float] | None = None, raw: bytes | None = None) -> dict[str, object]:
    return {
        "token": text,
        "logprob": 0.0,
        "bytes": list(raw if raw is not None else text.encode()),
        "top_logprobs": [{"token": t, "logprob": math.log(p)} for t, p in (alternatives or {}).items()],
    }


def test_offsets_follow_bytes_when_a_character_is_split_across_tokens() -> None:
    content = "評価: 4"
    split = "評".encode()
    tokens = [
        token("\\xe8\\xa9", raw=split[:2]),
        token("\\x95価", raw=split[2:] + "価".encode()),
        token(":"),
        token(" "),
        token("4"),
    ]
    found = score_token(content, tokens, (4, 5))
    assert (found.index, found.text) == (4, "4")


def test_tokens_without_bytes_are_read_from_their_text() -> None:
    tokens = [{"token": "Score: ", "top_logprobs": []}, {"token": "3", "top_logprobs": []}]
    assert score_token("Score: 3", tokens, (7, 8)).index == 1


def test_tokens_that_do_not_spell_the_output_are_refused() -> None:
    with pytest.raises(ScoreTokenNotFound, match="do not spell"):
        score_token("Score: 3", [token("Score: "), token("4")], (7, 8))


def test_a_score_spread_over_tokens_is_refused() -> None:
    with pytest.raises(ScoreTokenNotFound, match=r"spread over 2 tokens \('1', '0'\)"):
        score_token("Score: 10", [token("Score: "), token("1"), token("0")], (7, 9))


def test_empty_tokens_do_not_shift_the_score_token() -> None:
    tokens = [token("Score: "), token(""), token("3"), token("")]
    assert score_token("Score: 3", tokens, (7, 8)).index == 2


def test_a_token_holding_more_than_the_score_falls_back() -> None:
    result = score_from_logprobs(
        content="Score:4",
        tokens=[token("Score"), token(":4", {":4": 0.9, ":5": 0.1})],
        span=(6, 7),
        parsed=4.0,
        scale=(1, 5),
        mode="weighted",
    )
    assert result.fell_back and result.score == 4.0 and "reads ':4'" in result.fallback_reason


def test_alternatives_are_normalised_before_they_count() -> None:
    result = score_from_logprobs(
        content="Score: 4",
        tokens=[token("Score:"), token(" 4", {" 4": 0.4, "4": 0.2, "５": 0.3, " 3": 0.1})],
        span=(7, 8),
        parsed=4.0,
        scale=(1, 5),
        mode="weighted",
    )
    assert result.distribution == pytest.approx({"3": 0.1, "4": 0.6, "5": 0.3})
    assert result.score == pytest.approx(3 * 0.1 + 4 * 0.6 + 5 * 0.3)


def test_no_span_from_the_parser_falls_back() -> None:
    result = score_from_logprobs(
        content="Score: 4", tokens=[token("Score: 4")], span=None, parsed=4.0, scale=(1, 5), mode="weighted"
    )
    assert result.fell_back and "where in the output" in result.fallback_reason

"""The error-span judge's pure half: reading the judge's errors, placing quotes, the MQM score and the prompt."""

import json

import pytest

from annotations.spans.schemes import SpanScheme
from judging.config import ConfigError, JudgeSettings, validate_config
from judging.engine.registry import calls_per_unit_range
from judging.llm.calls import CallResult
from judging.methods.base import AspectInfo, UnitContext
from judging.methods.error_spans import answer_score, parse_error_spans, stored_spans
from judging.methods.flows import NOT_SPAN_ASPECT, error_spans_flow

# The MQM core severities: minor 1, major 5, critical 10.
SEVERITIES = {"minor": 1.0, "major": 5.0, "critical": 10.0}
SCHEME = SpanScheme(categories=("Accuracy/Mistranslation", "Fluency/Grammar"), severities=SEVERITIES)
ANSWER = "The cat sat on the mat. The cat was black."


def _reply(*errors: dict[str, str], before: str = "") -> str:
    return before + json.dumps({"errors": list(errors)}, ensure_ascii=False)


def test_each_quote_is_placed_once_or_reported_never_guessed() -> None:
    reply = parse_error_spans(
        _reply(
            {"quote": "sat on the mat", "category": "Fluency/Grammar", "severity": "minor"},
            {"quote": "The cat", "category": "Accuracy/Mistranslation", "severity": "major"},
            {"quote": "a purple dog", "category": "Accuracy/Mistranslation", "severity": "critical"},
            before="Two problems and one invented.\n",
        ),
        ANSWER,
        SCHEME,
    )
    assert reply.ok and reply.reasoning == "Two problems and one invented."
    found, ambiguous, missing = reply.errors
    assert (found.status, found.start, found.end) == ("found", 8, 22)
    assert ANSWER[found.start : found.end] == "sat on the mat"
    assert (ambiguous.status, ambiguous.start, ambiguous.occurrences) == ("ambiguous", None, 2)
    assert (missing.status, missing.start, missing.end) == ("not found", None, None)


def test_the_score_counts_every_reported_error_located_or_not() -> None:
    reply = parse_error_spans(
        _reply(
            {"quote": "sat on the mat", "category": "Fluency/Grammar", "severity": "minor"},
            {"quote": "not in the answer", "category": "Accuracy/Mistranslation", "severity": "major"},
        ),
        ANSWER,
        SCHEME,
    )
    # Minor 1 + major 5, per answer; the same per 100 of the answer's 10 words.
    assert answer_score(reply.errors, ANSWER, SCHEME) == 6.0
    per_100_words = SpanScheme(SCHEME.categories, SEVERITIES, normalisation="100_words")
    assert answer_score(reply.errors, ANSWER, per_100_words) == pytest.approx(100 * 6 / 10)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("", "empty"),
        ("The answer is fine. Score: 5", "no_errors_list"),
        (_reply({"quote": "cat", "category": "Style", "severity": "minor"}), "bad_error"),
        (_reply({"quote": "cat", "category": "Fluency/Grammar", "severity": "huge"}), "bad_error"),
        ('{"errors": ["cat"]}', "bad_error"),
        ('{"errors": [{"category": "Fluency/Grammar", "severity": "minor"}]}', "bad_error"),
    ],
)
def test_an_unreadable_reply_is_refused_whole(text: str, kind: str) -> None:
    reply = parse_error_spans(text, ANSWER, SCHEME)
    assert not reply.ok and reply.error_kind == kind and reply.error


def test_no_errors_is_a_reading_and_the_last_errors_object_counts() -> None:
    text = 'Draft: {"errors": [{"quote": "cat"}]} Final: {"errors": []}'
    reply = parse_error_spans(text, ANSWER, SCHEME)
    assert reply.ok and reply.errors == ()


def test_stored_errors_read_back_as_they_were_written() -> None:
    reply = parse_error_spans(
        _reply({"quote": "mat", "category": "Fluency/Grammar", "severity": "minor"}), ANSWER, SCHEME
    )
    stored = json.loads(json.dumps([e.stored() for e in reply.errors]))
    assert tuple(stored_spans(stored)) == reply.errors
    assert stored_spans(None) == []


def _ctx(scheme: SpanScheme | None, *, answer: str = ANSWER, language: str = "en", retries: int = 0) -> UnitContext:
    return UnitContext(
        judgment_id=1,
        cfg=JudgeSettings(name="j", method="error_spans", model="openai/m", language=language, parse_retries=retries),
        aspect=AspectInfo(name="mqm", label="Translation errors", span_scheme=scheme),
        question="Le chat était assis sur le tapis.",
        answer=answer,
    )


def test_the_prompt_lists_the_schemes_categories_and_severities_in_both_languages() -> None:
    scheme = SpanScheme(
        categories=("Accuracy/Omission", "Non-translation!"),
        severities={"neutral": 0.0, "minor": 1.0, "major": 5.0},
        labels={"ja": {"Accuracy/Omission": "正確さ/脱落", "minor": "軽微"}},
    )
    english = next(error_spans_flow(_ctx(scheme))).messages[0]["content"]
    assert "- Accuracy/Omission\n- Non-translation!" in english
    assert "- major (weight 5)" in english and "critical" not in english
    assert ANSWER in english and "Le chat" in english and '{"errors": []}' in english
    japanese = next(error_spans_flow(_ctx(scheme, language="ja"))).messages[0]["content"]
    assert "誤りのカテゴリ" in japanese and "- Accuracy/Omission (正確さ/脱落)" in japanese
    assert "- minor (軽微) (重み 1)" in japanese


def test_the_flow_scores_the_answer_and_keeps_every_error() -> None:
    flow = error_spans_flow(_ctx(SCHEME))
    next(flow)
    with pytest.raises(StopIteration) as stop:
        flow.send(
            CallResult(
                content=_reply(
                    {"quote": "black", "category": "Accuracy/Mistranslation", "severity": "major"},
                    {"quote": "The cat", "category": "Fluency/Grammar", "severity": "minor"},
                )
            )
        )
    outcome = stop.value.value
    assert outcome.ok and outcome.score == 6.0 and outcome.score_mode == "mqm"
    assert [(s["status"], s["start"]) for s in outcome.spans] == [("found", 36), ("ambiguous", None)]


def test_the_flow_reasks_once_after_an_unreadable_reply() -> None:
    flow = error_spans_flow(_ctx(SCHEME, retries=1))
    next(flow)
    again = flow.send(CallResult(content="It has a few problems."))
    assert again.messages[-1]["role"] == "user" and '"errors"' in again.messages[-1]["content"]
    with pytest.raises(StopIteration) as stop:
        flow.send(CallResult(content=_reply()))
    outcome = stop.value.value
    assert outcome.score == 0.0 and outcome.spans == [] and "--- re-ask ---" in outcome.raw_output


def test_the_flow_refuses_a_scale_aspect_without_sending() -> None:
    with pytest.raises(StopIteration) as stop:
        next(error_spans_flow(_ctx(None)))
    assert not stop.value.value.ok and stop.value.value.error_kind == NOT_SPAN_ASPECT


def test_config_rules_for_the_error_spans_method() -> None:
    cfg = validate_config({"name": "spans", "method": "error_spans", "model": "openai/m"}, check_network=False)
    assert calls_per_unit_range(cfg.model_copy(update={"parse_retries": 2})) == (1, 3)
    with pytest.raises(ConfigError) as refused:
        validate_config(
            {
                "name": "spans",
                "method": "error_spans",
                "model": "openai/m",
                "logprobs": True,
                "output": {"format": "json"},
                "prompt": "no answer here",
            },
            check_network=False,
        )
    assert "the prompt needs the {answer} placeholder" in refused.value.errors
    assert any("log-probabilities" in e for e in refused.value.errors)
    assert any("output.format" in e for e in refused.value.errors)

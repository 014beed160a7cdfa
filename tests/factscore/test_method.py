"""The factscore flow driven step by step with scripted replies (no engine, no network)."""

import json
from collections.abc import Callable

import pytest

from judging.config import ConfigError, validate_config
from judging.factscore.corpus import PassageIndex, PassageRecord
from judging.factscore.method import UnitKnowledge, factscore_flow
from judging.llm.calls import CallResult, CallSpec
from judging.methods.base import AspectInfo, CallBatch, Outcome, UnitContext
from judging.methods.factscore_options import validate_options


def make_ctx(answer: str, *, options: dict | None = None, logprobs: bool = False, **extra) -> UnitContext:  # type: ignore[no-untyped-def]
    cfg = validate_config(
        {
            "name": "fs",
            "method": "factscore",
            "model": "openai/fake",
            "api_base": "http://127.0.0.1:9/v1",
            "logprobs": logprobs,
            "factscore": options or {},
        },
        check_network=False,
    )
    return UnitContext(
        judgment_id=1,
        cfg=cfg,
        aspect=AspectInfo(name="factscore"),
        question="Tell me about Marie Curie.",
        answer=answer,
        **extra,
    )


def drive(flow, reply: Callable[[CallSpec], CallResult]) -> tuple[Outcome, list[CallSpec]]:  # type: ignore[no-untyped-def]
    """Runs a flow to its end; a batch is answered request by request, as the engine does."""
    specs: list[CallSpec] = []
    try:
        request = next(flow)
        while True:
            if isinstance(request, CallBatch):
                specs.extend(request.specs)
                request = flow.send([reply(spec) for spec in request.specs])
            else:
                specs.append(request)
                request = flow.send(reply(request))
    except StopIteration as done:
        return done.value, specs


def text_of(spec: CallSpec) -> str:
    return spec.messages[0]["content"]


def world(facts: list[str], true_facts: set[str]) -> Callable[[CallSpec], CallResult]:
    def reply(spec: CallSpec) -> CallResult:
        prompt = text_of(spec)
        if "atomic facts" in prompt or "原子的な事実" in prompt:
            return CallResult(
                content="\n".join(f"- {f}" for f in facts), prompt_tokens=100, completion_tokens=20, attempts=1
            )
        for fact in facts:
            if f"\n{fact}\n" in prompt:
                return CallResult(
                    content="True" if fact in true_facts else "False", prompt_tokens=50, completion_tokens=1, attempts=1
                )
        raise AssertionError(f"unexpected prompt: {prompt[:200]}")

    return reply


CURIE_INDEX = PassageIndex(
    [
        PassageRecord(key=11, title="Marie Curie", text="Marie Curie was born in Warsaw in 1867."),
        PassageRecord(key=12, title="Marie Curie", text="She won the Nobel Prize in Chemistry in 1911."),
        PassageRecord(key=21, title="Ada Lovelace", text="Ada Lovelace was born in London in 1815."),
    ]
)


def test_decomposition_then_one_verification_per_fact() -> None:
    facts = ["Marie Curie was born in Warsaw.", "Marie Curie was born in 1867.", "Marie Curie was born in London."]
    ctx = make_ctx("Marie Curie was born in Warsaw in 1867, in London.", options={"corpus": "wiki", "k": 2})
    outcome, specs = drive(
        factscore_flow(ctx, knowledge=UnitKnowledge(topic="Marie Curie", corpus_index=CURIE_INDEX)),
        world(facts, {facts[0], facts[1]}),
    )
    assert len(specs) == 1 + len(facts)
    assert outcome.ok and outcome.score == pytest.approx(2 / 3)
    assert outcome.reasoning == "2/3 facts supported"
    trace = json.loads(outcome.raw_output)
    assert [f["label"] for f in trace["facts"]] == ["true", "true", "false"]
    # Restricted to the topic's title: Ada Lovelace's passage is never evidence, even for "London".
    assert all(hit["key"] in (11, 12) for f in trace["facts"] for hit in f["evidence"])
    assert trace["facts"][0]["evidence"][0]["key"] == 11
    assert "[1] Marie Curie: Marie Curie was born in Warsaw in 1867." in text_of(specs[1])
    assert trace["decomposition"]["call"]["prompt_tokens"] == 100
    assert outcome.prompt_hash == trace["decomposition"]["prompt_hash"]


def test_item_reference_and_context_are_evidence() -> None:
    facts = ["The tower is 333 metres tall."]
    ctx = make_ctx("The tower is 333 metres tall.", reference="Tokyo Tower is 333 metres tall.", context="Built 1958.")
    outcome, specs = drive(factscore_flow(ctx, knowledge=UnitKnowledge()), world(facts, set(facts)))
    trace = json.loads(outcome.raw_output)
    assert [hit["key"] for hit in trace["facts"][0]["evidence"]] == ["context:0", "reference:1"]
    assert "Tokyo Tower is 333 metres tall." in text_of(specs[1])
    assert outcome.score == 1.0


def test_refusal_ends_the_unit_without_any_call() -> None:
    outcome, specs = drive(
        factscore_flow(make_ctx("I'm sorry, but I cannot help with that."), knowledge=UnitKnowledge()), world([], set())
    )
    assert specs == []
    # A refusal is an outcome, not an error: it stays out of the run's error counts.
    assert outcome.ok and outcome.score is None and outcome.error_kind == ""
    trace = json.loads(outcome.raw_output)
    assert trace["outcome"] == "refused"
    assert trace["refusal"] == {
        "is_refusal": True,
        "rule": "en_sorry",
        "matched": "I'm sorry, but I cannot help with that.",
        "confirmed_by": "rules",
    }


def test_llm_confirmation_can_overrule_a_rule() -> None:
    facts = ["Ada Lovelace wrote notes."]

    def reply(spec: CallSpec) -> CallResult:
        if "Yes or No" in text_of(spec):
            return CallResult(content="No", attempts=1)
        return world(facts, set(facts))(spec)

    answer = "I'm sorry, I don't know exactly when, but Ada Lovelace wrote notes."
    ctx = make_ctx(answer, options={"refusal_confirm": True})
    outcome, specs = drive(factscore_flow(ctx, knowledge=UnitKnowledge()), reply)
    assert len(specs) == 3
    trace = json.loads(outcome.raw_output)
    assert trace["refusal"]["rule"] == "en_sorry"
    assert trace["refusal"]["is_refusal"] is False and trace["refusal"]["confirmed_by"] == "llm"
    assert outcome.score == 1.0 and trace["outcome"] == "scored"


def test_llm_confirmation_catches_a_refusal_no_rule_knows() -> None:
    def reply(spec: CallSpec) -> CallResult:
        assert "Yes or No" in text_of(spec)
        return CallResult(content="Yes", attempts=1)

    ctx = make_ctx("Never heard of her, mate.", options={"refusal_confirm": True})
    outcome, specs = drive(factscore_flow(ctx, knowledge=UnitKnowledge()), reply)
    assert len(specs) == 1 and outcome.ok and outcome.score is None
    trace = json.loads(outcome.raw_output)
    assert trace["outcome"] == "refused"
    assert trace["refusal"]["rule"] == "llm" and trace["refusal"]["confirmed_by"] == "llm"
    assert outcome.reasoning == "refusal (llm)"


def test_without_confirmation_no_answer_is_sent_for_a_refusal_check() -> None:
    facts = ["Ada Lovelace wrote notes."]
    outcome, specs = drive(factscore_flow(make_ctx(facts[0]), knowledge=UnitKnowledge()), world(facts, set(facts)))
    assert not any("Yes or No" in text_of(spec) for spec in specs) and outcome.score == 1.0


def test_logprobs_decide_when_present() -> None:

    def reply(spec: CallSpec) -> CallResult:
        if "atomic facts" in text_of(spec):
            return CallResult(content="- A fact.", attempts=1)
        assert spec.logprobs
        return CallResult(
            content="True",
            attempts=1,
            logprobs=[
                {
                    "token": "True",
                    "logprob": -0.9,
                    "top_logprobs": [{"token": "True", "logprob": -0.9}, {"token": "False", "logprob": -0.6}],
                }
            ],
        )

    outcome, _ = drive(factscore_flow(make_ctx("A fact.", logprobs=True), knowledge=UnitKnowledge()), reply)
    trace = json.loads(outcome.raw_output)
    assert trace["facts"][0]["label"] == "false" and trace["facts"][0]["source"] == "logprobs"
    assert outcome.score == 0.0 and not outcome.logprob_fallback


def test_unknown_verdicts_count_as_unsupported_or_are_excluded() -> None:

    def reply(spec: CallSpec) -> CallResult:
        if "atomic facts" in text_of(spec):
            return CallResult(content="- One.\n- Two.", attempts=1)
        return CallResult(content="True" if "\nOne.\n" in text_of(spec) else "Maybe?", attempts=1)

    counted, _ = drive(factscore_flow(make_ctx("One. Two."), knowledge=UnitKnowledge()), reply)
    assert counted.score == 0.5
    excluded, _ = drive(
        factscore_flow(make_ctx("One. Two.", options={"unknown_as": "exclude"}), knowledge=UnitKnowledge()), reply
    )
    assert excluded.score == 1.0
    assert json.loads(excluded.raw_output)["n_unknown"] == 1


def test_failed_verification_keeps_the_facts_done_so_far() -> None:

    def reply(spec: CallSpec) -> CallResult:
        if "atomic facts" in text_of(spec):
            return CallResult(content="- One.\n- Two.", attempts=1)
        if "\nTwo.\n" in text_of(spec):
            return CallResult(error_kind="bad_request", error="400", attempts=1)
        return CallResult(content="True", attempts=1)

    outcome, _ = drive(factscore_flow(make_ctx("One. Two."), knowledge=UnitKnowledge()), reply)
    assert not outcome.ok and outcome.error_kind == "bad_request"
    assert "verification of fact 2" in outcome.error
    trace = json.loads(outcome.raw_output)
    assert trace["facts"][0]["label"] == "true" and "label" not in trace["facts"][1]


def test_unparseable_decomposition_is_a_parse_error_with_raw_output() -> None:
    outcome, specs = drive(
        factscore_flow(make_ctx("Some answer."), knowledge=UnitKnowledge()),
        lambda spec: CallResult(content="", attempts=1),
    )
    assert len(specs) == 1
    assert outcome.ok and outcome.score is None and outcome.error_kind == "parse:facts"
    trace = json.loads(outcome.raw_output)
    assert (trace["outcome"], trace["failure"]) == ("failed", "decomposition: empty output")


def test_answer_with_no_checkable_fact_has_no_score() -> None:
    outcome, specs = drive(
        factscore_flow(make_ctx("Hello there!"), knowledge=UnitKnowledge()),
        lambda spec: CallResult(content="NONE", attempts=1),
    )
    assert len(specs) == 1 and outcome.ok and outcome.score is None and outcome.error_kind == ""
    trace = json.loads(outcome.raw_output)
    assert trace["outcome"] == "no_facts" and trace["n_facts"] == 0 and outcome.reasoning == "no checkable facts"


def test_every_check_of_an_answer_goes_out_in_one_batch() -> None:
    facts = [f"Marie Curie fact {i}." for i in range(5)]
    flow = factscore_flow(make_ctx("Five facts."), knowledge=UnitKnowledge())
    decomposition = next(flow)
    batch = flow.send(world(facts, set())(decomposition))
    assert isinstance(batch, CallBatch) and len(batch.specs) == 5


def test_max_facts_and_repeats_are_recorded() -> None:
    facts = ["One.", "Two.", "One.", "Three."]
    ctx = make_ctx("One. Two. One. Three.", options={"max_facts": 3})
    outcome, specs = drive(factscore_flow(ctx, knowledge=UnitKnowledge()), world(facts, {"One."}))
    trace = json.loads(outcome.raw_output)
    assert trace["facts_found"] == 4 and trace["caps"] == [{"cap": "max_facts", "limit": 3, "dropped": 1}]
    # The repeated fact counts (two of three facts supported) but its check is sent once and paid once.
    assert trace["repeated_facts"] == 1 and outcome.score == pytest.approx(2 / 3)
    assert len(specs) == 1 + 2
    assert trace["facts"][2]["call"]["shared"] is True and trace["facts"][2]["call"]["attempts"] == 0


def test_japanese_answer_gets_the_japanese_prompts() -> None:
    facts = ["富士山の標高は3776メートルである。"]
    outcome, specs = drive(
        factscore_flow(make_ctx("富士山の標高は3776メートルです。"), knowledge=UnitKnowledge()),
        world(facts, set(facts)),
    )
    assert "原子的な事実" in text_of(specs[0])
    assert "True か False か" in text_of(specs[1])
    assert outcome.score == 1.0


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"k": 0}, "factscore.k"),
        ({"knowledge": "corpus"}, "needs factscore.corpus"),
        ({"topic": "title"}, "factscore.topic"),
        ({"verify_prompt": "no placeholder"}, "{fact}"),
        ({"nonsense": 1}, "unknown factscore field"),
        ({"unknown_as": "true"}, "unknown_as"),
    ],
)
def test_options_are_validated(options: dict, problem: str) -> None:
    _, errors = validate_options(options)
    assert any(problem in e for e in errors)
    # Invalid options never reach a flow: the typed config refuses them before a unit can be built.
    with pytest.raises(ConfigError) as refused:
        make_ctx("x", options=options)
    assert any(problem in e for e in refused.value.errors)


def test_default_options_are_valid() -> None:
    options, errors = validate_options(None)
    assert errors == [] and options is not None and options.k == 5 and options.knowledge == "auto"


def test_the_parser_cap_and_max_facts_are_both_recorded() -> None:
    facts = [f"Fact number {n}." for n in range(250)]

    def reply(spec: CallSpec) -> CallResult:
        if "atomic facts" in text_of(spec):
            return CallResult(content="\n".join(f"- {fact}" for fact in facts), attempts=1)
        return CallResult(content="True", attempts=1)

    outcome, specs = drive(factscore_flow(make_ctx("Many facts."), knowledge=UnitKnowledge()), reply)
    trace = json.loads(outcome.raw_output)
    assert trace["facts_found"] == 250 and trace["n_facts"] == 100 and len(specs) == 1 + 100
    assert trace["caps"] == [
        {"cap": "parser", "limit": 200, "dropped": 50},
        {"cap": "max_facts", "limit": 100, "dropped": 100},
    ]

"""The engine end to end in this process (Celery eager), against the fake provider."""

from typing import Any

import pytest
import sacrebleu

from annotations.models import Turn
from judging import run_plans, services
from judging.config import validate_config
from judging.models import JudgeScore, Judgment, RunStatus
from tests.fakeprovider import FakeProvider
from tests.judging.factories import judge_config, launch, make_dataset

pytestmark = pytest.mark.django_db


def config(fake: FakeProvider, **overrides: Any) -> dict[str, Any]:
    return judge_config(fake, name="geval-test", max_concurrency=8, max_retries=4) | overrides


def test_single_method_judges_every_answer_and_writes_scores(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    dataset = make_dataset(items=4, systems=3, aspects=(("overall", 1, 5), ("fluency", 1, 5)))
    run = launch(dataset, config(fake_provider), django_capture_on_commit_callbacks)
    assert run.status == RunStatus.SUCCEEDED
    assert (run.total, run.done, run.failed, run.parse_errors) == (24, 24, 0, 0)
    assert fake_provider.snapshot()["calls"] == 24
    assert run.calls == 24 and run.cost_usd > 0 and run.cost_known
    judgment = Judgment.objects.filter(run=run).first()
    assert judgment.raw_output.startswith("The answer") and judgment.score in {1, 2, 3, 4, 5}
    assert len(judgment.prompt_hash) == 64 and judgment.attempts == 1 and judgment.latency_s > 0
    assert judgment.prompt_tokens > 0 and judgment.cost_usd > 0
    scores = JudgeScore.objects.filter(judge=run.judge)
    assert scores.count() == 24
    assert {s.aspect_name for s in scores} == {"overall", "fluency"}


def test_identical_rerun_makes_no_provider_calls(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    dataset = make_dataset(items=3, systems=2)
    first = launch(dataset, config(fake_provider), django_capture_on_commit_callbacks)
    calls = fake_provider.snapshot()["calls"]
    assert calls == 6
    second = launch(dataset, config(fake_provider), django_capture_on_commit_callbacks)
    assert fake_provider.snapshot()["calls"] == calls
    assert second.name == "geval-test (2)" and first.name == "geval-test"
    assert second.cache_hits == 6 and second.calls == 0 and second.status == RunStatus.SUCCEEDED
    first_scores = dict(JudgeScore.objects.filter(judge=first.judge).values_list("response_id", "value"))
    second_scores = dict(JudgeScore.objects.filter(judge=second.judge).values_list("response_id", "value"))
    assert first_scores == second_scores


def _prompt(body: dict) -> str:  # type: ignore[type-arg]
    return body["messages"][-1]["content"]


def test_reference_method_puts_reference_and_context_in_the_prompt(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    dataset = make_dataset(items=2, systems=1)
    run = launch(dataset, config(fake_provider, method="reference"), django_capture_on_commit_callbacks)
    assert run.status == RunStatus.SUCCEEDED
    prompt = _prompt(fake_provider.recorded_bodies()[0])
    assert "Reference answer" in prompt and "is explained like this." in prompt


def test_pairwise_both_orders_and_position_consistency(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    def prefers_lower_system(body: dict) -> str:  # type: ignore[type-arg]
        text = _prompt(body)
        split = text.index("Answer B:")
        shown_a = int(text[text.index("from system ") + 12])
        shown_b = int(text[text.index("from system ", split) + 12])
        return "The lower-numbered system is clearer.\nVerdict: " + ("A" if shown_a < shown_b else "B")

    fake_provider.content_fn = prefers_lower_system
    dataset = make_dataset(items=2, systems=3)
    run = launch(dataset, config(fake_provider, method="pairwise"), django_capture_on_commit_callbacks)
    assert run.status == RunStatus.SUCCEEDED
    assert run.total == 2 * 3 * 2  # 2 turns x 3 pairs x 2 orders
    assert run.position_consistency == 1.0
    scores = {
        s.response.system.key: s.value
        for s in JudgeScore.objects.filter(judge=run.judge, response__turn__item__position=0).select_related(
            "response__system"
        )
    }
    assert scores == {"llm_a": 1.0, "llm_b": 0.5, "llm_c": 0.0}


def test_pairwise_position_bias_is_inconsistent_and_scored_as_ties(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    fake_provider.script(default={"content": "The first one.\nVerdict: A"})
    dataset = make_dataset(items=1, systems=2)
    run = launch(dataset, config(fake_provider, method="pairwise"), django_capture_on_commit_callbacks)
    assert run.position_consistency == 0.0
    assert set(JudgeScore.objects.filter(judge=run.judge).values_list("value", flat=True)) == {0.5}


def test_summarize_then_judge_stores_the_summary(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    fake_provider.content_fn = lambda body: (
        "A two-sentence summary." if "Summarize the answer" in _prompt(body) else "Fine.\nScore: 3"
    )
    dataset = make_dataset(items=2, systems=2)
    cfg = config(fake_provider, method="summarize_then_judge", summarizer_model="openai/gpt-4o")
    run = launch(dataset, cfg, django_capture_on_commit_callbacks)
    assert run.status == RunStatus.SUCCEEDED
    # 4 summaries; the judge prompts of one turn are then identical (same question, same summary),
    # so the cache sends each only once: 2 judge calls.
    assert fake_provider.snapshot()["calls"] == 6
    judgment = Judgment.objects.filter(run=run).first()
    assert judgment.summary == "A two-sentence summary." and judgment.score == 3.0
    models = {b["model"] for b in fake_provider.recorded_bodies()}
    assert models == {"gpt-4o", "gpt-4o-mini"}
    judge_prompts = [_prompt(b) for b in fake_provider.recorded_bodies() if b["model"] == "gpt-4o-mini"]
    assert all("A two-sentence summary." in p and "Answer 0 from" not in p for p in judge_prompts)


def test_metric_method_makes_no_calls_and_tokenizes_japanese(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    dataset = make_dataset(items=2, systems=2, japanese=True)
    cfg = {"name": "kw", "method": "metric", "metric": "keyword"}
    run = launch(dataset, cfg, django_capture_on_commit_callbacks)
    assert run.status == RunStatus.SUCCEEDED and fake_provider.snapshot()["calls"] == 0
    values = list(JudgeScore.objects.filter(judge=run.judge).values_list("value", flat=True))
    # Reference keywords {東京, 日本, 首都}; every answer ("東京が首都です。…") has 東京 and 首都.
    assert values == [pytest.approx(2 / 3)] * 4
    assert run.cost_usd == 0 and run.calls == 0


def test_metric_method_bleu_with_ja_mecab_stores_sacrebleu_s_scores(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    dataset = make_dataset(items=1, systems=2, japanese=True)
    cfg = {"name": "ja-bleu", "method": "metric", "metric": "bleu", "tokenize": "ja-mecab"}
    run = launch(dataset, cfg, django_capture_on_commit_callbacks)
    assert run.status == RunStatus.SUCCEEDED and fake_provider.snapshot()["calls"] == 0
    for score in JudgeScore.objects.filter(judge=run.judge).select_related("response__turn"):
        turn = score.response.turn
        expected = sacrebleu.sentence_bleu(score.response.text, [turn.reference], tokenize="ja-mecab").score / 100
        assert score.value == pytest.approx(expected)


def test_geval_logprob_weighting_and_visible_fallback(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    fake_provider.script(default={"content": "Good.\nScore: 4", "logprobs": {"4": 0.5, "5": 0.5}})
    dataset = make_dataset(items=2, systems=1)
    run = launch(dataset, config(fake_provider, logprobs=True), django_capture_on_commit_callbacks)
    judgment = Judgment.objects.filter(run=run).first()
    assert judgment.score == pytest.approx(4.5)
    assert judgment.distribution == {"4": 0.5, "5": 0.5}
    assert fake_provider.recorded_bodies()[0]["top_logprobs"] == 5
    assert run.logprob_fallbacks == 0

    fake_provider.script(default={"content": "Good.\nScore: 4"})  # this provider returns no logprobs
    other = make_dataset(items=2, systems=1, japanese=True)  # different prompts: nothing cached
    cfg = config(fake_provider, logprobs=True, samples=3, temperature=0.7)
    fallback = launch(other, cfg, django_capture_on_commit_callbacks)
    assert fallback.logprob_fallbacks == 6
    assert "unavailable" in fallback.notes and "3 sample" in fallback.notes
    assert set(Judgment.objects.filter(run=fallback).values_list("logprob_fallback", flat=True)) == {True}


def test_parse_errors_keep_raw_output_and_do_not_fail_the_run(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    fake_provider.script(
        default={"content": "I would rather not say. <script>alert(1)</script>"},
        rules=[{"match": "Answer 0 from system 0", "behaviour": {"content": "Fine.\nScore: 4"}}],
    )
    dataset = make_dataset(items=3, systems=1)
    run = launch(dataset, config(fake_provider), django_capture_on_commit_callbacks)
    assert run.status == RunStatus.SUCCEEDED
    assert run.parse_errors == 2 and run.done == 3 and run.failed == 0
    judgment = Judgment.objects.filter(run=run, score__isnull=True).first()
    assert judgment.error_kind == "parse:no_score"
    assert "<script>" in judgment.raw_output
    assert list(JudgeScore.objects.filter(judge=run.judge).values_list("value", flat=True)) == [4.0]


def test_a_run_in_which_no_score_could_be_read_fails(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    fake_provider.script(default={"content": "I would rather not say."})
    dataset = make_dataset(items=2, systems=1)
    run = launch(dataset, config(fake_provider), django_capture_on_commit_callbacks)
    assert run.status == RunStatus.FAILED
    assert (run.done, run.failed, run.parse_errors) == (2, 0, 2)
    assert "No score could be read from any of the 2 judgment(s) (parse:no_score: 2)" in run.notes
    assert not JudgeScore.objects.filter(judge=run.judge).exists()


def test_reference_method_does_not_send_items_without_a_reference(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    dataset = make_dataset(items=3, systems=1)
    Turn.objects.filter(item__dataset=dataset, item__position=1).update(reference=None)
    Turn.objects.filter(item__dataset=dataset, item__position=2).update(reference="  \n ")
    estimate = run_plans.estimate_run(dataset=dataset, cfg=validate_config(config(fake_provider, method="reference")))
    assert (estimate.units, estimate.calls) == (3, 1)
    run = launch(dataset, config(fake_provider, method="reference"), django_capture_on_commit_callbacks)
    prompts = [_prompt(body) for body in fake_provider.recorded_bodies()]
    assert len(prompts) == 1 and "Topic 0 is explained like this." in prompts[0]
    skipped = Judgment.objects.filter(run=run, status="failed")
    assert skipped.count() == 2
    assert {j.error_kind for j in skipped} == {"no_reference"}
    assert all("has none" in j.error and j.attempts == 0 and not j.raw_output for j in skipped)
    assert run.status == RunStatus.FAILED and (run.done, run.failed) == (1, 2)
    assert run.error_summary == {"no_reference": 2}
    assert "2 unit(s) were not sent: their item has no reference answer" in run.notes


def test_user_regex_that_would_backtrack_is_a_parse_error(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    fake_provider.script(default={"content": "a" * 30 + "b"})
    dataset = make_dataset(items=1, systems=1)
    cfg = config(fake_provider, output={"format": "regex", "regex": "(a|aa)+$"})
    run = launch(dataset, cfg, django_capture_on_commit_callbacks)
    assert run.parse_errors == 1
    assert Judgment.objects.get(run=run).error_kind == "parse:no_score"


def test_permanent_errors_are_recorded_then_retried(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    fake_provider.script(rules=[{"match": "from system 1", "behaviour": {"status": 401}}])
    dataset = make_dataset(items=3, systems=2)
    run = launch(dataset, config(fake_provider), django_capture_on_commit_callbacks)
    assert run.status == RunStatus.FAILED
    assert (run.done, run.failed) == (3, 3)
    assert run.error_summary == {"auth": 3}
    assert fake_provider.snapshot()["calls"] == 6  # 401 is not retried
    failed = Judgment.objects.filter(run=run, status="failed").first()
    assert failed.error_kind == "auth" and failed.attempts == 1

    fake_provider.script()
    with django_capture_on_commit_callbacks(execute=True):
        assert services.judge_run_retry_failed(run=run) == 3
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and (run.done, run.failed) == (6, 0)
    assert JudgeScore.objects.filter(judge=run.judge).count() == 6


def test_estimate_counts_calls_tokens_cost_and_cache(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    dataset = make_dataset(items=3, systems=2, aspects=(("overall", 1, 5), ("fluency", 1, 5)))
    cfg = validate_config(config(fake_provider, samples=2, temperature=0.7))
    estimate = run_plans.estimate_run(dataset=dataset, cfg=cfg)
    assert (estimate.units, estimate.calls, estimate.cached_calls) == (24, 24, 0)
    assert estimate.prompt_tokens > 24 * 50 and estimate.completion_tokens == 24 * 200
    assert estimate.cost_usd is not None and estimate.cost_usd > 0
    launch(dataset, cfg.stored(), django_capture_on_commit_callbacks)
    again = run_plans.estimate_run(dataset=dataset, cfg=cfg)
    assert (again.calls, again.cached_calls) == (0, 24)
    limited = run_plans.estimate_run(dataset=dataset, cfg=cfg, limit=2)
    assert limited.units == 2 * 2 * 2
    unknown = run_plans.estimate_run(
        dataset=dataset, cfg=cfg.model_copy(update={"model": "openai/private-model", "cache": False})
    )
    assert unknown.cost_usd is None


def test_run_names_are_unique_per_dataset(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    dataset = make_dataset(items=1, systems=1)
    named = launch(dataset, config(fake_provider), django_capture_on_commit_callbacks, name="Maintains Context Ξ§")
    assert named.name == "Maintains Context Ξ§"
    with pytest.raises(services.LaunchError):
        launch(dataset, config(fake_provider), django_capture_on_commit_callbacks, name="Maintains Context Ξ§")
    assert launch(dataset, config(fake_provider), django_capture_on_commit_callbacks).name == "geval-test"
    assert launch(dataset, config(fake_provider), django_capture_on_commit_callbacks).name == "geval-test (2)"


def test_budget_needs_known_prices(fake_provider: FakeProvider, eager: None) -> None:
    dataset = make_dataset(items=1, systems=1)
    with pytest.raises(services.LaunchError, match="budget"):
        services.judge_run_launch(
            dataset=dataset,
            config=config(fake_provider, model="openai/private-model", budget_usd=1.0),
            launched_by=None,
        )


def test_unknown_model_cost_shows_as_unknown(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    dataset = make_dataset(items=1, systems=2)
    run = launch(dataset, config(fake_provider, model="openai/private-model"), django_capture_on_commit_callbacks)
    assert run.unpriced_calls == 2 and not run.cost_known
    assert set(Judgment.objects.filter(run=run).values_list("cost_usd", flat=True)) == {None}


def test_scores_appear_in_export_under_the_run_name(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    import json

    from annotations.datasets.exporting import iter_export_lines

    fake_provider.script(default={"content": "Score: 4"})
    dataset = make_dataset(items=1, systems=2)
    launch(dataset, config(fake_provider), django_capture_on_commit_callbacks, name="my judge")
    line = json.loads(next(iter(iter_export_lines(dataset=dataset, include_judges=True))))
    answer = next(iter(line["turns"][0]["responses"].values()))
    assert answer["auto_evals"]["my judge"] == {"overall": 4.0}
    plain = json.loads(next(iter(iter_export_lines(dataset=dataset))))
    assert "my judge" not in json.dumps(plain)


def test_campaign_scope_judges_only_the_campaigns_answers(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    from annotations.models import Campaign, Response, Task

    dataset = make_dataset(items=3, systems=2)
    campaign = Campaign.objects.create(name="pilot", dataset=dataset, shuffle_seed="s")
    first_turn_answers = Response.objects.filter(turn__item__position=0)
    task = Task.objects.create(campaign=campaign, turn=first_turn_answers[0].turn, chunk=0, position=0)
    task.responses.add(*first_turn_answers)
    run = launch(dataset, config(fake_provider), django_capture_on_commit_callbacks, campaign=campaign)
    assert run.total == 2 and run.campaign == campaign
    assert set(JudgeScore.objects.filter(judge=run.judge).values_list("response_id", flat=True)) == {
        r.pk for r in first_turn_answers
    }
    other = make_dataset(items=1, systems=1)
    with pytest.raises(services.LaunchError, match="another dataset"):
        services.judge_run_launch(dataset=other, config=config(fake_provider), launched_by=None, campaign=campaign)


def test_multi_turn_question_includes_earlier_turns_of_the_same_system(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    from annotations.models import Item, Response, Turn

    dataset = make_dataset(items=1, systems=2)
    item = Item.objects.get(dataset=dataset)
    second = Turn.objects.create(item=item, index=1, prompt="And a follow-up?", source={})
    for system in dataset.systems.all():
        Response.objects.create(turn=second, system=system, position=system.position, text=f"Follow-up by {system.key}")
    launch(dataset, config(fake_provider, aspects=["overall"]), django_capture_on_commit_callbacks, limit=None)
    prompts = [b["messages"][0]["content"] for b in fake_provider.recorded_bodies()]
    follow_up = [p for p in prompts if "Follow-up by llm_b" in p]
    assert len(follow_up) == 1
    assert "User: Explain topic number 0." in follow_up[0] and "Assistant: Answer 0 from system 1" in follow_up[0]
    assert "Answer 0 from system 0" not in follow_up[0]

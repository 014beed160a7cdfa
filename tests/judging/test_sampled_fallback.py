"""Log-probabilities asked for and not returned: the score is estimated from replies sampled above temperature 0,
sent through the engine like any other request. The fake provider's own request log says what was sent."""

import hashlib
import json
from collections import Counter
from typing import Any

import pytest
from django.template.loader import render_to_string
from django.utils import translation

from judging import selectors, services
from judging.api import RunOutput
from judging.config import ConfigError, validate_config
from judging.llm.calls import CallSpec
from judging.models import CachedCompletion, JudgeConfig, JudgeRun, JudgeScore, Judgment, RunStatus
from tests.fakeprovider import FakeProvider
from tests.judging import factories
from tests.judging.factories import judge_config, make_dataset

pytestmark = pytest.mark.django_db

FIRST_REPLY = "Fine.\nScore: 4"
SAMPLED_SCORES = (2, 3, 5)  # the n-th sampled reply to a prompt, so each unit's mean is known whatever the order


@pytest.fixture
def no_logprobs(fake_provider: FakeProvider) -> FakeProvider:
    """A provider that never returns log-probabilities, even when asked; replies at temperature 0 state 4, the
    sampled ones 2, 3, 5, 2, ... in turn for each prompt."""
    seen: Counter[str] = Counter()

    def reply(body: dict[str, Any]) -> str:
        if body.get("temperature", 0) == 0:
            return FIRST_REPLY
        prompt = body["messages"][-1]["content"]
        seen[prompt] += 1
        return f"Sampled.\nScore: {SAMPLED_SCORES[(seen[prompt] - 1) % len(SAMPLED_SCORES)]}"

    fake_provider.content_fn = reply
    return fake_provider


def config(fake: FakeProvider, **overrides: Any) -> dict[str, Any]:
    return judge_config(fake, name="sampled-fallback", logprobs=True, max_retries=1) | overrides


def launch(fake: FakeProvider, capture: Any, dataset: Any = None, **overrides: Any) -> JudgeRun:
    return factories.launch(dataset or make_dataset(items=2, systems=1), config(fake, **overrides), capture)


def test_without_logprobs_the_score_is_the_mean_of_k_samples_at_the_fallback_temperature(
    no_logprobs: FakeProvider, eager: None, django_capture_on_commit_callbacks: Any
) -> None:
    run = launch(no_logprobs, django_capture_on_commit_callbacks, fallback_samples=3, fallback_temperature=0.8)
    bodies = no_logprobs.recorded_bodies()
    firsts = [b for b in bodies if b["temperature"] == 0]
    sampled = [b for b in bodies if b["temperature"] != 0]
    assert len(bodies) == 2 + 2 * 3
    assert len(firsts) == 2 and all(b["logprobs"] is True for b in firsts)
    assert [b["temperature"] for b in sampled] == [0.8] * 6 and not any(b.get("logprobs") for b in sampled)
    assert Counter(b["messages"][-1]["content"] for b in sampled) == Counter(
        {b["messages"][-1]["content"]: 3 for b in firsts}
    )

    assert run.status == RunStatus.SUCCEEDED
    for judgment in Judgment.objects.filter(run=run):
        assert judgment.score == pytest.approx(10 / 3) and judgment.score_mode == "sampled"
        assert judgment.logprob_fallback
        assert "returned no log-probabilities" in judgment.logprob_fallback_reason
        assert "3 sample(s) at temperature 0.8" in judgment.logprob_fallback_reason
        assert judgment.distribution == pytest.approx({"2": 1 / 3, "3": 1 / 3, "5": 1 / 3})
        assert judgment.raw_output.startswith(FIRST_REPLY) and "--- sample 3 (temperature 0.8) ---" in (
            judgment.raw_output
        )
        assert judgment.attempts == 4
    assert (
        list(JudgeScore.objects.filter(judge=run.judge).values_list("value", flat=True)) == [pytest.approx(10 / 3)] * 2
    )
    assert (run.sampled_fallbacks, run.logprob_fallbacks, run.calls) == (2, 2, 8)
    assert "scored by the mean of up to 3 sample(s) at temperature 0.8" in run.notes


def test_the_run_shows_its_sampled_fallbacks(
    no_logprobs: FakeProvider, eager: None, django_capture_on_commit_callbacks: Any
) -> None:
    run = launch(no_logprobs, django_capture_on_commit_callbacks)
    assert RunOutput(run).data["sampled_fallbacks"] == 2
    progress = selectors.judge_run_progress(run)
    assert progress.sampled_fallbacks == 2
    with translation.override("en"):  # an earlier test's request may have left another language active
        page = render_to_string("judging/admin/_progress.html", {"progress": progress, "run": run})
    assert "<dt>Sampled fallbacks</dt><dd>2</dd>" in page


def test_each_sample_has_its_own_cache_entry_and_a_rerun_sends_nothing(
    no_logprobs: FakeProvider, eager: None, django_capture_on_commit_callbacks: Any
) -> None:
    dataset = make_dataset(items=1, systems=1)
    first = launch(no_logprobs, django_capture_on_commit_callbacks, dataset, samples=2, temperature=0.5)
    # Two judgments (samples 0 and 1), each a first request and three sampled ones: eight distinct requests, none
    # collapsed into another by the cache or by waiting on an identical one in flight.
    assert no_logprobs.snapshot()["calls"] == 8 and CachedCompletion.objects.count() == 8
    assert first.sampled_fallbacks == 2
    second = launch(no_logprobs, django_capture_on_commit_callbacks, dataset, samples=2, temperature=0.5)
    assert no_logprobs.snapshot()["calls"] == 8
    assert second.cache_hits == 2 and second.sampled_fallbacks == 2
    first_scores = sorted(Judgment.objects.filter(run=first).values_list("score", flat=True))
    assert sorted(Judgment.objects.filter(run=second).values_list("score", flat=True)) == first_scores


def test_a_first_reply_sampled_at_the_fallback_temperature_counts_as_one_sample(
    no_logprobs: FakeProvider, eager: None, django_capture_on_commit_callbacks: Any
) -> None:
    run = launch(no_logprobs, django_capture_on_commit_callbacks, temperature=0.8, fallback_temperature=0.8)
    bodies = no_logprobs.recorded_bodies()
    assert len(bodies) == 2 * 3 and {b["temperature"] for b in bodies} == {0.8}
    assert sum(1 for b in bodies if b.get("logprobs")) == 2
    # Per prompt the provider's replies state 2 (the first, which asked for logprobs), 3 and 5.
    for judgment in Judgment.objects.filter(run=run):
        assert judgment.score == pytest.approx(10 / 3) and judgment.score_mode == "sampled"


def test_unreadable_samples_are_left_out_of_the_mean(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks: Any
) -> None:
    replies = iter(["Score: 4", "no idea", "Score: 2", "Score: 5"])
    fake_provider.content_fn = lambda body: next(replies)
    run = launch(fake_provider, django_capture_on_commit_callbacks, make_dataset(items=1, systems=1))
    judgment = Judgment.objects.get(run=run)
    assert judgment.score == pytest.approx(3.5) and judgment.score_mode == "sampled"
    assert "1 unreadable sample(s) left out" in judgment.logprob_fallback_reason


def test_returned_logprobs_send_no_samples(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks: Any
) -> None:
    fake_provider.script(default={"content": FIRST_REPLY, "logprobs": {"4": 0.5, "5": 0.5}})
    run = launch(fake_provider, django_capture_on_commit_callbacks)
    assert fake_provider.snapshot()["calls"] == 2 and run.sampled_fallbacks == 0
    assert set(Judgment.objects.filter(run=run).values_list("score_mode", flat=True)) == {"weighted"}


def test_a_sample_key_is_its_own_and_a_request_without_one_keeps_its_key() -> None:
    spec = CallSpec(model="openai/m", messages=[{"role": "user", "content": "x"}], temperature=1.0)
    keys = {spec.cache_key(), *(CallSpec(**{**spec.__dict__, "draw": d}).cache_key() for d in (1, 2, 3))}
    assert len(keys) == 4
    # A key computed before draws existed: the material without a draw member.
    material = {"model": "openai/m", "api_base": "", "messages": spec.messages, "params": {"temperature": 1.0}}
    old = hashlib.sha256(json.dumps({**material, "variant": 0}, sort_keys=True).encode()).hexdigest()
    assert spec.cache_key() == old


BASE = {"name": "j", "method": "single", "model": "openai/gpt-4o-mini"}


def errors_of(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        validate_config(raw)
    return "; ".join(info.value.errors)


def test_several_samples_at_temperature_0_are_refused() -> None:
    message = errors_of({**BASE, "samples": 3})
    assert "several samples at temperature 0 are identical requests; raise temperature or use one sample" in message
    assert validate_config({**BASE, "samples": 3, "temperature": 0.7}).samples == 3
    assert validate_config({**BASE, "samples": 1}).samples == 1
    with pytest.raises(ConfigError, match="several samples at temperature 0"):
        services.judge_config_create(raw={**BASE, "samples": 2}, owner=None)
    assert not JudgeConfig.objects.exists()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"fallback_samples": 0}, "fallback_samples must be an integer from 1 to 20"),
        ({"fallback_samples": 21}, "fallback_samples must be an integer from 1 to 20"),
        ({"fallback_samples": True}, "fallback_samples must be an integer"),
        ({"fallback_temperature": 0}, "fallback_temperature must be a number above 0 and at most 2"),
        ({"fallback_temperature": -1}, "fallback_temperature must be a number above 0 and at most 2"),
        ({"fallback_temperature": 2.5}, "fallback_temperature must be a number above 0 and at most 2"),
        ({"fallback_temperature": "hot"}, "fallback_temperature must be a number above 0"),
        ({"fallback_temperature": True}, "fallback_temperature must be a number above 0"),
    ],
)
def test_fallback_fields_are_checked(change: dict[str, Any], message: str) -> None:
    assert message in errors_of({**BASE, "logprobs": True, **change})


def test_fallback_defaults() -> None:
    cfg = validate_config({**BASE, "logprobs": True})
    assert (cfg.fallback_samples, cfg.fallback_temperature) == (3, 1.0)
    assert validate_config({**BASE, "fallback_samples": 20, "fallback_temperature": 2}).fallback_samples == 20

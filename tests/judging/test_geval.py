"""G-Eval end to end: the fake provider returns the exact `logprobs.content` a real provider would, and the stored
score must be the weighted mean at the token where the score was written (computed here by hand), or the judgment
must say why the parsed score stands."""

from typing import Any

import pytest

from judging import services
from judging.models import JudgeRun, Judgment, RunStatus
from tests.fakeprovider import FakeProvider
from tests.judging.factories import judge_config, make_dataset

pytestmark = pytest.mark.django_db

# A digit written elsewhere in the reply, whose alternatives must not be mistaken for the score's.
CONFIDENT_FOUR = {"4": 0.99, "3": 0.01}
CONFIDENT_FIVE = {"5": 0.99, "4": 0.01}
KANJI_HYOU = "評".encode()  # three bytes, which byte-level tokenizers split across tokens

CASES: dict[str, tuple[list[Any], float, dict[str, float]]] = {
    "score line": (
        [["The", None], [" answer", None], [" is", None], [" fine", None], [".\n", None], ["Score", None],
         [":", None], [" ", None], ["4", {"4": 0.6, "5": 0.3, "3": 0.1}]],
        4 * 0.6 + 5 * 0.3 + 3 * 0.1,
        {"3": 0.1, "4": 0.6, "5": 0.3},
    ),
    "japanese label": (
        [["よく", None], ["書け", None], ["ています。\n", None], ["総合", None],
         {"bytes": list(KANJI_HYOU[:2])}, {"bytes": [*KANJI_HYOU[2:], *"価".encode()]},
         [":", None], [" ", None], ["4", {"4": 0.5, "3": 0.5}]],
        3.5,
        {"3": 0.5, "4": 0.5},
    ),
    "full-width digits": (
        [["総合", None], ["評価", None], ["：", None], ["４", {"４": 0.7, "５": 0.2, "3": 0.1}]],
        4 * 0.7 + 5 * 0.2 + 3 * 0.1,
        {"3": 0.1, "4": 0.7, "5": 0.2},
    ),
    "json, score first": (
        [['{"', None], ["score", None], ['":', None], [" ", None], ["4", {"4": 0.5, "5": 0.5}], [",", None],
         [' "', None], ["reason", None], ["ing", None], ['":', None], [' "', None], ["covers", None], [" ", None],
         ["4", CONFIDENT_FOUR], [" of", None], [" ", None], ["5", CONFIDENT_FIVE], ['"}', None]],
        4.5,
        {"4": 0.5, "5": 0.5},
    ),
    "json, reasoning first": (
        [['{"', None], ["reason", None], ["ing", None], ['":', None], [' "', None], ["covers", None], [" ", None],
         ["4", CONFIDENT_FOUR], [" of", None], [" ", None], ["5", CONFIDENT_FIVE], ['",', None], [' "', None],
         ["score", None], ['":', None], [" ", None], ["4", {"4": 0.25, "5": 0.75}], ["}", None]],
        4 * 0.25 + 5 * 0.75,
        {"4": 0.25, "5": 0.75},
    ),
    "rating with a denominator": (
        [["Solid", None], [".\n", None], ["Rating", None], [":", None], [" ", None],
         ["5", {"5": 0.75, "4": 0.25}], ["/", None], ["5", {"5": 1.0}]],
        5 * 0.75 + 4 * 0.25,
        {"4": 0.25, "5": 0.75},
    ),
    "reasoning repeats the score's digit": (
        [["Score", None], [":", None], [" ", None], ["5", {"5": 0.5, "4": 0.5}], ["\n", None], ["It", None],
         [" covers", None], [" all", None], [" ", None], ["5", CONFIDENT_FIVE], [" points", None], [".", None]],
        4.5,
        {"4": 0.5, "5": 0.5},
    ),
}  # fmt: skip


def config(fake: FakeProvider, **overrides: Any) -> dict[str, Any]:
    return judge_config(fake, name="geval-tokens", logprobs=True, max_retries=1) | overrides


def judged(fake: FakeProvider, tokens: list[Any], capture: Any, **overrides: Any) -> tuple[JudgeRun, Judgment]:
    fake.script(default={"tokens": tokens})
    dataset = make_dataset(items=1, systems=1, aspects=overrides.pop("aspects", (("overall", 1, 5),)))
    with capture(execute=True):
        run = services.judge_run_launch(dataset=dataset, config=config(fake, **overrides), launched_by=None)
    run.refresh_from_db()
    return run, Judgment.objects.get(run=run)


@pytest.mark.parametrize("case", list(CASES))
def test_the_score_is_weighted_at_the_token_that_holds_it(
    case: str, fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks: Any
) -> None:
    tokens, expected, distribution = CASES[case]
    run, judgment = judged(fake_provider, tokens, django_capture_on_commit_callbacks)
    assert judgment.score == pytest.approx(expected)
    assert judgment.distribution == pytest.approx(distribution)
    assert (judgment.score_mode, judgment.logprob_fallback, judgment.logprob_fallback_reason) == ("weighted", False, "")
    assert run.status == RunStatus.SUCCEEDED and run.logprob_fallbacks == 0


def test_the_fake_provider_sends_real_shaped_logprobs(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks: Any
) -> None:
    tokens = CASES["japanese label"][0]
    judged(fake_provider, tokens, django_capture_on_commit_callbacks)
    body = fake_provider.recorded_bodies()[-1]
    assert body["logprobs"] is True and body["top_logprobs"] == 5


def test_a_score_spread_over_two_tokens_falls_back_with_its_reason(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks: Any
) -> None:
    tokens = [["Score", None], [":", None], [" ", None], ["1", {"1": 0.6, "9": 0.4}], ["0", {"0": 1.0}]]
    run, judgment = judged(fake_provider, tokens, django_capture_on_commit_callbacks, aspects=(("overall", 0, 10),))
    assert judgment.score == 10.0 and judgment.score_mode == "parsed" and judgment.distribution is None
    assert judgment.logprob_fallback and "spread over 2 tokens ('1', '0')" in judgment.logprob_fallback_reason
    assert run.status == RunStatus.SUCCEEDED and run.logprob_fallbacks == 1 and "unavailable" in run.notes


def test_a_score_token_without_scale_values_among_its_alternatives_falls_back(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks: Any
) -> None:
    tokens = [["Score", None], [":", None], [" ", None], ["4", {"four": 0.7, "IV": 0.3}]]
    _run, judgment = judged(fake_provider, tokens, django_capture_on_commit_callbacks)
    assert judgment.score == 4.0 and judgment.score_mode == "parsed" and judgment.logprob_fallback
    assert "no value of the scale" in judgment.logprob_fallback_reason


def test_top_token_mode_takes_the_most_probable_value(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks: Any
) -> None:
    tokens = [["Score", None], [":", None], [" ", None], ["4", {"5": 0.5, "4": 0.4, "3": 0.1}]]
    _run, judgment = judged(fake_provider, tokens, django_capture_on_commit_callbacks, logprob_scoring="top-token")
    assert judgment.score == 5.0 and judgment.score_mode == "top-token"
    assert judgment.distribution == pytest.approx({"3": 0.1, "4": 0.4, "5": 0.5})


def test_off_mode_keeps_the_parsed_score_without_a_fallback(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks: Any
) -> None:
    tokens = [["Score", None], [":", None], [" ", None], ["4", {"5": 0.5, "4": 0.4, "3": 0.1}]]
    run, judgment = judged(fake_provider, tokens, django_capture_on_commit_callbacks, logprob_scoring="off")
    assert judgment.score == 4.0 and judgment.score_mode == "parsed" and judgment.distribution is None
    assert not judgment.logprob_fallback and run.logprob_fallbacks == 0


def test_a_re_asked_score_is_not_weighted_with_the_first_reply_s_logprobs(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks: Any
) -> None:
    first = [["I", None], [" liked", None], [" it", None], [" 4", {" 4": 0.9, " 5": 0.1}], [" times", None]]
    fake_provider.script(
        default={"tokens": first}, rules=[{"match": "Reply again", "behaviour": {"content": "Score: 2"}}]
    )
    dataset = make_dataset(items=1, systems=1)
    with django_capture_on_commit_callbacks(execute=True):
        run = services.judge_run_launch(
            dataset=dataset, config=config(fake_provider, parse_retries=1), launched_by=None
        )
    judgment = Judgment.objects.get(run=run)
    assert judgment.score == 2.0 and judgment.score_mode == "parsed"
    assert judgment.logprob_fallback and "re-ask" in judgment.logprob_fallback_reason

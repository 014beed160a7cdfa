"""The built-in prompts state the rubric as it is written: its scale's ends and ideal, every value label, its text in
the prompt's language, and one prompt language per run."""

from typing import Any

import pytest

from annotations.models import Aspect, Response, Turn
from judging import run_plans, services
from judging.config import validate_config
from judging.methods import prompts
from judging.models import JudgeRun
from tests.judging.factories import make_dataset

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _loopback_allowed(settings) -> None:  # type: ignore[no-untyped-def]
    settings.JUDGE_API_BASE_ALLOWLIST = ["127.0.0.1"]


BALANCED_LABELS = {"-1": "too little", "0": "just right", "1": "too much"}


def _config(**extra: Any) -> dict[str, Any]:
    return {
        "name": "rubric prompts",
        "method": "single",
        "model": "openai/gpt-4o-mini",
        "api_base": "http://127.0.0.1:9/v1",
        **extra,
    }


def _balanced_dataset(**kwargs: Any) -> Any:
    dataset = make_dataset(items=2, systems=2, aspects=(("detail", -1, 1),), **kwargs)
    Aspect.objects.filter(dataset=dataset).update(
        ideal=0,
        label="Level of detail",
        description="Whether the answer gives as much detail as the question needs.",
        labels=BALANCED_LABELS,
        translations={
            "ja": {
                "label": "詳しさ",
                "description": "質問に必要なだけの詳しさで答えているか。",
                "labels": {"-1": "少なすぎる", "0": "ちょうどよい"},
            }
        },
    )
    return dataset


def _prompt(dataset: Any, **extra: Any) -> str:
    _item, previews = run_plans.prompt_preview(dataset=dataset, cfg=validate_config(_config(**extra)))
    (preview,) = previews
    assert preview.messages is not None
    return preview.messages[0]["content"]


def test_a_balanced_scale_names_both_ends_as_faults_and_every_value_label() -> None:
    text = _prompt(_balanced_dataset(), language="en")
    assert "Scale: integers from -1 to 1; the ideal is 0. Both ends are faults, in opposite directions" in text
    assert "Anchors: -1 = too little; 0 = just right; 1 = too much." in text
    assert "(worst)" not in text and "(best)" not in text
    assert "Score: <number from -1 to 1>" in text


def test_a_balanced_scale_in_a_japanese_prompt_uses_the_rubrics_japanese_text() -> None:
    text = _prompt(_balanced_dataset(), language="ja")
    assert "尺度: -1 から 1 までの整数で、理想は 0 です。両端はどちらも欠点で" in text
    assert "評価観点: 詳しさ" in text
    assert "観点の説明: 質問に必要なだけの詳しさで答えているか。" in text
    # The value without a Japanese text falls back to the default text.
    assert "目安: -1 = 少なすぎる; 0 = ちょうどよい; 1 = too much." in text
    assert "最も悪い" not in text and "最も良い" not in text
    assert "Level of detail" not in text


def test_an_english_prompt_keeps_the_default_text() -> None:
    text = _prompt(_balanced_dataset(), language="en")
    assert "Criterion: Level of detail" in text
    assert "詳しさ" not in text


def test_one_sided_scales_say_which_end_is_best() -> None:
    assert prompts.scale_text(1, 5, 5, "en") == "integers from 1 (worst) to 5 (best)."
    assert prompts.scale_text(0, 3, 0, "en") == "integers from 0 (best) to 3 (worst)."
    assert prompts.scale_text(1, 5, 5, "ja") == "1（最も悪い）から 5（最も良い）までの整数。"
    dataset = make_dataset(items=1, systems=1, aspects=(("errors", 0, 3),))
    Aspect.objects.filter(dataset=dataset).update(ideal=0)
    assert "Scale: integers from 0 (best) to 3 (worst)." in _prompt(dataset, language="en")


def _english_questions_japanese_answers() -> Any:
    dataset = make_dataset(items=3, systems=2)
    Response.objects.filter(turn__item__dataset=dataset).update(text="東京が日本の首都です。")
    return dataset


def test_auto_chooses_one_language_per_run_from_the_questions_and_stores_it() -> None:
    dataset = _english_questions_japanese_answers()
    # An English question answered in Japanese: item-by-item detection would pick Japanese.
    assert prompts.detect_language("Explain topic number 0.", "東京が日本の首都です。") == "ja"
    run = services.judge_run_launch(dataset=dataset, config=_config(), launched_by=None)
    assert JudgeRun.objects.get(pk=run.pk).prompt_language == "en"
    text = _prompt(dataset)
    assert text.startswith("You are grading one answer")
    estimate = run_plans.estimate_run(dataset=dataset, cfg=validate_config(_config()))
    assert estimate.language == "en"
    # Every unit of the run is built with that language (the request keys equal the English prompts' keys).
    english = services.judge_run_launch(dataset=dataset, config=_config(language="en"), launched_by=None)
    assert sorted(run.judgments.values_list("request_key", flat=True)) == sorted(
        english.judgments.values_list("request_key", flat=True)
    )


def test_auto_chooses_japanese_when_most_questions_are_japanese() -> None:
    dataset = make_dataset(items=3, systems=2, japanese=True)
    Turn.objects.filter(item__dataset=dataset, item__position=0).update(prompt="An English question.")
    run = services.judge_run_launch(dataset=dataset, config=_config(), launched_by=None)
    assert run.prompt_language == "ja"
    assert _prompt(dataset).startswith("あなたは AI アシスタントの回答を 1 つ採点します")


def test_per_item_detection_is_kept_when_the_config_asks_for_it() -> None:
    dataset = _english_questions_japanese_answers()
    run = services.judge_run_launch(dataset=dataset, config=_config(language="per_item"), launched_by=None)
    assert run.prompt_language == ""
    assert _prompt(dataset, language="per_item").startswith("あなたは")

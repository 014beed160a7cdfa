import json

import pytest
from pydantic import ValidationError

from judging.config import ConfigError, JudgeSettings, validate_config
from judging.methods import metrics
from judging.models import JudgeConfig

BASE = {"name": "j", "method": "single", "model": "openai/gpt-4o-mini"}


def errors_of(raw: object) -> str:
    with pytest.raises(ConfigError) as info:
        validate_config(raw)
    return "; ".join(info.value.errors)


def test_defaults_are_filled_in() -> None:
    cfg = validate_config(BASE)
    assert cfg.samples == 1 and cfg.max_concurrency == 32 and cfg.cache is True
    assert cfg.output.model_dump() == {"format": "auto"} and cfg.max_retries == 6 and cfg.budget_usd is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"method": "vibes"}, "method must be one of"),
        ({"model": "x y"}, "model must be"),
        ({"name": ""}, "name is required"),
        ({"samples": 0}, "samples"),
        ({"temperature": "hot"}, "temperature"),
        ({"max_concurrency": 5000}, "max_concurrency"),
        ({"rpm": 0}, "rpm"),
        ({"budget_usd": -1}, "budget_usd"),
        ({"logprobs": "yes"}, "logprobs"),
        ({"logprobs": True, "logprob_scoring": "mean"}, "logprob_scoring must be one of weighted, top-token, off"),
        ({"logprob_scoring": "weighted"}, "logprob_scoring weighted needs logprobs: true"),
        ({"output": {"format": "yaml"}}, "output.format"),
        ({"output": {"format": "regex", "regex": "(?<=x)y"}}, "RE2"),
        ({"api_key": "sk-123"}, "unknown field"),
        ({"api_key_env": "DATABASE_URL"}, "api_key_env"),
        ({"api_base": "http://169.254.169.254/v1"}, "api_base refused"),
        ({"prompt": "Rate it."}, "{answer}"),
        ({"metric": "bleu"}, "only used by the metric"),
        ({"method": "metric", "metric": "bertscore"}, "metric must be one of"),
        ({"method": "pairwise", "prompt": "{answer}"}, "{answer_a}"),
        ({"method": "pairwise", "pairs": "baseline"}, "needs baseline"),
        ({"method": "summarize_then_judge", "prompt": "{answer}"}, "{summary}"),
    ],
)
def test_invalid_fields_are_reported(change: dict, message: str, settings) -> None:  # type: ignore[no-untyped-def]
    settings.JUDGE_API_BASE_ALLOWLIST = []
    assert message in errors_of({**BASE, **change})


def test_logprob_scoring_defaults_to_weighted_with_logprobs_and_off_without() -> None:
    assert validate_config({**BASE, "logprobs": True}).logprob_scoring == "weighted"
    assert validate_config(BASE).logprob_scoring == "off"
    assert validate_config({**BASE, "logprobs": True, "logprob_scoring": "top-token"}).stored()["logprob_scoring"] == (
        "top-token"
    )
    # A snapshot stored before the field existed reads back as it behaved then.
    assert JudgeSettings.from_stored({**BASE, "logprobs": True}).logprob_scoring == "weighted"


def test_not_an_object() -> None:
    assert "JSON object" in errors_of(["not", "a", "dict"])


def test_key_may_only_go_to_its_own_host(settings) -> None:  # type: ignore[no-untyped-def]
    settings.JUDGE_API_BASE_ALLOWLIST = ["127.0.0.1"]
    settings.JUDGE_API_KEY_HOSTS = {"LOCAL_API_KEY": ["http://127.0.0.1:1"]}
    assert "may not be sent" in errors_of(
        {**BASE, "api_base": "http://127.0.0.1:1/v1", "api_key_env": "OPENAI_API_KEY"}
    )
    cfg = validate_config({**BASE, "api_base": "http://127.0.0.1:1/v1/", "api_key_env": "LOCAL_API_KEY"})
    assert cfg.api_base == "http://127.0.0.1:1/v1"
    assert validate_config({**BASE, "api_key_env": "OPENAI_API_KEY"}).api_key_env == "OPENAI_API_KEY"


def test_method_specific_fields() -> None:
    assert validate_config({"name": "m", "method": "metric", "metric": "rougeL", "samples": 3}).samples == 1
    stj = validate_config({**BASE, "method": "summarize_then_judge"})
    assert stj.summarizer_model == "openai/gpt-4o-mini"
    assert validate_config({**BASE, "method": "pairwise", "pairs": "baseline", "baseline": "llm_a"}).baseline
    assert validate_config({**BASE, "output": {"format": "regex", "regex": r"S=(\d)"}}).output.regex


def test_the_typed_config_is_frozen_and_round_trips_through_its_stored_form() -> None:
    cfg = validate_config({**BASE, "aspects": ["overall"], "output": {"format": "regex", "regex": r"S=(\d)"}})
    with pytest.raises(ValidationError):
        cfg.samples = 3  # type: ignore[misc]
    stored = cfg.stored()
    assert stored["aspects"] == ["overall"] and stored["output"] == {"format": "regex", "regex": r"S=(\d)"}
    assert validate_config(BASE).stored()["output"] == {"format": "auto"}
    assert json.loads(json.dumps(stored)) == stored
    assert JudgeSettings.from_stored(stored) == cfg
    # A config without rated examples is stored without the field, as before configs could carry them.
    assert set(stored) == set(JudgeSettings.model_fields) - {"exemplars"}


def test_factscore_options_are_typed_with_their_defaults() -> None:
    cfg = validate_config({**BASE, "method": "factscore", "factscore": {"k": 3, "topic": "meta:title"}})
    assert cfg.factscore is not None
    assert (cfg.factscore.k, cfg.factscore.knowledge, cfg.factscore.max_facts) == (3, "auto", 100)
    assert cfg.factscore.topic_key == "title" and not cfg.factscore.wants_corpus
    assert validate_config(BASE).factscore is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"pairs": "some"}, "pairs must be all or baseline"),
        ({"baseline": 3}, "baseline must be a string"),
        ({"summarizer_model": 3}, "summarizer_model must be a string"),
        ({"output": {"format": "auto", "regex": 3}}, "output.regex must be a string"),
    ],
)
def test_fields_a_method_ignores_must_still_have_their_type(change: dict, message: str) -> None:
    assert message in errors_of({**BASE, **change})


@pytest.mark.django_db
def test_a_stored_config_is_read_back_typed_once_per_instance() -> None:
    row = JudgeConfig.objects.create(name="j", config=validate_config(BASE).stored())
    typed = row.judge_settings
    assert isinstance(typed, JudgeSettings) and typed.model == "openai/gpt-4o-mini" and typed.max_concurrency == 32
    assert row.judge_settings is typed
    assert JudgeConfig.objects.get(pk=row.pk).judge_settings == typed


def test_bleu_tokenize_option(monkeypatch: pytest.MonkeyPatch) -> None:
    bleu = {"name": "b", "method": "metric", "metric": "bleu"}
    assert validate_config(bleu).tokenize == "unidic"
    assert "tokenize must be one of unidic, ja-mecab" in errors_of({**bleu, "tokenize": "mecab"})
    assert "only used by the metric method's bleu" in errors_of({**bleu, "metric": "rouge1", "tokenize": "ja-mecab"})
    assert "only used by the metric method's bleu" in errors_of({**BASE, "tokenize": "ja-mecab"})
    monkeypatch.setattr(metrics, "_JA_MECAB_PACKAGES", {"MeCab_not_installed_here": "mecab-python3"})
    assert "tokenize ja-mecab needs mecab-python3" in errors_of({**bleu, "tokenize": "ja-mecab"})

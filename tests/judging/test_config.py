import pytest

from judging.config import ConfigError, validate_config

BASE = {"name": "j", "method": "single", "model": "openai/gpt-4o-mini"}


def errors_of(raw: object) -> str:
    with pytest.raises(ConfigError) as info:
        validate_config(raw)
    return "; ".join(info.value.errors)


def test_defaults_are_filled_in() -> None:
    cfg = validate_config(BASE)
    assert cfg["samples"] == 1 and cfg["max_concurrency"] == 32 and cfg["cache"] is True
    assert cfg["output"] == {"format": "auto"} and cfg["max_retries"] == 6 and cfg["budget_usd"] is None


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


def test_not_an_object() -> None:
    assert "JSON object" in errors_of(["not", "a", "dict"])


def test_key_may_only_go_to_its_own_host(settings) -> None:  # type: ignore[no-untyped-def]
    settings.JUDGE_API_BASE_ALLOWLIST = ["127.0.0.1"]
    settings.JUDGE_API_KEY_HOSTS = {"LOCAL_API_KEY": ["127.0.0.1"]}
    assert "may not be sent" in errors_of(
        {**BASE, "api_base": "http://127.0.0.1:1/v1", "api_key_env": "OPENAI_API_KEY"}
    )
    cfg = validate_config({**BASE, "api_base": "http://127.0.0.1:1/v1/", "api_key_env": "LOCAL_API_KEY"})
    assert cfg["api_base"] == "http://127.0.0.1:1/v1"
    assert validate_config({**BASE, "api_key_env": "OPENAI_API_KEY"})["api_key_env"] == "OPENAI_API_KEY"


def test_method_specific_fields() -> None:
    assert validate_config({"name": "m", "method": "metric", "metric": "rougeL", "samples": 3})["samples"] == 1
    stj = validate_config({**BASE, "method": "summarize_then_judge"})
    assert stj["summarizer_model"] == "openai/gpt-4o-mini"
    assert validate_config({**BASE, "method": "pairwise", "pairs": "baseline", "baseline": "llm_a"})["baseline"]
    assert validate_config({**BASE, "output": {"format": "regex", "regex": r"S=(\d)"}})["output"]["regex"]

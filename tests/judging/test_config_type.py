"""The judge config type is the one validator: `JudgeSettings.model_validate` alone accepts or refuses a raw config,
with the same problems, in the same order, that `normalise_config` reports, and a config's fingerprint is the one
it had when the rules ran on a dict before the type saw it."""

from typing import Any

import pytest
from pydantic import ValidationError

from judging.admin_forms import config_templates
from judging.config import validate_config
from judging.methods.fingerprint import fingerprint_material, fingerprint_of
from judging.methods.judge_settings import JudgeSettings, normalise_config

BASE = {"name": "j", "method": "single", "model": "openai/gpt-4o-mini"}

RICHER_CONFIGS: dict[str, dict[str, Any]] = {
    "rich_single": {
        "name": "  rich  ",
        "method": "single",
        "model": "openai/gpt-4o-mini",
        "aspects": ["helpfulness", "accuracy"],
        "prompt": "Rate {answer}",
        "output": {"format": "regex", "regex": "Score: (\\d+)"},
        "samples": 3,
        "temperature": 0.7,
        "exemplars": [{"response_id": 4, "aspect": "accuracy", "question": "q?", "answer": "a.", "label": 3}],
    },
    "summarize": {"name": "s", "method": "summarize_then_judge", "model": "openai/gpt-4o-mini", "prompt": "{summary}"},
    "factscore_k7": {"name": "f", "method": "factscore", "model": "openai/gpt-4o-mini", "factscore": {"k": 7}},
    "pairwise_baseline": {
        "name": "p",
        "method": "pairwise",
        "model": "openai/gpt-4o-mini",
        "pairs": "baseline",
        "baseline": "sysA",
    },
    "bleu": {"name": "b", "method": "metric", "metric": "bleu", "samples": 5},
}

# Computed at commit 77f7165, where `normalise_config` checked the raw dict before `JudgeSettings` saw it: the
# material hashed with the config's own model as the provider model, no rubric and no prompt templates.
FINGERPRINTS_BEFORE_THE_TYPE_VALIDATED = {
    "single": "c5ff3246915c2e1f21c7cf752169cd66d2fd7d4fae93c116c2632bbd8c88a6ce",
    "reference": "01e997757bf4941e8ebb3a0baf5fbaaa4aec17fac928dbe60de8819aee97a22a",
    "pairwise": "fa4f8674364d013fa15792d646cb2f2e24e1694fd2c5e0c50b838b6a7739cff7",
    "summarize_then_judge": "7b3a3c007bc122dff7c4cda50aa271ad460f66e8afcfd0895f837ec5aa4742b9",
    "factscore": "ca18a11d94d5bcd38b1b655189786e746a79796386199806bf719efb4cc79690",
    "metric": "68479e44005beeb78f1de54b50ffaa5c1ca961abe12f7b1d1f47cf0505b742ef",
    "rich_single": "550bf86588359ce3476bc01b1786ecaf001dc0974f37abdec54bf210fb5e6a0d",
    "summarize": "1336244d7d91d4ae6b4fbfb86b54ad70356dec19dc3f280f5d9e6babab676961",
    "factscore_k7": "9841bf082638a2d8a55ed676f94e9466158a44b08fe1c8788e073768500a0943",
    "pairwise_baseline": "ed5d441833b62e1546a802e430dd16441e2e342b8702ef8bc1b616fea75cccf9",
    "bleu": "ad965cfcd296827282624d77747d778283b862906d516ca76421f2b4ea4b18e0",
}


def _fingerprint(stored: dict[str, Any]) -> str:
    material = fingerprint_material(
        config=stored, provider_model=stored.get("model") or "", rubric=[], prompt_templates=[]
    )
    return fingerprint_of(material)


def test_fingerprints_of_the_templates_and_richer_configs_are_unchanged() -> None:
    stored = {
        **config_templates(),
        **{key: validate_config(raw, check_network=False).stored() for key, raw in RICHER_CONFIGS.items()},
    }
    # Templates added since (error_spans) had no fingerprint before the type: only the earlier ones are compared.
    earlier = {
        key: _fingerprint(config) for key, config in stored.items() if key in FINGERPRINTS_BEFORE_THE_TYPE_VALIDATED
    }
    assert earlier == FINGERPRINTS_BEFORE_THE_TYPE_VALIDATED


def test_the_type_alone_refuses_with_every_problem_in_order() -> None:
    raw = {**BASE, "zeta": 1, "alpha": 2, "samples": 0, "prompt": "no placeholder", "cache": "yes"}
    with pytest.raises(ValidationError) as info:
        JudgeSettings.model_validate(raw)
    (error,) = info.value.errors()
    assert error["type"] == "judge_config"
    assert list(error["ctx"]["problems"]) == [
        "unknown field(s): alpha, zeta",
        "the prompt needs the {answer} placeholder",
        "samples must be an integer from 1 to 20",
        "cache must be true or false",
    ]
    assert normalise_config(raw)[1] == list(error["ctx"]["problems"])


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({**BASE, "method": "metric", "metric": "rougeL", "tokenize": "ja-mecab"}, "tokenize ja-mecab is only"),
        ({**BASE, "samples": 3, "temperature": 0}, "samples 3 at temperature 0 refused"),
        ({**BASE, "model": "azure/gpt-4o"}, "azure/ models need api_version"),
        ({**BASE, "metric": "bleu"}, "metric is only used by the metric method"),
        (["not", "a", "dict"], "the config must be a JSON object"),
    ],
)
def test_cross_field_rules_belong_to_the_type(raw: Any, problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        JudgeSettings.model_validate(raw)


def test_the_type_fills_the_defaults_the_rules_give() -> None:
    settings = JudgeSettings.model_validate({**BASE, "name": "  spaced  ", "method": "metric", "metric": "bleu"})
    assert settings.name == "spaced" and settings.samples == 1 and settings.logprob_scoring == "off"
    assert settings.summarizer_model is None and settings.output.format == "auto"
    assert normalise_config({**BASE, "method": "summarize_then_judge"})[0]["summarizer_model"] == BASE["model"]


def test_a_stored_config_is_read_back_without_the_rules() -> None:
    # A rule added after a version was saved must not make that version unreadable: here, a stored config from
    # before logprob_scoring existed, whose temperature-0 samples a later rule refuses.
    stored = {**validate_config(BASE).stored(), "samples": 3, "logprobs": True}
    del stored["logprob_scoring"]
    settings = JudgeSettings.from_stored(stored)
    assert settings.samples == 3 and settings.logprob_scoring == "weighted"
    with pytest.raises(ValidationError, match="samples 3 at temperature 0 refused"):
        JudgeSettings.model_validate(stored)

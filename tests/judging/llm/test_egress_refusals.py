"""Provider egress played by an attacker, on loopback only: unsupported providers and redirects.

The fake provider (127.0.0.1) is the host a config may name; a recording server on 127.0.0.2 stands for an
internal service. Both addresses are allowlisted, so only the rules under test (supported providers, redirects
off, credentials by name only, nothing taken from the environment) stand between a request and the internal
server. Nothing in the code under test is patched: every request is a real one on a socket."""

import uuid

import pytest

from judging import services
from judging.config import ConfigError, validate_config
from judging.llm.calls import SUPPORTED_PROVIDERS
from judging.models import JudgeRun, Judgment
from tests.fakeprovider import FakeProvider
from tests.judging.factories import make_dataset
from tests.judging.llm.provider_calls import PROVIDERS, UNSUPPORTED_MODELS, Launch, call, config_for, spec_for
from tests.security.recorder import RecordingServer

# -- (a) refused when the config is validated ---------------------------------------------------------------


@pytest.mark.parametrize("model", UNSUPPORTED_MODELS)
@pytest.mark.parametrize("api_key_env", ["EVALSITE_FAKE_KEY", None])
def test_unsupported_providers_are_refused_naming_the_supported_ones(
    attack: FakeProvider, model: str, api_key_env: str | None
) -> None:
    with pytest.raises(ConfigError) as info:
        validate_config(config_for(attack, model=model, api_key_env=api_key_env))
    message = str(info.value)
    assert f"provider {model.partition('/')[0]!r}" in message and "not supported" in message
    assert "supported providers: " + ", ".join(f"{p}/" for p in SUPPORTED_PROVIDERS) in message
    assert attack.snapshot()["calls"] == 0


@pytest.mark.parametrize("model", UNSUPPORTED_MODELS[:3])
def test_an_unsupported_summarizer_model_is_refused_too(attack: FakeProvider, model: str) -> None:
    with pytest.raises(ConfigError, match="summarizer_model: provider"):
        validate_config(config_for(attack, method="summarize_then_judge", summarizer_model=model))


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("gpt-4o-mini", "must start with its provider"),  # litellm would guess the provider
        ("openai/responses/gpt-4o", "Responses API"),  # litellm's Responses bridge, on its own client
        ("openai/o1-pro", "Responses API"),  # a responses-only model litellm bridges by itself
    ],
)
def test_models_that_would_leave_the_guarded_client_are_refused(attack: FakeProvider, model: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        validate_config(config_for(attack, model=model))


def test_the_supported_provider_is_accepted(attack: FakeProvider) -> None:
    assert validate_config(config_for(attack)).model == "openai/gpt-4o-mini"


# -- defence in depth: refused at call time --------------------------------------------------------------------


@pytest.mark.parametrize("model", [*UNSUPPORTED_MODELS, "gpt-4o-mini", "openai/responses/gpt-4o", "openai/o1-pro"])
def test_the_gateway_refuses_an_unsupported_model_without_a_connection(
    attack: FakeProvider, internal: RecordingServer, canaries: dict[str, str], model: str
) -> None:
    result = call(spec_for(attack, model=model, max_retries=3))
    assert result.error_kind == "unsupported_provider" and result.attempts == 1
    assert attack.snapshot()["calls"] == 0 and not internal.requests
    assert not any(value in result.error for value in canaries.values())


@pytest.mark.django_db
def test_a_stored_run_with_an_unsupported_model_fails_its_judgments_permanently(  # type: ignore[no-untyped-def]
    attack: FakeProvider, internal: RecordingServer, canaries, eager, django_capture_on_commit_callbacks
) -> None:
    # A snapshot saved before the rule existed (or edited in the database) never reaches litellm's own client.
    with django_capture_on_commit_callbacks(execute=False):
        run = services.judge_run_launch(
            dataset=make_dataset(items=1, systems=1), config=config_for(attack), launched_by=None
        )
    JudgeRun.objects.filter(pk=run.pk).update(config_snapshot={**run.config_snapshot, "model": "watsonx/ibm/granite"})
    services.judge_run_start(run_id=run.pk)
    judgments = list(Judgment.objects.filter(run=run))
    assert judgments and all(j.error_kind == "unsupported_provider" for j in judgments)
    assert all("'watsonx'" in j.error and "supported providers: openai/" in j.error for j in judgments)
    assert attack.snapshot()["calls"] == 0 and not internal.requests


# -- (b) redirects are never followed ------------------------------------------------------------------------


REDIRECT_CASES = [("openai", status) for status in (301, 302, 308)] + [
    (provider, status) for provider in PROVIDERS for status in (303, 307)
]


@pytest.mark.django_db
@pytest.mark.parametrize(("provider", "status"), REDIRECT_CASES)
def test_a_redirect_to_an_internal_server_is_not_followed(  # type: ignore[no-untyped-def]
    attack: FakeProvider,
    internal: RecordingServer,
    monkeypatch,
    launched: Launch,
    provider: str,
    status: int,
) -> None:
    key = f"sk-bound-{uuid.uuid4().hex}"
    monkeypatch.setenv("EVALSITE_FAKE_KEY", key)
    attack.required_key = key
    attack.script(default={"redirect_to": internal.base_url + "/chat/completions", "redirect_status": status})
    run = launched(config_for(attack, provider))
    assert attack.snapshot()["calls"] == 1, "the redirecting host saw exactly the one request"
    chosen = PROVIDERS[provider]
    assert attack.recorded_headers()[0][chosen.key_header] == chosen.key_format.format(key)
    assert internal.requests == [], f"the {status} redirect was followed to the internal server"
    judgment = Judgment.objects.get(run=run)
    assert judgment.error_kind == "redirect" and judgment.attempts == 1
    assert judgment.score is None
    assert internal.content not in judgment.error and key not in judgment.error

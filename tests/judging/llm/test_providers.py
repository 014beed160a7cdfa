"""A judge run to the end on every supported provider, each through the guarded transport against the fake's native
route for it (tests/fakenative.py): the provider's own request and response shapes, its own credential header checked
by the fake, its log-probabilities where it offers them and the sampled fallback, stated on the run page, where it
does not; prices from litellm's local cost map."""

import asyncio
import time
import uuid
from typing import Any

import pytest
from django.template.loader import render_to_string

from judging import selectors, services
from judging.llm import failures, gateway
from judging.models import Judgment, RunStatus
from tests.fakeprovider import FakeProvider
from tests.judging.factories import make_dataset
from tests.judging.llm.provider_calls import PROVIDERS, aws_keys, config_for, spec_for, vertex_account

ROUTES = {
    "openai": "openai",
    "azure": "azure",
    "anthropic": "anthropic",
    "gemini": "gemini",
    "mistral": "openai",
    "bedrock": "bedrock",
    "vertex_ai": "vertex",
}
PATHS = {
    "openai": "/v1/chat/completions",
    "azure": "/openai/deployments/gpt-4o-mini/chat/completions",
    "anthropic": "/v1/messages",
    "gemini": "/v1beta/models/gemini-2.5-flash:generateContent",
    "mistral": "/v1/chat/completions",
    "bedrock": "/model/amazon.nova-lite-v1:0/converse",
    "vertex_ai": "/v1/projects/evalsite-test/locations/us-central1/publishers/google/models/"
    "gemini-2.5-flash:generateContent",
}
WITH_LOGPROBS = {name for name, provider in PROVIDERS.items() if provider.logprobs} | {"vertex_ai"}
DISTRIBUTION = {"3": 0.2, "4": 0.5, "5": 0.3}


@pytest.mark.django_db
@pytest.mark.parametrize("provider", [*PROVIDERS, "bedrock", "vertex_ai"])
def test_a_judge_run_on_each_provider_goes_to_the_end_through_the_transport(  # type: ignore[no-untyped-def]
    fake_provider: FakeProvider, monkeypatch, settings, eager, django_capture_on_commit_callbacks, provider: str
) -> None:
    key = f"sk-{provider}-{uuid.uuid4().hex}"
    monkeypatch.setenv("EVALSITE_FAKE_KEY", key)
    fake_provider.required_key = key
    if provider == "bedrock":  # the fake recomputes each request's SigV4 signature with this pair's secret
        aws_keys(fake_provider, monkeypatch, settings)
    if provider == "vertex_ai":  # the fake's token endpoint verifies the grant's signature with the account's key
        vertex_account(fake_provider, monkeypatch, settings)
    fake_provider.script(default={"logprobs": DISTRIBUTION, "usage": {"prompt_tokens": 100, "completion_tokens": 10}})
    config = config_for(fake_provider, provider, logprobs=True, fallback_samples=3, max_retries=2)
    with django_capture_on_commit_callbacks(execute=True):
        run = services.judge_run_launch(dataset=make_dataset(items=2, systems=1), config=config, launched_by=None)
    run.refresh_from_db()
    judgments = list(Judgment.objects.filter(run=run))

    assert run.status == RunStatus.SUCCEEDED, run.notes
    assert len(judgments) == 2 and all(j.score is not None and not j.error_kind for j in judgments)
    targets = [t for t in fake_provider.recorded_targets() if t["dialect"] != "oauth"]
    grants = len(fake_provider.recorded_targets()) - len(targets)
    assert {(t["dialect"], t["path"]) for t in targets} == {(ROUTES[provider], PATHS[provider])}
    assert (grants >= 1 and grants < len(targets)) if provider == "vertex_ai" else grants == 0
    if provider == "azure":
        assert {t["query"] for t in targets} == {"api-version=2024-10-21"}
    assert all(r["status"] == 200 for r in fake_provider.request_log()), "the fake refused a credential"

    progress = selectors.judge_run_progress(run)
    page = render_to_string("judging/admin/_progress.html", {"progress": progress, "run": run})
    if provider in WITH_LOGPROBS:
        # The score token's distribution as the provider sent it: 0.2*3 + 0.5*4 + 0.3*5.
        assert all(j.score == pytest.approx(4.1) and j.score_mode == "weighted" for j in judgments)
        assert not any(j.logprob_fallback for j in judgments) and run.calls == 2
        assert "Sampled fallbacks" not in page
    else:
        assert all(j.logprob_fallback and j.score_mode == "sampled" for j in judgments)
        assert all("returned no log-probabilities" in j.logprob_fallback_reason for j in judgments)
        assert run.calls == 2 * (1 + 3) and progress.sampled_fallbacks == 2
        assert "<dt>Sampled fallbacks</dt><dd>2</dd>" in page
    # Every model here is in litellm's local cost map: each call priced from its usage, none unknown.
    assert run.unpriced_calls == 0 and run.cost_usd > 0
    assert all(j.cost_usd is not None and j.cost_usd > 0 for j in judgments)


@pytest.mark.parametrize(
    ("model", "reason"),
    [
        ("vertex_ai_beta/gemini-2.5-flash", "google-auth"),
        ("sagemaker/my-endpoint", "AWS environment"),
    ],
)
def test_a_provider_the_transport_cannot_guard_is_refused_with_the_reason(
    fake_provider: FakeProvider, model: str, reason: str
) -> None:
    from judging.config import ConfigError, validate_config

    with pytest.raises(ConfigError) as info:
        validate_config(config_for(fake_provider, model=model))
    assert "is not supported" in str(info.value) and reason in str(info.value)
    assert fake_provider.snapshot()["calls"] == 0


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"api_version": None}, "azure/ models need api_version"),
        ({"api_base": None}, "azure/ models need api_base"),
        ({"api_version": "2024-10-21&x=1"}, "api_version must be an Azure OpenAI api-version"),
    ],
)
def test_azure_needs_its_endpoint_and_api_version(fake_provider: FakeProvider, overrides: Any, message: str) -> None:
    from judging.config import ConfigError, validate_config

    with pytest.raises(ConfigError, match=message):
        validate_config({**config_for(fake_provider, "azure"), **overrides})


def test_api_version_is_refused_on_other_providers(fake_provider: FakeProvider) -> None:
    from judging.config import ConfigError, validate_config

    with pytest.raises(ConfigError, match="api_version is only used by azure/ models"):
        validate_config({**config_for(fake_provider, "anthropic"), "api_version": "2024-10-21"})


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_each_provider_config_is_accepted(fake_provider: FakeProvider, provider: str) -> None:
    from judging.config import validate_config

    settings = validate_config(config_for(fake_provider, provider))
    assert settings.model == PROVIDERS[provider].model


def _in(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + seconds))


RATE_LIMIT_HEADERS = {
    # OpenAI's windows: only the one that ran out (remaining 0) says when to come back.
    "openai": (
        {
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "6m0s",
            "x-ratelimit-remaining-tokens": "9000",
            "x-ratelimit-reset-tokens": "1s",
        },
        360.0,
    ),
    "azure": ({"retry-after-ms": "2500"}, 2.5),
    "anthropic": (
        {"anthropic-ratelimit-requests-remaining": "0", "anthropic-ratelimit-requests-reset": "IN30"},
        30.0,
    ),
    "gemini": ({"Retry-After": "11"}, 11.0),
    "mistral": ({"Retry-After": "7"}, 7.0),
    "bedrock": ({"Retry-After": "9"}, 9.0),
    "vertex_ai": ({"Retry-After": "13"}, 13.0),
}


@pytest.mark.parametrize("provider", list(RATE_LIMIT_HEADERS))
def test_each_providers_rate_limit_headers_are_read(  # type: ignore[no-untyped-def]
    fake_provider: FakeProvider, monkeypatch, settings, provider: str
) -> None:
    if provider == "bedrock":
        aws_keys(fake_provider, monkeypatch, settings)
    if provider == "vertex_ai":  # the token endpoint is not scripted: the grant succeeds, the model request gets 429
        vertex_account(fake_provider, monkeypatch, settings)
    headers, expected = RATE_LIMIT_HEADERS[provider]
    headers = {name: (_in(30) if value == "IN30" else value) for name, value in headers.items()}
    fake_provider.script(default={"status": 429, "headers": headers})
    spec = spec_for(fake_provider, provider, api_key_env=None)

    async def attempt() -> BaseException:
        client = gateway.Gateway()
        try:
            await client._attempt(spec)
        except Exception as exc:
            return exc
        finally:
            await client.close()
        raise AssertionError("the 429 was not raised")

    exc = asyncio.run(attempt())
    assert gateway.classify(exc) == "rate_limit"
    assert failures.provider_wait(exc) == pytest.approx(expected, abs=5)

"""Provider egress played by an attacker: credentials leave only by the variable a config names, and nothing
is taken from the environment."""

import asyncio
import uuid
from typing import Any

import pytest

from judging.llm.calls import CallSpec
from judging.llm.gateway import Gateway
from judging.llm.keys import NO_KEY, api_base_for
from tests.fakeprovider import FakeProvider
from tests.judging.llm.provider_calls import MESSAGES, PROVIDERS, call, everything_sent, spec_for
from tests.security.recorder import RecordingServer

# -- (c) credentials only by name --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key_env",
    ["OPENAI_API_KEY", "AZURE_API_KEY", "ANTHROPIC_API_KEY", "WATSONX_TOKEN", "HUGGINGFACE_API_KEY", "GROQ_API_KEY"],
)
def test_canary_sweep_only_the_named_credential_arrives(  # type: ignore[no-untyped-def]
    attack: FakeProvider, internal: RecordingServer, canaries: dict[str, str], settings, key_env: str
) -> None:
    assert len(canaries) >= 40
    settings.JUDGE_API_KEY_HOSTS = {key_env: [attack.base_url]}
    result = call(spec_for(attack, api_key_env=key_env))
    assert internal.requests == [], "a proxy or base URL from the environment received the request"
    assert result.ok, result.error
    headers = attack.recorded_headers()
    assert len(headers) == 1
    assert headers[0]["authorization"] == f"Bearer {canaries[key_env]}"
    sent = everything_sent(attack)
    arrived = sorted(name for name, value in canaries.items() if value in sent)
    assert arrived == [key_env]


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_canary_sweep_per_provider_only_the_named_credential_arrives(  # type: ignore[no-untyped-def]
    attack: FakeProvider, internal: RecordingServer, canaries: dict[str, str], settings, provider: str
) -> None:
    # The provider's own usual variable is the one named; every other provider's variables, the AWS and Google
    # credential chains, Azure's AD token and version and every base-URL variable hold canaries the SDKs and litellm
    # would read if an argument were left unset. The fake checks the credential the way the provider does.
    chosen = PROVIDERS[provider]
    key_env = chosen.usual_key_env
    settings.JUDGE_API_KEY_HOSTS = {key_env: [attack.base_url]}
    attack.required_key = canaries[key_env]
    result = call(spec_for(attack, provider, api_key_env=key_env))
    assert internal.requests == [], "a proxy or base URL from the environment received the request"
    assert result.ok, result.error
    assert len(attack.recorded_headers()) == 1
    assert attack.recorded_headers()[0][chosen.key_header] == chosen.key_format.format(canaries[key_env])
    assert [name for name, value in canaries.items() if value in everything_sent(attack)] == [key_env]
    if provider == "azure":
        assert attack.recorded_targets()[0]["query"] == "api-version=2024-10-21"
        assert "authorization" not in attack.recorded_headers()[0]


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_canary_sweep_per_provider_without_api_key_env_no_credential_arrives(  # type: ignore[no-untyped-def]
    attack: FakeProvider, internal: RecordingServer, canaries: dict[str, str], provider: str
) -> None:
    result = call(spec_for(attack, provider, api_key_env=None))
    assert internal.requests == []
    assert result.ok, result.error
    chosen = PROVIDERS[provider]
    assert attack.recorded_headers()[0][chosen.key_header] == chosen.key_format.format(NO_KEY)
    assert [name for name, value in canaries.items() if value in everything_sent(attack)] == []


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_the_provider_refuses_a_wrong_key_and_the_run_reads_it_as_auth(  # type: ignore[no-untyped-def]
    attack: FakeProvider, monkeypatch, provider: str
) -> None:
    # The fake checks each provider's credential header as the provider does: a wrong key is refused, so the
    # passing runs above were authorised by the named key and nothing else.
    monkeypatch.setenv("EVALSITE_FAKE_KEY", "sk-wrong")
    attack.required_key = f"sk-right-{uuid.uuid4().hex}"
    result = call(spec_for(attack, provider, api_key_env="EVALSITE_FAKE_KEY", max_retries=2))
    # Gemini answers a wrong key with 400 API_KEY_INVALID, which litellm reads as an authentication error too.
    assert result.error_kind == "auth" and result.attempts == 1, result.error
    assert "sk-wrong" not in result.error


def test_canary_sweep_without_api_key_env_no_credential_arrives(  # type: ignore[no-untyped-def]
    attack: FakeProvider, internal: RecordingServer, canaries: dict[str, str]
) -> None:
    result = call(spec_for(attack, api_key_env=None))
    assert internal.requests == []
    assert result.ok, result.error
    headers = attack.recorded_headers()
    assert len(headers) == 1 and headers[0]["authorization"] == f"Bearer {NO_KEY}"
    sent = everything_sent(attack)
    assert [name for name, value in canaries.items() if value in sent] == []


def test_a_named_but_empty_variable_sends_the_placeholder_not_another_key(  # type: ignore[no-untyped-def]
    attack: FakeProvider, canaries: dict[str, str], monkeypatch, settings
) -> None:
    monkeypatch.setenv("EVALSITE_FAKE_KEY", "")
    settings.JUDGE_API_KEY_HOSTS = {"EVALSITE_FAKE_KEY": [attack.base_url]}
    assert call(spec_for(attack, api_key_env="EVALSITE_FAKE_KEY")).ok
    assert attack.recorded_headers()[0]["authorization"] == f"Bearer {NO_KEY}"
    assert [name for name, value in canaries.items() if value in everything_sent(attack)] == []


def test_without_api_base_the_client_targets_the_fixed_default_not_the_environment(  # type: ignore[no-untyped-def]
    canaries: dict[str, str], internal: RecordingServer
) -> None:
    # No request is made here: without api_base it would leave the machine.
    spec = CallSpec(model="openai/gpt-4o-mini", messages=MESSAGES)
    base = api_base_for(spec.model, spec.api_base)
    assert base == "https://api.openai.com/v1"

    async def build() -> Any:
        gateway = Gateway()
        try:
            client = gateway._client_for(spec, base)
            return str(client.base_url), client.api_key, client._client.trust_env
        finally:
            await gateway.close()

    base_url, api_key, trust_env = asyncio.run(build())
    assert base_url.startswith("https://api.openai.com/v1") and str(internal.port) not in base_url
    assert api_key == NO_KEY and trust_env is False

"""Provider egress played by an attacker on the signed providers: Bedrock's AWS key pair and Vertex AI's service
account, their redirects and the hosts their credentials are bound to."""

import asyncio
import json
from typing import Any

import pytest

from judging.config import ConfigError, validate_config
from judging.llm.calls import CallResult
from judging.llm.gateway import Gateway
from judging.models import Judgment
from tests.fakeprovider import FakeProvider
from tests.judging.llm.provider_calls import (
    Launch,
    aws_keys,
    call,
    config_for,
    everything_sent,
    spec_for,
    vertex_account,
)
from tests.security.recorder import RecordingServer


@pytest.mark.django_db
@pytest.mark.parametrize("status", [303, 307])
def test_a_bedrock_redirect_is_not_followed_and_carries_no_secret(  # type: ignore[no-untyped-def]
    attack: FakeProvider,
    internal: RecordingServer,
    monkeypatch,
    settings,
    launched: Launch,
    status: int,
) -> None:
    keys = aws_keys(attack, monkeypatch, settings)
    attack.script(default={"redirect_to": internal.base_url + "/model/x/converse", "redirect_status": status})
    run = launched(config_for(attack, "bedrock"))
    assert attack.snapshot()["calls"] == 1 and internal.requests == []
    authorization = attack.recorded_headers()[0]["authorization"]
    assert authorization.startswith(f"AWS4-HMAC-SHA256 Credential={keys['EVALSITE_AWS_ACCESS_KEY']}/")
    assert keys["EVALSITE_AWS_SECRET_KEY"] not in everything_sent(attack), "the secret itself never travels"
    judgment = Judgment.objects.get(run=run)
    assert judgment.error_kind == "redirect" and judgment.attempts == 1
    assert keys["EVALSITE_AWS_SECRET_KEY"] not in judgment.error


@pytest.mark.parametrize("token", [True, False])
def test_bedrock_canary_sweep_signs_with_the_named_pair_only(  # type: ignore[no-untyped-def]
    attack: FakeProvider, internal: RecordingServer, canaries: dict[str, str], monkeypatch, settings, token: bool
) -> None:
    # Every AWS variable litellm or botocore would fall back to holds a canary (the key pair, session token, bearer
    # token, profile, role, web identity) and every endpoint variable points at the internal server; the fake
    # recomputes the SigV4 signature with the named pair's secret, so a request signed with anything else fails.
    keys = aws_keys(attack, monkeypatch, settings, token=token)
    result = call(spec_for(attack, "bedrock"))
    assert internal.requests == [], "an AWS endpoint or proxy variable received a request"
    assert result.ok, result.error
    headers = attack.recorded_headers()[0]
    assert headers["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={keys['EVALSITE_AWS_ACCESS_KEY']}/")
    assert ("x-amz-security-token" in headers) is token
    assert attack.recorded_targets()[0]["path"] == "/model/amazon.nova-lite-v1:0/converse"
    assert [name for name, value in canaries.items() if value in everything_sent(attack)] == []


def test_bedrock_with_a_wrong_secret_fails_the_fakes_signature_check(  # type: ignore[no-untyped-def]
    attack: FakeProvider, monkeypatch, settings
) -> None:
    keys = aws_keys(attack, monkeypatch, settings)
    monkeypatch.setenv("EVALSITE_AWS_SECRET_KEY", "not-the-secret")
    result = call(spec_for(attack, "bedrock", max_retries=2))
    assert result.error_kind == "auth" and result.attempts == 1, result.error
    assert "InvalidSignatureException" in result.error
    assert keys["EVALSITE_AWS_SESSION_TOKEN"] not in result.error


def test_bedrock_variables_must_be_bound_to_the_destination(attack: FakeProvider, settings) -> None:  # type: ignore[no-untyped-def]
    settings.JUDGE_API_KEY_HOSTS = {"EVALSITE_AWS_ACCESS_KEY": [attack.base_url]}
    with pytest.raises(ConfigError, match="EVALSITE_AWS_SECRET_KEY may not be sent"):
        validate_config(config_for(attack, "bedrock"))
    result = call(spec_for(attack, "bedrock"))
    assert result.error_kind == "key_not_allowed" and attack.snapshot()["calls"] == 0


def _grant_claims(fake: FakeProvider) -> dict[str, Any]:
    import base64
    from urllib.parse import parse_qs

    forms = [b["form"] for b in fake.recorded_bodies() if "form" in b]
    assertion = parse_qs(forms[0])["assertion"][0]
    claims = assertion.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4))))


def test_vertex_canary_sweep_only_the_named_service_account_is_used(  # type: ignore[no-untyped-def]
    attack: FakeProvider, internal: RecordingServer, canaries: dict[str, str], monkeypatch, settings
) -> None:
    # GOOGLE_APPLICATION_CREDENTIALS, VERTEXAI_CREDENTIALS, GEMINI_API_KEY and the rest hold canaries, and the
    # proxy variables point at the internal server: the token comes from the JWT grant of the named account,
    # verified by the fake's token endpoint, and the model request carries that token and nothing else.
    account = vertex_account(attack, monkeypatch, settings)
    result = call(spec_for(attack, "vertex_ai"))
    assert internal.requests == []
    assert result.ok, result.error
    targets = [t["dialect"] for t in attack.recorded_targets()]
    assert targets == ["oauth", "vertex"]
    model_headers = attack.model_requests()[0]
    assert model_headers["authorization"].removeprefix("Bearer ") in attack.vertex_tokens
    assert "x-goog-api-key" not in model_headers
    assert "authorization" not in attack.recorded_headers()[0], "the token request carries no header credential"
    claims = _grant_claims(attack)
    assert claims["iss"] == account["client_email"] and claims["aud"] == "https://oauth2.googleapis.com/token"
    assert [name for name, value in canaries.items() if value in everything_sent(attack)] == []


def test_vertex_token_is_fetched_once_and_reused(attack: FakeProvider, monkeypatch, settings) -> None:  # type: ignore[no-untyped-def]
    vertex_account(attack, monkeypatch, settings)

    async def two_calls() -> list[CallResult]:
        client = Gateway()
        try:
            return [
                await client.call(spec_for(attack, "vertex_ai", messages=[{"role": "user", "content": t}]))
                for t in "ab"
            ]
        finally:
            await client.close()

    assert all(r.ok for r in asyncio.run(two_calls()))
    assert [t["dialect"] for t in attack.recorded_targets()] == ["oauth", "vertex", "vertex"]


def test_vertex_with_a_key_the_token_endpoint_does_not_know_fails_as_auth(  # type: ignore[no-untyped-def]
    attack: FakeProvider, monkeypatch, settings
) -> None:
    account = vertex_account(attack, monkeypatch, settings, known=False)
    result = call(spec_for(attack, "vertex_ai", max_retries=2))
    assert result.error_kind == "auth" and result.attempts == 1, result.error
    assert "Invalid JWT Signature" in result.error and account["private_key"] not in result.error
    assert attack.snapshot()["calls"] == 0, "no model request without a token"


def test_vertex_token_uri_must_be_bound_too(  # type: ignore[no-untyped-def]
    attack: FakeProvider, internal: RecordingServer, monkeypatch, settings
) -> None:
    vertex_account(attack, monkeypatch, settings, token_uri=f"http://127.0.0.2:{internal.port}/token")
    result = call(spec_for(attack, "vertex_ai"))
    assert result.error_kind == "key_not_allowed" and "127.0.0.2" in result.error
    assert internal.requests == [] and attack.recorded_targets() == []


@pytest.mark.django_db
@pytest.mark.parametrize("where", ["token", "model"])
@pytest.mark.parametrize("status", [303, 307])
def test_a_vertex_redirect_is_not_followed(  # type: ignore[no-untyped-def]
    attack: FakeProvider,
    internal: RecordingServer,
    monkeypatch,
    settings,
    launched: Launch,
    where: str,
    status: int,
) -> None:
    account = vertex_account(attack, monkeypatch, settings)
    redirect = {"redirect_to": internal.base_url + "/x", "redirect_status": status}
    if where == "token":
        attack.token_behaviour = redirect
    else:
        attack.script(default=redirect)
    run = launched(config_for(attack, "vertex_ai"))
    assert internal.requests == [], f"the {status} redirect of the {where} request was followed"
    assert attack.snapshot()["calls"] == (0 if where == "token" else 1)
    judgment = Judgment.objects.get(run=run)
    assert judgment.error_kind == "redirect" and judgment.attempts == 1
    assert account["private_key"] not in judgment.error

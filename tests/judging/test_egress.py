"""Provider egress played by an attacker, on loopback only.

The fake provider (127.0.0.1) is the host a config may name; a recording server on 127.0.0.2 stands for an
internal service. Both addresses are allowlisted, so only the rules under test (supported providers, redirects
off, credentials by name only, nothing taken from the environment) stand between a request and the internal
server. Nothing in the code under test is patched: every request is a real one on a socket."""

import asyncio
import ipaddress
import json
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp.abc import AbstractResolver

from judging import services
from judging.config import ConfigError, validate_config
from judging.llm import egress, gateway, netguard
from judging.llm.calls import SUPPORTED_PROVIDERS, CallResult, CallSpec
from judging.llm.gateway import Gateway
from judging.llm.keys import NO_KEY, api_base_for
from judging.llm.netguard import ApiBaseRefused
from judging.models import JudgeRun, Judgment
from tests.fakeprovider import FakeProvider
from tests.judging.factories import make_dataset
from tests.security.recorder import RecordingServer

UNSUPPORTED_MODELS = [
    "sagemaker/jumpstart-dft-meta-textgeneration-llama-2-7b",
    "vertex_ai_beta/gemini-2.5-flash",
    "watsonx/ibm/granite-13b-chat-v2",
    "ollama_chat/llama3",
    "langflow/my-flow",
    "azure_ai/mistral-large",
    "cohere_chat/command-r",
    "huggingface/meta-llama/Meta-Llama-3-8B-Instruct",
]
# Credential variables litellm, the OpenAI SDK or a deployment may hold; the sweep sets every one of them.
CREDENTIAL_NAMES = [
    "OPENAI_API_KEY",
    "OPENAI_ADMIN_KEY",
    "AZURE_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "AZURE_AI_API_KEY",
    "ANTHROPIC_API_KEY",
    "WATSONX_TOKEN",
    "WATSONX_ZENAPIKEY",
    "WATSONX_APIKEY",
    "WATSONX_API_KEY",
    "WX_API_KEY",
    "WATSONX_PASSWORD",
    "OLLAMA_API_KEY",
    "HUGGINGFACE_API_KEY",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "MISTRAL_API_KEY",
    "CODESTRAL_API_KEY",
    "COHERE_API_KEY",
    "CO_API_KEY",
    "GROQ_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "PALM_API_KEY",
    "DEEPSEEK_API_KEY",
    "TOGETHERAI_API_KEY",
    "TOGETHER_API_KEY",
    "FIREWORKS_API_KEY",
    "FIREWORKS_AI_API_KEY",
    "PERPLEXITYAI_API_KEY",
    "OPENROUTER_API_KEY",
    "DEEPINFRA_API_KEY",
    "ANYSCALE_API_KEY",
    "REPLICATE_API_KEY",
    "REPLICATE_API_TOKEN",
    "AI21_API_KEY",
    "NLP_CLOUD_API_KEY",
    "ALEPH_ALPHA_API_KEY",
    "XAI_API_KEY",
    "CEREBRAS_API_KEY",
    "SAMBANOVA_API_KEY",
    "NVIDIA_NIM_API_KEY",
    "DATABRICKS_API_KEY",
    "DATABRICKS_TOKEN",
    "CLARIFAI_API_KEY",
    "VOYAGE_API_KEY",
    "FRIENDLIAI_API_KEY",
    "GITHUB_API_KEY",
    "GITHUB_TOKEN",
    "CLOUDFLARE_API_KEY",
    "PREDIBASE_API_KEY",
    "LANGFLOW_API_KEY",
    "HOSTED_VLLM_API_KEY",
    "LM_STUDIO_API_KEY",
    "DASHSCOPE_API_KEY",
    "MOONSHOT_API_KEY",
    "LITELLM_API_KEY",
    "LITELLM_MASTER_KEY",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_BEARER_TOKEN_BEDROCK",
    "AWS_PROFILE",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AZURE_OPENAI_AD_TOKEN",
    "AZURE_AD_TOKEN",
    "AZURE_CLIENT_SECRET",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "VERTEXAI_CREDENTIALS",
    "VERTEXAI_PROJECT",
    "VERTEXAI_LOCATION",
    "EVALSITE_FAKE_KEY",
    # Not keys, but values the SDK and litellm would otherwise send along.
    "OPENAI_ORG_ID",
    "OPENAI_ORGANIZATION",
    "OPENAI_PROJECT_ID",
    "OPENAI_WEBHOOK_SECRET",
    "OPENAI_API_VERSION",
    "AZURE_API_VERSION",
    "AZURE_API_TYPE",
    "AWS_ROLE_NAME",
    "AWS_SESSION_NAME",
    "AWS_WEB_IDENTITY_TOKEN",
    "AWS_PROFILE_NAME",
    "AWS_EXTERNAL_ID",
]
# Variables that would send a provider's requests elsewhere if an SDK or litellm read them: all point at the
# internal server.
STEERING_NAMES = [
    "OPENAI_BASE_URL",
    "OPENAI_API_BASE",
    "AZURE_OPENAI_ENDPOINT",
    "AZURE_API_BASE",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_API_BASE",
    "GEMINI_API_BASE",
    "MISTRAL_API_BASE",
    "AWS_BEDROCK_RUNTIME_ENDPOINT",
    "AWS_STS_ENDPOINT",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_EC2_METADATA_SERVICE_ENDPOINT",
    "VERTEXAI_API_BASE",
]


@dataclass(frozen=True)
class Provider:
    """A supported provider as a config names it, against the fake's native route for it."""

    model: str
    base_path: str  # what api_base adds to the host root, as litellm takes it for this provider
    key_header: str
    key_format: str
    usual_key_env: str
    logprobs: bool  # whether the provider returns log-probabilities (else the sampled fallback)
    config: tuple[tuple[str, str], ...] = ()


PROVIDERS = {
    "openai": Provider("openai/gpt-4o-mini", "/v1", "authorization", "Bearer {}", "OPENAI_API_KEY", True),
    "azure": Provider(
        "azure/gpt-4o-mini", "", "api-key", "{}", "AZURE_OPENAI_API_KEY", True, (("api_version", "2024-10-21"),)
    ),
    "anthropic": Provider("anthropic/claude-haiku-4-5", "", "x-api-key", "{}", "ANTHROPIC_API_KEY", False),
    "gemini": Provider("gemini/gemini-2.5-flash", "/v1beta", "x-goog-api-key", "{}", "GEMINI_API_KEY", True),
    "mistral": Provider("mistral/mistral-small-latest", "/v1", "authorization", "Bearer {}", "MISTRAL_API_KEY", False),
}
MESSAGES = [{"role": "user", "content": "Rate this answer."}]


@pytest.fixture
def internal() -> Iterator[RecordingServer]:
    server = RecordingServer("127.0.0.2")
    server.content = f"INTERNAL-ONLY-{uuid.uuid4().hex}"
    server.start()
    yield server
    server.stop()


@pytest.fixture
def attack(fake_provider: FakeProvider, internal: RecordingServer, settings) -> FakeProvider:  # type: ignore[no-untyped-def]
    settings.JUDGE_API_BASE_ALLOWLIST = ["127.0.0.1", "127.0.0.2"]
    netguard._RESOLVE_CACHE.clear()
    return fake_provider


@pytest.fixture
def canaries(monkeypatch, internal: RecordingServer) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """A distinct canary in every credential variable, and the environment set to steer requests elsewhere."""
    values = {name: f"canary-{name.lower()}-{uuid.uuid4().hex}" for name in CREDENTIAL_NAMES}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    values["OPENAI_CUSTOM_HEADERS"] = f"canary-custom-header-{uuid.uuid4().hex}"
    monkeypatch.setenv("OPENAI_CUSTOM_HEADERS", f"X-Canary: {values['OPENAI_CUSTOM_HEADERS']}")
    proxy = f"http://127.0.0.2:{internal.port}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, proxy)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AIOHTTP_TRUST_ENV", "True")
    for name in STEERING_NAMES:
        monkeypatch.setenv(name, internal.base_url)
    return values


def call(spec: CallSpec) -> CallResult:
    async def run() -> CallResult:
        gateway = Gateway()
        try:
            return await gateway.call(spec)
        finally:
            await gateway.close()

    return asyncio.run(run())


# Bedrock is signed with an AWS key pair (and session token) from three named variables, none of them a header.
BEDROCK_MODEL = "bedrock/amazon.nova-lite-v1:0"
BEDROCK_VARIABLES = {
    "aws_access_key_id_env": "EVALSITE_AWS_ACCESS_KEY",
    "aws_secret_access_key_env": "EVALSITE_AWS_SECRET_KEY",
    "aws_session_token_env": "EVALSITE_AWS_SESSION_TOKEN",
}


VERTEX_MODEL = "vertex_ai/gemini-2.5-flash"
VERTEX_EMAIL = "judge@evalsite-test.iam.gserviceaccount.com"


def provider_fields(fake: FakeProvider, provider: str) -> dict[str, Any]:
    root = fake.base_url.removesuffix("/v1")
    if provider == "vertex_ai":
        return {
            "model": VERTEX_MODEL,
            "api_base": root,
            "vertex_credentials_env": "EVALSITE_VERTEX_KEY",
            "vertex_project": "evalsite-test",
            "vertex_location": "us-central1",
        }
    if provider == "bedrock":
        return {"model": BEDROCK_MODEL, "api_base": root, "aws_region": "us-east-1", **BEDROCK_VARIABLES}
    chosen = PROVIDERS[provider]
    return {"model": chosen.model, "api_base": root + chosen.base_path, **dict(chosen.config)}


def vertex_account(
    fake: FakeProvider, monkeypatch: Any, settings: Any, *, token_uri: str | None = None, known: bool = True
) -> dict[str, Any]:
    """A service account with a fresh RSA key in EVALSITE_VERTEX_KEY, its token_uri the fake's /token endpoint
    (or `token_uri`); the fake's token endpoint knows its public key unless `known` is False."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    account = {
        "type": "service_account",
        "project_id": "evalsite-test",
        "private_key_id": uuid.uuid4().hex,
        "private_key": pem,
        "client_email": VERTEX_EMAIL,
        "token_uri": token_uri or fake.base_url.removesuffix("/v1") + "/token",
    }
    monkeypatch.setenv("EVALSITE_VERTEX_KEY", json.dumps(account))
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    fake.vertex_accounts = {VERTEX_EMAIL: (key if known else other).public_key()}
    # The variable goes to the API's origin and to the token endpoint's; here both are the fake's.
    settings.JUDGE_API_KEY_HOSTS = {"EVALSITE_VERTEX_KEY": [fake.base_url]}
    return account


def aws_keys(fake: FakeProvider, monkeypatch: Any, settings: Any, *, token: bool = True) -> dict[str, str]:
    """A fresh key pair (and session token) in the named variables, known to the fake and bound to its origin."""
    values = {
        "EVALSITE_AWS_ACCESS_KEY": "AKIA" + uuid.uuid4().hex[:16].upper(),
        "EVALSITE_AWS_SECRET_KEY": f"secret-{uuid.uuid4().hex}",
        "EVALSITE_AWS_SESSION_TOKEN": f"token-{uuid.uuid4().hex}" if token else "",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    fake.aws_keys = {
        values["EVALSITE_AWS_ACCESS_KEY"]: (
            values["EVALSITE_AWS_SECRET_KEY"],
            values["EVALSITE_AWS_SESSION_TOKEN"] or None,
        )
    }
    settings.JUDGE_API_KEY_HOSTS = {name: [fake.base_url] for name in values}
    return values


def spec_for(fake: FakeProvider, provider: str = "openai", **overrides: Any) -> CallSpec:
    values: dict[str, Any] = {
        **provider_fields(fake, provider),
        "messages": MESSAGES,
        "timeout_s": 3.0,
        "max_retries": 0,
    }
    values.update(overrides)
    return CallSpec(**values)


def config_for(fake: FakeProvider, provider: str = "openai", **overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "name": f"egress-{uuid.uuid4().hex[:6]}",
        "method": "single",
        **provider_fields(fake, provider),
        "api_key_env": None if provider in ("bedrock", "vertex_ai") else "EVALSITE_FAKE_KEY",
        "max_retries": 0,
        "timeout_s": 5,
        "cache": False,
    }
    values.update(overrides)
    return values


Launch = Callable[[dict[str, Any]], JudgeRun]


@pytest.fixture
def launched(eager: None, django_capture_on_commit_callbacks) -> Launch:  # type: ignore[no-untyped-def]
    """Launches a run of a config on a dataset of one answer, and runs its tasks at once (Celery eager)."""

    def launch(config: dict[str, Any]) -> JudgeRun:
        with django_capture_on_commit_callbacks(execute=True):
            return services.judge_run_launch(dataset=make_dataset(items=1, systems=1), config=config, launched_by=None)

    return launch


def everything_sent(fake: FakeProvider) -> str:
    return json.dumps([fake.recorded_headers(), fake.recorded_bodies(), fake.recorded_targets()])


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


# -- the connection's own DNS answer --------------------------------------------------------------------------


def test_the_connectors_own_lookup_is_checked_not_only_the_earlier_one(attack: FakeProvider, settings) -> None:  # type: ignore[no-untyped-def]
    # The judge client's connector resolves a host again when it connects; a host that answered with a public
    # address to the first lookup and a private one to this one must still be refused. Here the earlier check is
    # left out altogether (no GuardedTransport), so only the connector's own lookup stands in the way.
    url = f"http://localhost:{attack.port}/v1/chat/completions"
    body = {"model": "m", "messages": MESSAGES}

    async def post() -> int:
        async with httpx.AsyncClient(transport=gateway._fast_transport(4, egress.GuardedResolver)) as client:
            return (await client.post(url, json=body)).status_code

    settings.JUDGE_API_BASE_ALLOWLIST = []
    with pytest.raises(ApiBaseRefused):
        asyncio.run(post())
    assert attack.snapshot()["calls"] == 0
    settings.JUDGE_API_BASE_ALLOWLIST = ["127.0.0.0/8", "::1/128"]
    assert asyncio.run(post()) == 200
    assert attack.snapshot()["calls"] == 1


class _RebindingResolver(AbstractResolver):
    """A name server that answers a public address first and loopback on every later question."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.answers: list[str] = []

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET) -> list[Any]:
        address = "93.184.215.14" if not self.answers else "127.0.0.1"
        self.answers.append(address)
        return [
            {"hostname": host, "host": address, "port": self.port, "family": socket.AF_INET, "proto": 0, "flags": 0}
        ]

    async def close(self) -> None:
        pass


def test_a_rebinding_name_is_refused_at_the_address_actually_connected_to(attack: FakeProvider, settings) -> None:  # type: ignore[no-untyped-def]
    # The guard's own lookup (cached for 30 s) saw the public first answer; the connection then asks again and is
    # told 127.0.0.1. The check that counts is the one on the address the connection uses.
    settings.JUDGE_API_BASE_ALLOWLIST = []
    host = "rebind.evalsite.test"
    rebinding = _RebindingResolver(attack.port)
    assert asyncio.run(egress.GuardedResolver(rebinding).resolve(host, attack.port))[0]["host"] == "93.184.215.14"
    netguard._RESOLVE_CACHE[(host, attack.port)] = (time.monotonic(), [ipaddress.ip_address("93.184.215.14")])
    netguard.check_host(host, attack.port)  # the first answer passes the guard

    async def post() -> None:
        inner = gateway._fast_transport(4, lambda: egress.GuardedResolver(rebinding))
        async with egress.guarded_async_client(5, inner=inner) as client:
            await client.post(
                f"http://{host}:{attack.port}/v1/chat/completions", json={"model": "m", "messages": MESSAGES}
            )

    with pytest.raises(ApiBaseRefused, match=r"127\.0\.0\.1"):
        asyncio.run(post())
    assert rebinding.answers == ["93.184.215.14", "127.0.0.1"]
    assert attack.snapshot()["calls"] == 0, "the rebound name reached loopback"


# -- what a researcher reads of a failure ----------------------------------------------------------------------


@pytest.mark.django_db
def test_errors_are_short_and_carry_no_traceback_server_path_or_refused_body(  # type: ignore[no-untyped-def]
    attack: FakeProvider, internal: RecordingServer, monkeypatch, launched: Launch
) -> None:
    monkeypatch.setenv("EVALSITE_FAKE_KEY", f"sk-bound-{uuid.uuid4().hex}")
    attack.script(default={"status": 500})
    run = launched(config_for(attack))
    stored = Judgment.objects.get(run=run)
    assert stored.status == "failed"
    errors = {"stored 500": stored.error}
    attack.script(default={"status": 400})
    errors["400"] = call(spec_for(attack)).error
    attack.script(default={"redirect_to": internal.base_url + "/chat/completions", "redirect_status": 302})
    errors["redirect"] = call(spec_for(attack)).error
    errors["refused host"] = call(spec_for(attack, api_base=f"http://127.0.0.3:{internal.port}/v1")).error
    errors["nothing listening"] = call(spec_for(attack, api_base="http://127.0.0.1:9/v1")).error
    root = str(Path(__file__).resolve().parents[2])
    for what, error in errors.items():
        assert error, what
        assert "Traceback" not in error and 'File "' not in error, what
        assert root not in error and "site-packages" not in error and "/usr/lib" not in error, what
        assert internal.content not in error, what
        assert len(error) <= 2000, what
    assert internal.requests == []

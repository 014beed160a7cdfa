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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp.abc import AbstractResolver

from judging import services
from judging.config import ConfigError, validate_config
from judging.llm import egress, gateway, netguard
from judging.llm.calls import SUPPORTED_PROVIDERS, CallResult, CallSpec
from judging.llm.gateway import NO_KEY, Gateway, api_base_for
from judging.llm.netguard import ApiBaseRefused
from judging.models import JudgeRun, Judgment
from tests.fakeprovider import FakeProvider
from tests.judging.factories import make_dataset
from tests.security.recorder import RecordingServer

UNSUPPORTED_MODELS = [
    "azure/gpt-4o",
    "anthropic/claude-3-5-sonnet-20240620",
    "watsonx/ibm/granite-13b-chat-v2",
    "ollama_chat/llama3",
    "langflow/my-flow",
    "mistral/mistral-large-latest",
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
    "EVALSITE_FAKE_KEY",
    # Not keys, but values the SDK and litellm would otherwise send along.
    "OPENAI_ORG_ID",
    "OPENAI_ORGANIZATION",
    "OPENAI_PROJECT_ID",
    "OPENAI_WEBHOOK_SECRET",
]
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
    monkeypatch.setenv("OPENAI_BASE_URL", internal.base_url)
    monkeypatch.setenv("OPENAI_API_BASE", internal.base_url)
    return values


def call(spec: CallSpec) -> CallResult:
    async def run() -> CallResult:
        gateway = Gateway()
        try:
            return await gateway.call(spec)
        finally:
            await gateway.close()

    return asyncio.run(run())


def spec_for(fake: FakeProvider, **overrides: Any) -> CallSpec:
    values: dict[str, Any] = {
        "model": "openai/gpt-4o-mini",
        "messages": MESSAGES,
        "api_base": fake.base_url,
        "timeout_s": 3.0,
        "max_retries": 0,
    }
    values.update(overrides)
    return CallSpec(**values)


def config_for(fake: FakeProvider, **overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "name": f"egress-{uuid.uuid4().hex[:6]}",
        "method": "single",
        "model": "openai/gpt-4o-mini",
        "api_base": fake.base_url,
        "api_key_env": "EVALSITE_FAKE_KEY",
        "max_retries": 0,
        "timeout_s": 5,
        "cache": False,
    }
    values.update(overrides)
    return values


def everything_sent(fake: FakeProvider) -> str:
    return json.dumps([fake.recorded_headers(), fake.recorded_bodies()])


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


@pytest.mark.django_db
@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_to_an_internal_server_is_not_followed(  # type: ignore[no-untyped-def]
    attack: FakeProvider,
    internal: RecordingServer,
    monkeypatch,
    eager,
    django_capture_on_commit_callbacks,
    status: int,
) -> None:
    key = f"sk-bound-{uuid.uuid4().hex}"
    monkeypatch.setenv("EVALSITE_FAKE_KEY", key)
    attack.script(default={"redirect_to": internal.base_url + "/chat/completions", "redirect_status": status})
    with django_capture_on_commit_callbacks(execute=True):
        run = services.judge_run_launch(
            dataset=make_dataset(items=1, systems=1), config=config_for(attack), launched_by=None
        )
    assert attack.snapshot()["calls"] == 1, "the redirecting host saw exactly the one request"
    assert attack.recorded_headers()[0]["authorization"] == f"Bearer {key}"
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
    attack: FakeProvider, internal: RecordingServer, monkeypatch, eager, django_capture_on_commit_callbacks
) -> None:
    monkeypatch.setenv("EVALSITE_FAKE_KEY", f"sk-bound-{uuid.uuid4().hex}")
    attack.script(default={"status": 500})
    with django_capture_on_commit_callbacks(execute=True):
        run = services.judge_run_launch(
            dataset=make_dataset(items=1, systems=1), config=config_for(attack), launched_by=None
        )
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

"""The attacker's side of the provider-egress tests: the supported providers as configs name them, credential
and steering variables to plant, and call and launch helpers against the fake provider on loopback."""

import asyncio
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from judging.llm.calls import CallResult, CallSpec
from judging.llm.gateway import Gateway
from judging.models import JudgeRun
from tests.fakeprovider import FakeProvider

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


def everything_sent(fake: FakeProvider) -> str:
    return json.dumps([fake.recorded_headers(), fake.recorded_bodies(), fake.recorded_targets()])

"""Provider wire formats the gateway builds or reads itself: Bedrock's Converse request body and error text, the
service-account assertion of Vertex AI's JWT-bearer grant (RFC 7523), and the log-probabilities of a chat reply."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

from judging.llm.calls import CallSpec
from judging.llm.keys import KeyNotAllowed

# The JWT-bearer grant's audience is Google's token endpoint whatever token_uri the key file names.
GOOGLE_GRANT_AUDIENCE = "https://oauth2.googleapis.com/token"
_VERTEX_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def service_account_jwt(account: dict[str, Any], now: float | None = None) -> str:
    """The signed assertion of the JWT-bearer grant (RFC 7523), RS256 with the service account's key."""
    from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415 -- Vertex runs only
    from cryptography.hazmat.primitives.asymmetric import padding, rsa  # noqa: PLC0415 -- see above

    key = serialization.load_pem_private_key(str(account["private_key"]).encode(), password=None)
    if not isinstance(key, rsa.RSAPrivateKey):
        raise KeyNotAllowed("the service account's private_key is not an RSA key")
    issued = int(now if now is not None else time.time())
    header: dict[str, Any] = {"alg": "RS256", "typ": "JWT"}
    if account.get("private_key_id"):
        header["kid"] = str(account["private_key_id"])
    claims = {
        "iss": str(account["client_email"]),
        "scope": _VERTEX_SCOPE,
        "aud": GOOGLE_GRANT_AUDIENCE,
        "iat": issued,
        "exp": issued + 3600,
    }
    signing_input = _b64url(json.dumps(header).encode()) + "." + _b64url(json.dumps(claims).encode())
    signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return signing_input + "." + _b64url(signature)


def converse_body(spec: CallSpec) -> dict[str, Any]:
    """The Converse request for a chat: system messages apart, the others as text blocks, alternating roles kept."""
    system = [{"text": m["content"]} for m in spec.messages if m.get("role") == "system" and m.get("content")]
    messages: list[dict[str, Any]] = []
    for message in spec.messages:
        if message.get("role") == "system":
            continue
        role = "assistant" if message.get("role") == "assistant" else "user"
        block = {"text": str(message.get("content") or "")}
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].append(block)
        else:
            messages.append({"role": role, "content": [block]})
    inference: dict[str, Any] = {"temperature": spec.temperature}
    if spec.max_tokens:
        inference["maxTokens"] = spec.max_tokens
    body: dict[str, Any] = {"messages": messages, "inferenceConfig": inference}
    if system:
        body["system"] = system
    return body


def bedrock_error(response: Any) -> str:
    kind = str(response.headers.get("x-amzn-errortype", "")).partition(":")[0]
    try:
        message = str(response.json().get("message") or response.json().get("Message") or "")
    except ValueError:
        message = ""
    return f"{kind}: {message}"[:500] if kind else message[:500]


def extract_logprobs(response: Any) -> list[dict[str, Any]] | None:
    try:
        logprobs = response.choices[0].logprobs
    except (AttributeError, IndexError):
        return None
    if logprobs is None:
        return None
    content = getattr(logprobs, "content", None)
    if content is None and isinstance(logprobs, dict):
        content = logprobs.get("content")
    if not content:
        return None
    tokens = []
    for entry in content:
        item = entry if isinstance(entry, dict) else entry.model_dump()
        tokens.append(
            {
                "token": item.get("token"),
                "logprob": item.get("logprob"),
                # The exact bytes: a token string cannot show half of a multi-byte character.
                "bytes": item.get("bytes"),
                "top_logprobs": [
                    {"token": t.get("token"), "logprob": t.get("logprob")}
                    for t in (item.get("top_logprobs") or [])
                    if isinstance(t, dict)
                ]
                or [
                    {"token": getattr(t, "token", None), "logprob": getattr(t, "logprob", None)}
                    for t in (item.get("top_logprobs") or [])
                    if not isinstance(t, dict)
                ],
            }
        )
    return tokens

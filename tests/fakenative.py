"""The native wire formats of the fake provider (tests/fakeprovider.py): Azure OpenAI's auth and api-version,
Anthropic Messages, Gemini generateContent and Bedrock Converse (its SigV4 signature recomputed from the request as it
arrived, with the secret the fake was given), each with the provider's own request checks, response and error
shapes and rate-limit headers, as their API references document them."""

from __future__ import annotations

import base64
import json
import math
import re
import time
import urllib.parse
import uuid
from typing import TYPE_CHECKING, Any

from aiohttp import web

if TYPE_CHECKING:
    from tests.fakeprovider import FakeProvider

_GEMINI_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}
_ANTHROPIC_ERROR = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
    503: "api_error",
}


def prompt_parts(body: dict[str, Any]) -> list[Any]:
    """What a rule's `match` is looked for in: the prompt, in any of the formats."""
    return [body.get(name) for name in ("system", "messages", "system_instruction", "contents") if body.get(name)]


def billed_tokens(payload: dict[str, Any]) -> int:
    usage = payload.get("usage") or {}
    if "total_tokens" in usage:
        return int(usage["total_tokens"] or 0)
    if "totalTokens" in usage:
        return int(usage["totalTokens"] or 0)
    if "input_tokens" in usage:
        return int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0)
    return int((payload.get("usageMetadata") or {}).get("totalTokenCount") or 0)


def _gemini_error(status: int, message: str, reason: str | None = None) -> web.Response:
    error: dict[str, Any] = {"code": status, "message": message, "status": _GEMINI_STATUS.get(status, "UNKNOWN")}
    if reason:
        error["details"] = [
            {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": "googleapis.com"}
        ]
    return web.json_response({"error": error}, status=status)


def _anthropic_error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    body = {"type": "error", "error": {"type": _ANTHROPIC_ERROR.get(status, "api_error"), "message": message}}
    return web.json_response(body, status=status, headers=headers or {})


def _aws_error(status: int, kind: str, message: str) -> web.Response:
    return web.json_response({"message": message}, status=status, headers={"x-amzn-ErrorType": f"{kind}:"})


_AUTHORIZATION = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/(?P<service>[^/]+)/aws4_request, "
    r"SignedHeaders=(?P<signed>[a-z0-9;-]+), Signature=(?P<signature>[0-9a-f]{64})$"
)


def sigv4_refusal(request: web.Request, raw: bytes, keys: dict[str, tuple[str, str | None]]) -> web.Response | None:
    """Bedrock's answer to a request whose SigV4 signature is missing or wrong: the canonical request is rebuilt from
    the method, path, query, signed headers and body as they arrived, and signed again with the secret of the key id
    the request names (botocore's signer, given the request's own x-amz-date)."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    match = _AUTHORIZATION.match(request.headers.get("authorization", ""))
    if match is None:
        return _aws_error(403, "MissingAuthenticationTokenException", "Missing Authentication Token")
    if match["key"] not in keys:
        return _aws_error(403, "UnrecognizedClientException", "The security token included in the request is invalid.")
    secret, token = keys[match["key"]]
    if token is not None and request.headers.get("x-amz-security-token") != token:
        return _aws_error(403, "UnrecognizedClientException", "The security token included in the request is invalid.")
    signed_names = match["signed"].split(";")
    if "host" not in signed_names or "x-amz-date" not in signed_names:
        return _aws_error(403, "InvalidSignatureException", "Host and x-amz-date must be signed.")
    stamp = request.headers.get("x-amz-date", "")
    rebuilt = AWSRequest(
        method=request.method,
        url=f"http://{request.headers['host']}{request.raw_path}",
        data=raw,
        headers={name: request.headers[name] for name in signed_names if name in request.headers},
    )
    rebuilt.context["timestamp"] = stamp
    signer = SigV4Auth(Credentials(match["key"], secret, token), match["service"], match["region"])
    canonical = signer.canonical_request(rebuilt)
    expected = signer.signature(signer.string_to_sign(rebuilt, canonical), rebuilt)
    if match["service"] != "bedrock" or stamp[:8] != match["date"] or expected != match["signature"]:
        return _aws_error(
            403,
            "InvalidSignatureException",
            "The request signature we calculated does not match the signature you provided. Check your AWS Secret "
            "Access Key and signing method. Consult the service documentation for details.",
        )
    return None


def auth_refusal(
    dialect: str,
    request: web.Request,
    key: str | None,
    raw: bytes = b"",
    aws_keys: dict[str, tuple[str, str | None]] | None = None,
    vertex_tokens: set[str] | None = None,
) -> web.Response | None:
    """The provider's own answer to a request without its credential (or protocol version), else None."""
    headers = request.headers
    if dialect == "bedrock":
        return sigv4_refusal(request, raw, aws_keys or {})
    if dialect == "vertex":
        given = headers.get("authorization", "").removeprefix("Bearer ")
        if given not in (vertex_tokens or set()):
            return _gemini_error(
                401,
                "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or "
                "other valid authentication credential.",
                "ACCESS_TOKEN_TYPE_UNSUPPORTED",
            )
        return None
    if dialect == "azure":
        if not request.query.get("api-version"):
            return web.json_response({"error": {"code": "404", "message": "Resource not found"}}, status=404)
        if key is not None and headers.get("api-key") != key:
            return web.json_response(
                {
                    "error": {
                        "code": "401",
                        "message": "Access denied due to invalid subscription key or wrong API endpoint. Make sure "
                        "to provide a valid key for an active subscription and use a correct regional API endpoint "
                        "for your resource.",
                    }
                },
                status=401,
            )
        return None
    if dialect == "anthropic":
        if not headers.get("anthropic-version"):
            return _anthropic_error(400, "anthropic-version: header is required")
        if key is not None and headers.get("x-api-key") != key:
            return _anthropic_error(401, "invalid x-api-key")
        return None
    if dialect == "gemini":
        if key is None:
            return None
        api_key = headers.get("x-goog-api-key") or request.query.get("key")
        if not api_key:
            return _gemini_error(
                403,
                "Method doesn't allow unregistered callers (callers without established identity). Please use API "
                "Key or other form of API consumer identity to call this API.",
            )
        if api_key != key:
            return _gemini_error(400, "API key not valid. Please pass a valid API key.", "API_KEY_INVALID")
        return None
    if key is not None and headers.get("authorization") != f"Bearer {key}":
        return web.json_response(
            {
                "error": {
                    "message": "Incorrect API key provided.",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "invalid_api_key",
                }
            },
            status=401,
        )
    return None


GOOGLE_TOKEN_AUDIENCE = "https://oauth2.googleapis.com/token"


def _b64decode(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def _oauth_error(error: str, description: str) -> web.Response:
    return web.json_response({"error": error, "error_description": description}, status=400)


def token_grant(raw: bytes, accounts: dict[str, Any]) -> tuple[web.Response, str | None]:
    """Google's token endpoint for the JWT-bearer grant: the assertion's RS256 signature verified with the service
    account's public key, its audience, lifetime and scope checked; an access token issued, or Google's error."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    form = {k: v[0] for k, v in urllib.parse.parse_qs(raw.decode("utf-8", "replace")).items()}
    if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
        return _oauth_error("unsupported_grant_type", "Invalid grant_type: " + form.get("grant_type", "")), None
    try:
        header_part, claims_part, signature_part = form.get("assertion", "").split(".")
        header, claims = json.loads(_b64decode(header_part)), json.loads(_b64decode(claims_part))
    except ValueError:
        return _oauth_error("invalid_grant", "Invalid JWT: could not be decoded"), None
    public_key = accounts.get(str(claims.get("iss")))
    if public_key is None:
        return _oauth_error("invalid_grant", "Invalid grant: account not found"), None
    try:
        public_key.verify(
            _b64decode(signature_part),
            f"{header_part}.{claims_part}".encode(),
            padding.PKCS1v15(),
            hashes.SHA256(),
        )
    except (InvalidSignature, ValueError):
        return _oauth_error("invalid_grant", "Invalid JWT Signature."), None
    now = time.time()
    if header.get("alg") != "RS256" or claims.get("aud") != GOOGLE_TOKEN_AUDIENCE:
        return _oauth_error("invalid_grant", "Invalid JWT: Failed audience check."), None
    issued, expires = float(claims.get("iat", 0)), float(claims.get("exp", 0))
    if not (issued - 300 <= now <= expires) or expires - issued > 3600:
        return _oauth_error(
            "invalid_grant",
            "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.",
        ), None
    if "https://www.googleapis.com/auth/cloud-platform" not in str(claims.get("scope", "")).split():
        return _oauth_error("invalid_scope", "Invalid OAuth scope or ID token audience provided."), None
    token = f"ya29.fake-{uuid.uuid4().hex}"
    return web.json_response({"access_token": token, "expires_in": 3599, "token_type": "Bearer"}), token


def _tokens(content: str) -> list[str]:
    return re.findall(r"\d|\s+|[^\d\s]+", content)


def _gemini_logprobs(content: str, distribution: dict[str, float], top_n: int) -> dict[str, Any]:
    tokens = _tokens(content)
    digits = [i for i, t in enumerate(tokens) if t.isdigit()]
    score_at = digits[-1] if digits else -1
    chosen, top = [], []
    for i, token in enumerate(tokens):
        if i == score_at:
            ranked = sorted(distribution.items(), key=lambda kv: -kv[1])[:top_n]
            chosen.append({"token": token, "logProbability": math.log(max(distribution.get(token, 1e-9), 1e-9))})
            top.append({"candidates": [{"token": t, "logProbability": math.log(max(p, 1e-9))} for t, p in ranked]})
        else:
            chosen.append({"token": token, "logProbability": -0.01})
            top.append({"candidates": [{"token": token, "logProbability": -0.01}]})
    return {"topCandidates": top, "chosenCandidates": chosen}


def render(
    fake: FakeProvider, dialect: str, body: dict[str, Any], key: str, behaviour: dict[str, Any], request: Any
) -> web.Response:
    if behaviour.get("redirect_to"):
        moved = int(behaviour.get("redirect_status", 307))
        return web.Response(status=moved, headers={"Location": str(behaviour["redirect_to"])})
    status = behaviour.get("status")
    if status:
        headers = {}
        if behaviour.get("retry_after") is not None:
            headers["Retry-After"] = str(behaviour["retry_after"])
        headers.update(behaviour.get("headers") or {})
        if dialect == "anthropic":
            return _anthropic_error(int(status), f"scripted error {status}", headers)
        if dialect in ("gemini", "vertex"):
            response = _gemini_error(int(status), f"scripted error {status}")
            response.headers.update(headers)
            return response
        if dialect == "bedrock":
            kind = "ThrottlingException" if int(status) == 429 else "InternalServerException"
            response = _aws_error(int(status), kind, f"scripted error {status}")
            response.headers.update(headers)
            return response
        return web.json_response(
            {"message": f"scripted error {status}", "type": "scripted", "code": str(status)},
            status=int(status),
            headers=headers,
        )
    if behaviour.get("malformed"):
        return web.Response(status=200, text="<html>not json", content_type="text/html")
    content = fake._content(body, key, behaviour)
    prompt_tokens = max(1, len(json.dumps(prompt_parts(body), ensure_ascii=False)) // 4)
    completion_tokens = max(1, len(content) // 4)
    if isinstance(behaviour.get("usage"), dict):
        prompt_tokens = int(behaviour["usage"]["prompt_tokens"])
        completion_tokens = int(behaviour["usage"]["completion_tokens"])
    model = str(body.get("model") or (request.match_info.get("action", "").partition(":")[0] if request else ""))
    if dialect == "anthropic":
        payload = {
            "id": "msg_" + key[:24],
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": content}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": prompt_tokens, "output_tokens": completion_tokens},
        }
        headers = {
            "request-id": "req_" + key[:24],
            "anthropic-ratelimit-requests-limit": "50",
            "anthropic-ratelimit-requests-remaining": "49",
            "anthropic-ratelimit-requests-reset": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 60)),
        }
        return web.json_response(payload, headers=headers)
    if dialect == "bedrock":
        reply: dict[str, Any] = {
            "output": {"message": {"role": "assistant", "content": [{"text": content}]}},
            "stopReason": "end_turn",
            "usage": {
                "inputTokens": prompt_tokens,
                "outputTokens": completion_tokens,
                "totalTokens": prompt_tokens + completion_tokens,
            },
            "metrics": {"latencyMs": 12},
        }
        return web.json_response(reply, headers={"x-amzn-RequestId": key[:36]})
    if dialect in ("gemini", "vertex"):
        candidate: dict[str, Any] = {
            "content": {"parts": [{"text": content}], "role": "model"},
            "finishReason": "STOP",
            "index": 0,
        }
        config = body.get("generationConfig") or {}
        if config.get("responseLogprobs") and behaviour.get("logprobs"):
            candidate["logprobsResult"] = _gemini_logprobs(
                content, behaviour["logprobs"], int(config.get("logprobs") or 5)
            )
        payload = {
            "candidates": [candidate],
            "usageMetadata": {
                "promptTokenCount": prompt_tokens,
                "candidatesTokenCount": completion_tokens,
                "totalTokenCount": prompt_tokens + completion_tokens,
            },
            "modelVersion": model,
            "responseId": key[:24],
        }
        return web.json_response(payload)
    raise ValueError(f"unknown dialect {dialect!r}")

"""Vertex AI access tokens: the OAuth JWT-bearer grant for a service account, sent through the guarded client
(google-auth would send it over requests, with proxies and redirects), one grant shared by the calls waiting at once
and reused until a minute before it expires."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
from typing import Any
from urllib.parse import urlencode

from judging.llm.calls import CallSpec
from judging.llm.failures import ProviderAnswered, transport_error
from judging.llm.keys import KeyNotAllowed, check_key_destination
from judging.llm.wire import GOOGLE_GRANT_AUDIENCE, service_account_jwt


class VertexTokens:
    """The access tokens of one gateway, per credential variable, key and token endpoint."""

    def __init__(self) -> None:
        self._tokens: dict[tuple[str, str, str], tuple[str, float]] = {}
        self._lock = asyncio.Lock()
        self._client: Any = None

    async def token(self, spec: CallSpec) -> str:
        """An OAuth access token for the service account in the named variable, by the JWT-bearer grant sent
        through the guarded client (google-auth would send it over requests, with proxies and redirects)."""
        variable = spec.vertex_credentials_env or ""
        raw = os.environ.get(variable, "")
        try:
            account = json.loads(raw) if raw else {}
        except ValueError:
            account = {}
        if not isinstance(account, dict) or not account.get("client_email") or not account.get("private_key"):
            raise KeyNotAllowed(f"{variable} must hold a service account's JSON key (client_email and private_key)")
        token_uri = str(account.get("token_uri") or GOOGLE_GRANT_AUDIENCE)
        check_key_destination(variable, token_uri)
        cache_key = (variable, hashlib.sha256(raw.encode()).hexdigest(), token_uri)
        # One grant for the calls waiting at once: the first fetches, the others take its token.
        async with self._lock:
            cached = self._tokens.get(cache_key)
            if cached and cached[1] - 60 > time.time():
                return cached[0]
            token, lifetime = await self._grant(spec, account, token_uri)
            self._tokens[cache_key] = (token, time.time() + lifetime)
            return token

    async def _grant(self, spec: CallSpec, account: dict[str, Any], token_uri: str) -> tuple[str, float]:
        from judging.llm import egress  # noqa: PLC0415 -- httpx, kept out of start-up

        client = self._client
        if client is None:
            # Not behind the send gate: the token request is not a model call and counts in no rpm window.
            inner = egress.pooled_transport(8)
            client = self._client = egress.guarded_async_client(spec.timeout_s, inner=inner, provider="oauth")
        form = {"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer", "assertion": service_account_jwt(account)}
        try:
            response = await client.post(
                token_uri, content=urlencode(form), headers={"Content-Type": "application/x-www-form-urlencoded"}
            )
        except Exception as exc:
            raise transport_error(exc) from exc
        if response.status_code >= 300:
            raise ProviderAnswered(response.status_code, f"token endpoint: {response.text[:300]}", response, auth=True)
        try:
            data = response.json()
            return str(data["access_token"]), float(data.get("expires_in") or 3600)
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError("the token endpoint's reply has no access_token") from exc

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
        self._client = None

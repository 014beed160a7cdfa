"""A local OpenAI-compatible chat-completions server on a real socket, scriptable per test.

Used by tests (in a background thread, via `FakeProvider().start()`) and by bench/ (as a separate
process: `python tests/fakeprovider.py --port 8001 --latency 0.3`, scripted and inspected over
`/_control/*`). Behaviours are plain JSON so both ways of driving it share one vocabulary:

    latency       seconds to wait before answering (default 0)
    status        HTTP error status to return (400, 401, 404, 429, 500, 503 ...)
    retry_after   value of the Retry-After header (with status 429/503)
    headers       more response headers for an error status, e.g. a provider's own rate-limit headers
    hang          seconds to sleep before answering (longer than the client timeout = a timeout)
    error         "context_length" gives the body OpenAI sends for too-long prompts
    content       fixed assistant text
    score         {"min": 1, "max": 5}: a deterministic "reasoning + Score: N" reply per request
    malformed     true: a 200 response whose body is not JSON
    empty         true: a 200 response with empty assistant content
    logprobs      {"4": 0.6, "5": 0.3, "3": 0.1}: top_logprobs offered on the score token when the
                  request asks for logprobs
    tokens        the exact `logprobs.content` to return (when the request asks for logprobs), whose
                  tokens also spell the reply unless `content` is given: a list of
                  [token, {alternative: probability} or null], or of
                  {"bytes": [...], "top": {...}} for a token that is part of a multi-byte character
    usage         {"prompt_tokens": 10, "completion_tokens": 5}, or "counted": the tokens as OpenAI counts them for
                  a gpt-4o model (o200k_base: each message's content + 3, + 3 for the reply)
    drip          seconds between the pieces of a 200 response's body, sent in `drip_pieces` pieces (default 20):
                  a slow stream that never pauses long enough for a read timeout
    redirect_to   URL for a redirect (307 unless redirect_status says 301, 302, 303 or 308)
    served_model  the model identifier the reply names in its `model` field (default: the requested model), as a
                  provider does when an alias points to a dated snapshot; each request's is in `request_log()`

Besides OpenAI's chat completions (also what Mistral serves at /v1), the server speaks the native wire formats of
Azure OpenAI (/openai/deployments/<deployment>/chat/completions?api-version=...), Anthropic Messages (/v1/messages)
and Gemini (/v1beta/models/<model>:generateContent), with their own response and error shapes, their own auth headers
and their own rate-limit headers. Set `required_key` and each route checks its provider's credential header (and
Azure's api-version, Anthropic's anthropic-version) the way the provider does, answering 401 with its error body.

Rules (`match` = substring of the request's messages) apply before the default, optionally a
limited number of `times`. `faults` injects transient failures on the first attempt of a
deterministic fraction of distinct requests, so tests can check that every request succeeded
exactly once despite them.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import hashlib
import json
import math
import re
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

try:
    from tests import fakenative as native
except ImportError:  # run as a script (bench/), with tests/ itself on the path
    import fakenative as native  # type: ignore[no-redef]

Behaviour = dict[str, Any]
# Each provider's chat path, and the dialect its calls are read and answered in.
DIALECT_PATHS = (
    ("/v1/chat/completions", "openai"),
    ("/chat/completions", "openai"),
    ("/openai/deployments/{deployment}/chat/completions", "azure"),
    ("/v1/messages", "anthropic"),
    ("/v1beta/models/{action}", "gemini"),
    ("/model/{model_id}/converse", "bedrock"),
    ("/v1/projects/{project}/locations/{location}/publishers/google/models/{action}", "vertex"),
)


def request_key(body: dict[str, Any]) -> str:
    """Identity of a request as the provider sees it (model, messages and sampling params)."""
    material = {k: v for k, v in body.items() if k not in ("stream",)}
    return hashlib.sha256(json.dumps(material, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Rule:
    match: str
    behaviour: Behaviour
    times: int | None = None
    used: int = 0


@dataclass
class Stats:
    calls: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    attempts_by_key: Counter[str] = field(default_factory=Counter)
    successes_by_key: Counter[str] = field(default_factory=Counter)
    headers: list[dict[str, str]] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    started_at: list[float] = field(default_factory=list)
    # The path and query of every request, and which provider's route received it.
    targets: list[dict[str, str]] = field(default_factory=list)
    # Every request as the provider logs it: when it arrived (time.monotonic), its status and the tokens it billed.
    log: list[dict[str, Any]] = field(default_factory=list)


class FakeProvider:
    def __init__(self, host: str = "127.0.0.1", port: int | None = None, record_limit: int = 20000) -> None:
        self.host = host
        self.port = port or free_port()
        self.record_limit = record_limit
        self._lock = threading.Lock()
        self.default: Behaviour = {}
        self.rules: list[Rule] = []
        self.faults: dict[str, Any] | None = None
        self.content_fn: Callable[[dict[str, Any]], str] | None = None
        # When set, every route answers 401 unless its provider's credential header carries this key.
        self.required_key: str | None = None
        # Bedrock: the key pairs (access key id -> secret, and the session token it needs, if any) whose SigV4
        # signatures the fake recomputes; none set: every Bedrock request is refused as unsigned.
        self.aws_keys: dict[str, tuple[str, str | None]] = {}
        # Vertex AI: the service accounts (client_email -> RSA public key) whose JWT-bearer grants the token
        # endpoint (/token) verifies, the access tokens it issued, and a behaviour for the token endpoint itself.
        self.vertex_accounts: dict[str, Any] = {}
        self.vertex_tokens: set[str] = set()
        self.token_behaviour: Behaviour = {}
        self.stats = Stats()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._started = threading.Event()

    # -- scripting -------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def script(
        self,
        default: Behaviour | None = None,
        rules: list[dict[str, Any]] | None = None,
        faults: dict[str, Any] | None = None,
    ) -> None:
        with self._lock:
            self.default = dict(default or {})
            self.rules = [Rule(r["match"], dict(r["behaviour"]), r.get("times")) for r in (rules or [])]
            self.faults = dict(faults) if faults else None

    def reset(self) -> None:
        with self._lock:
            self.stats = Stats()
            self.default = {}
            self.rules = []
            self.faults = None
            self.content_fn = None
            self.required_key = None
            self.aws_keys = {}
            self.vertex_accounts = {}
            self.vertex_tokens = set()
            self.token_behaviour = {}

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            s = self.stats
            return {
                "calls": s.calls,
                "in_flight": s.in_flight,
                "max_in_flight": s.max_in_flight,
                "statuses": {str(k): v for k, v in s.statuses.items()},
                "distinct_requests": len(s.attempts_by_key),
                "max_successes_per_request": max(s.successes_by_key.values(), default=0),
                "successes": sum(s.successes_by_key.values()),
            }

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> FakeProvider:
        self._thread = threading.Thread(target=self._serve_forever, name="fakeprovider", daemon=True)
        self._thread.start()
        if not self._started.wait(10):
            raise RuntimeError("fake provider did not start")
        return self

    def stop(self) -> None:
        if self._loop is None:
            return
        loop = self._loop
        fut = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
        fut.result(10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread:
            self._thread.join(10)
        self._loop = None

    async def _shutdown(self) -> None:
        if self._runner:
            await self._runner.cleanup()

    def _serve_forever(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        loop.run_until_complete(self._start_site())
        self._started.set()
        loop.run_forever()
        loop.close()

    async def _start_site(self) -> None:
        app = self.make_app()
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=1024, reuse_address=True)
        await site.start()

    def make_app(self) -> web.Application:
        app = web.Application(client_max_size=32 * 1024 * 1024)
        for path, dialect in DIALECT_PATHS:
            app.router.add_post(path, functools.partial(self._serve, dialect=dialect))
        app.router.add_post("/token", self._token)
        app.router.add_post("/_control/script", self._control_script)
        app.router.add_post("/_control/reset", self._control_reset)
        app.router.add_get("/_control/stats", self._control_stats)
        return app

    # -- control endpoints (for out-of-process use) ---------------------------------------
    async def _control_script(self, request: web.Request) -> web.Response:
        data = await request.json()
        self.script(data.get("default"), data.get("rules"), data.get("faults"))
        return web.json_response({"ok": True})

    async def _control_reset(self, request: web.Request) -> web.Response:
        self.reset()
        return web.json_response({"ok": True})

    async def _control_stats(self, request: web.Request) -> web.Response:
        return web.json_response(self.snapshot())

    # -- the provider ----------------------------------------------------------------------
    def _choose(self, body: dict[str, Any], key: str, attempt: int) -> Behaviour:
        text = json.dumps(native.prompt_parts(body), ensure_ascii=False)
        with self._lock:
            behaviour = dict(self.default)
            for rule in self.rules:
                if rule.match in text and (rule.times is None or rule.used < rule.times):
                    rule.used += 1
                    behaviour.update(rule.behaviour)
                    break
            faults = self.faults
        if faults and attempt <= int(faults.get("attempts", 1)):
            digest = int(key[:8], 16)
            rate = float(faults.get("rate", 0.1))
            if (digest % 10000) / 10000 < rate:
                kinds = faults.get("kinds", [429, 500, 503, "timeout"])
                kind = kinds[(digest // 7 + attempt) % len(kinds)]
                if kind == "timeout":
                    behaviour.update({"hang": float(faults.get("hang", 5.0))})
                else:
                    behaviour.update({"status": int(kind), "retry_after": faults.get("retry_after")})
        return behaviour

    async def _token(self, request: web.Request) -> web.StreamResponse:
        """Google's OAuth token endpoint: recorded like every request, but not a model call (not in `calls`)."""
        raw = await request.read()
        with self._lock:
            self.stats.headers.append({k.lower(): v for k, v in request.headers.items()})
            self.stats.bodies.append({"form": raw.decode("utf-8", "replace")})
            self.stats.targets.append({"dialect": "oauth", "path": request.path, "query": request.query_string})
            behaviour = dict(self.token_behaviour)
        if behaviour.get("redirect_to"):
            moved = int(behaviour.get("redirect_status", 307))
            return web.Response(status=moved, headers={"Location": str(behaviour["redirect_to"])})
        answer, token = native.token_grant(raw, self.vertex_accounts)
        if token is not None:
            with self._lock:
                self.vertex_tokens.add(token)
        return answer

    async def _serve(self, request: web.Request, dialect: str) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            return web.json_response({"error": {"message": "bad json"}}, status=400)
        key = request_key(body)
        with self._lock:
            s = self.stats
            s.calls += 1
            s.in_flight += 1
            s.max_in_flight = max(s.max_in_flight, s.in_flight)
            s.attempts_by_key[key] += 1
            attempt = s.attempts_by_key[key]
            if len(s.headers) < self.record_limit:
                s.headers.append({k.lower(): v for k, v in request.headers.items()})
                s.bodies.append(body)
                s.started_at.append(time.monotonic())
                s.targets.append({"dialect": dialect, "path": request.path, "query": request.query_string})
        received_at = time.monotonic()
        status = 0  # stays 0 if the client goes away first (the handler is cancelled)
        billed = 0
        served = ""
        try:
            behaviour = self._choose(body, key, attempt)
            served = str(behaviour.get("served_model") or body.get("model") or "")
            if behaviour.get("hang"):
                # Hanging past the client's timeout: whatever is sent afterwards reaches nobody,
                # so it must not count as a delivered success.
                await asyncio.sleep(float(behaviour["hang"]))
                status = 504
                return web.json_response({"error": {"message": "hung"}}, status=504)
            if behaviour.get("latency"):
                await asyncio.sleep(float(behaviour["latency"]))
            refusal = native.auth_refusal(dialect, request, self.required_key, raw, self.aws_keys, self.vertex_tokens)
            if refusal is not None:
                status = refusal.status
                return refusal
            response = self._render(body, key, behaviour, dialect, request)
            payload = response.body if isinstance(response.body, bytes) else b""
            if response.status == 200 and payload.startswith(b"{"):
                billed = native.billed_tokens(json.loads(payload))
            if response.status == 200 and behaviour.get("drip"):
                dripped = await self._drip(
                    request, payload, float(behaviour["drip"]), int(behaviour.get("drip_pieces", 20))
                )
                status = 200
                return dripped
            status = response.status
            return response
        finally:
            with self._lock:
                self.stats.in_flight -= 1
                self.stats.statuses[status] += 1
                if len(self.stats.log) < self.record_limit:
                    self.stats.log.append({"at": received_at, "status": status, "tokens": billed, "model": served})
                if status == 200:
                    self.stats.successes_by_key[key] += 1

    @staticmethod
    async def _drip(request: web.Request, payload: bytes, interval: float, pieces: int) -> web.StreamResponse:
        stream = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        stream.content_length = len(payload)
        await stream.prepare(request)
        size = max(1, math.ceil(len(payload) / max(1, pieces)))
        for start in range(0, len(payload), size):
            await asyncio.sleep(interval)
            await stream.write(payload[start : start + size])
        await stream.write_eof()
        return stream

    def _render(
        self, body: dict[str, Any], key: str, behaviour: Behaviour, dialect: str = "openai", request: Any = None
    ) -> web.Response:
        if dialect not in ("openai", "azure"):
            return native.render(self, dialect, body, key, behaviour, request)
        if behaviour.get("redirect_to"):
            status = int(behaviour.get("redirect_status", 307))
            return web.Response(status=status, headers={"Location": str(behaviour["redirect_to"])})
        status = behaviour.get("status")
        if behaviour.get("error") == "context_length":
            return web.json_response(
                {
                    "error": {
                        "message": "This model's maximum context length is 8192 tokens. However, your messages "
                        "resulted in 9000 tokens. Please reduce the length of the messages.",
                        "type": "invalid_request_error",
                        "param": "messages",
                        "code": "context_length_exceeded",
                    }
                },
                status=400,
            )
        if status:
            headers = {}
            if behaviour.get("retry_after") is not None:
                headers["Retry-After"] = str(behaviour["retry_after"])
            headers.update(behaviour.get("headers") or {})
            return web.json_response(
                {"error": {"message": f"scripted error {status}", "type": "scripted", "code": str(status)}},
                status=int(status),
                headers=headers,
            )
        if behaviour.get("malformed"):
            return web.Response(status=200, text="<html>not json", content_type="text/html")
        content = self._content(body, key, behaviour)
        if behaviour.get("usage") == "counted":
            usage = _counted_usage(body, content)
        else:
            usage = dict(
                behaviour.get("usage")
                or {
                    "prompt_tokens": max(1, len(json.dumps(body.get("messages", []), ensure_ascii=False)) // 4),
                    "completion_tokens": max(1, len(content) // 4),
                }
            )
        usage.setdefault("total_tokens", usage["prompt_tokens"] + usage["completion_tokens"])
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "stop",
            "logprobs": None,
        }
        if body.get("logprobs") and behaviour.get("tokens"):
            choice["logprobs"] = {"content": self._scripted_logprobs(behaviour["tokens"], body)}
        elif body.get("logprobs") and behaviour.get("logprobs"):
            choice["logprobs"] = {"content": self._logprobs(content, behaviour["logprobs"], body)}
        payload = {
            "id": "chatcmpl-" + key[:24],
            "object": "chat.completion",
            "created": int(time.time()),
            "model": behaviour.get("served_model") or body.get("model", "fake"),
            "choices": [choice],
            "usage": usage,
        }
        return web.json_response(payload)

    def _content(self, body: dict[str, Any], key: str, behaviour: Behaviour) -> str:
        if behaviour.get("empty"):
            return ""
        if self.content_fn is not None and "content" not in behaviour and "score" not in behaviour:
            return self.content_fn(body)
        if "content" in behaviour:
            return str(behaviour["content"])
        if behaviour.get("tokens"):
            return b"".join(_scripted_token_bytes(t) for t in behaviour["tokens"]).decode("utf-8")
        scale = behaviour.get("score") or {"min": 1, "max": 5}
        lo, hi = int(scale["min"]), int(scale["max"])
        value = lo + int(key[8:16], 16) % (hi - lo + 1)
        return f"The answer addresses the question with some gaps.\nScore: {value}"

    @staticmethod
    def _logprobs(content: str, distribution: dict[str, float], body: dict[str, Any]) -> list[dict[str, Any]]:
        """Split the content into tokens; the last digit token carries the scripted distribution."""

        tokens = re.findall(r"\d|\s+|[^\d\s]+", content)
        top_n = int(body.get("top_logprobs") or 5)
        digit_positions = [i for i, t in enumerate(tokens) if t.isdigit()]
        score_at = digit_positions[-1] if digit_positions else -1
        out = []
        for i, tok in enumerate(tokens):
            if i == score_at:
                top = sorted(distribution.items(), key=lambda kv: -kv[1])[:top_n]
                out.append(
                    {
                        "token": tok,
                        "logprob": math.log(max(distribution.get(tok, 1e-9), 1e-9)),
                        "bytes": list(tok.encode()),
                        "top_logprobs": [
                            {"token": t, "logprob": math.log(max(p, 1e-9)), "bytes": list(t.encode())} for t, p in top
                        ],
                    }
                )
            else:
                out.append({"token": tok, "logprob": -0.01, "bytes": list(tok.encode()), "top_logprobs": []})
        return out

    @staticmethod
    def _scripted_logprobs(tokens: list[Any], body: dict[str, Any]) -> list[dict[str, Any]]:
        """The scripted tokens as OpenAI returns them: token text, logprob, bytes and the top alternatives.

        A token that is only part of a character is shown the way OpenAI shows it, as escaped bytes."""
        top_n = int(body.get("top_logprobs") or 5)
        out = []
        for scripted in tokens:
            raw = _scripted_token_bytes(scripted)
            alternatives = (scripted.get("top") if isinstance(scripted, dict) else scripted[1]) or {}
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                text = "".join(f"\\x{b:02x}" for b in raw)
            top = sorted(alternatives.items(), key=lambda kv: -kv[1])[:top_n]
            out.append(
                {
                    "token": text,
                    "logprob": math.log(max(alternatives.get(text, 1.0 if not alternatives else 1e-9), 1e-9)),
                    "bytes": list(raw),
                    "top_logprobs": [
                        {"token": t, "logprob": math.log(max(p, 1e-9)), "bytes": list(t.encode())} for t, p in top
                    ],
                }
            )
        return out

    # -- helpers for assertions ------------------------------------------------------------
    def successes_per_request(self) -> dict[str, int]:
        with self._lock:
            return dict(self.stats.successes_by_key)

    def attempts_per_request(self) -> dict[str, int]:
        with self._lock:
            return dict(self.stats.attempts_by_key)

    def recorded_headers(self) -> list[dict[str, str]]:
        with self._lock:
            return list(self.stats.headers)

    def model_requests(self) -> list[dict[str, str]]:
        """The headers of every request but the token endpoint's."""
        with self._lock:
            return [h for h, t in zip(self.stats.headers, self.stats.targets, strict=True) if t["dialect"] != "oauth"]

    def recorded_targets(self) -> list[dict[str, str]]:
        with self._lock:
            return list(self.stats.targets)

    def recorded_bodies(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.stats.bodies)

    def request_log(self) -> list[dict[str, Any]]:
        """Every request in order of arrival: {"at": time.monotonic() on arrival, "status", "tokens" billed}."""
        with self._lock:
            return sorted((dict(entry) for entry in self.stats.log), key=lambda entry: entry["at"])


def max_in_window(log: list[dict[str, Any]], window_s: float = 60.0, weight: str | None = None) -> float:
    """The most requests (or, with weight="tokens", billed tokens) that arrived within any `window_s` seconds."""
    times = [entry["at"] for entry in log]
    weights = [float(entry[weight]) if weight else 1.0 for entry in log]
    best, total, first = 0.0, 0.0, 0
    for last, at in enumerate(times):
        total += weights[last]
        while at - times[first] >= window_s:
            total -= weights[first]
            first += 1
        best = max(best, total)
    return best


def _counted_usage(body: dict[str, Any], content: str) -> dict[str, int]:
    import tiktoken  # only the tests that bill by tokens load the encoding

    encoding = tiktoken.get_encoding("o200k_base")
    messages = body.get("messages", [])
    prompt = sum(len(encoding.encode(str(m.get("content") or ""))) + 3 for m in messages) + 3
    return {"prompt_tokens": prompt, "completion_tokens": len(encoding.encode(content))}


def _scripted_token_bytes(scripted: Any) -> bytes:
    if isinstance(scripted, dict):
        return bytes(scripted["bytes"])
    return str(scripted[0]).encode("utf-8")


def _main() -> None:
    parser = argparse.ArgumentParser(description="Run the fake OpenAI-compatible provider.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--latency", type=float, default=0.0)
    args = parser.parse_args()
    provider = FakeProvider(args.host, args.port)
    provider.script(default={"latency": args.latency})
    app = provider.make_app()
    web.run_app(app, host=args.host, port=args.port, access_log=None, print=None, backlog=1024)


if __name__ == "__main__":
    _main()

import asyncio
import time

import pytest

from judging.llm.calls import CallSpec
from judging.llm.gateway import Gateway, classify, model_known, price_estimate
from judging.llm.keys import check_key_destination
from judging.llm.ratelimit import Limits, LocalLimiter
from tests.fakeprovider import FakeProvider

MESSAGES = [{"role": "user", "content": "Rate this answer."}]


def call(spec: CallSpec, limiter: LocalLimiter | None = None, should_stop=None):  # type: ignore[no-untyped-def]
    async def run():  # type: ignore[no-untyped-def]
        gateway = Gateway(limiter=limiter, should_stop=should_stop)
        try:
            return await gateway.call(spec)
        finally:
            await gateway.close()

    return asyncio.run(run())


def spec_for(fake: FakeProvider, **overrides) -> CallSpec:  # type: ignore[no-untyped-def]
    values = {"model": "openai/gpt-4o-mini", "messages": MESSAGES, "api_base": fake.base_url, "timeout_s": 2.0}
    values.update(overrides)
    return CallSpec(**values)


def test_success_returns_content_tokens_and_litellm_cost(fake_provider: FakeProvider) -> None:
    fake_provider.script(default={"content": "Score: 4", "usage": {"prompt_tokens": 1000, "completion_tokens": 100}})
    result = call(spec_for(fake_provider))
    assert result.ok and result.content == "Score: 4"
    assert (result.prompt_tokens, result.completion_tokens, result.attempts) == (1000, 100, 1)
    assert result.cost == pytest.approx(price_estimate("openai/gpt-4o-mini", 1000, 100))
    assert result.cost > 0


def test_unknown_model_cost_is_unknown_not_zero(fake_provider: FakeProvider) -> None:
    result = call(spec_for(fake_provider, model="openai/our-private-finetune"))
    assert result.ok
    assert result.cost is None
    assert not model_known("openai/our-private-finetune")
    assert price_estimate("openai/our-private-finetune", 10, 10) is None


def test_429_honours_retry_after(fake_provider: FakeProvider) -> None:
    fake_provider.script(rules=[{"match": "Rate", "behaviour": {"status": 429, "retry_after": 0.6}, "times": 1}])
    started = time.monotonic()
    result = call(spec_for(fake_provider))
    assert result.ok and result.attempts == 2
    assert result.errors_seen == ["rate_limit"]
    assert time.monotonic() - started >= 0.6


@pytest.mark.parametrize("status", [500, 502, 503])
def test_5xx_is_retried_until_success(fake_provider: FakeProvider, status: int) -> None:
    fake_provider.script(rules=[{"match": "Rate", "behaviour": {"status": status}, "times": 2}])
    result = call(spec_for(fake_provider))
    assert result.ok and result.attempts == 3
    assert fake_provider.snapshot()["calls"] == 3


def test_retries_stop_at_max_retries(fake_provider: FakeProvider) -> None:
    fake_provider.script(default={"status": 503})
    result = call(spec_for(fake_provider, max_retries=3))
    assert result.error_kind == "server" and result.attempts == 4
    assert fake_provider.snapshot()["calls"] == 4


def test_timeout_is_temporary(fake_provider: FakeProvider) -> None:
    fake_provider.script(rules=[{"match": "Rate", "behaviour": {"hang": 3}, "times": 1}])
    result = call(spec_for(fake_provider, timeout_s=0.5))
    assert result.ok and result.attempts == 2 and result.errors_seen == ["timeout"]


def test_malformed_body_is_retried(fake_provider: FakeProvider) -> None:
    fake_provider.script(rules=[{"match": "Rate", "behaviour": {"malformed": True}, "times": 1}])
    result = call(spec_for(fake_provider))
    assert result.ok and result.attempts == 2


@pytest.mark.parametrize(
    ("behaviour", "kind"),
    [
        ({"status": 400}, "bad_request"),
        ({"status": 401}, "auth"),
        ({"status": 404}, "not_found"),
        ({"error": "context_length"}, "context_length"),
    ],
)
def test_permanent_errors_fail_fast(fake_provider: FakeProvider, behaviour: dict, kind: str) -> None:
    fake_provider.script(default=behaviour)
    result = call(spec_for(fake_provider, max_retries=5))
    assert result.error_kind == kind and result.attempts == 1
    assert fake_provider.snapshot()["calls"] == 1


def test_redirects_are_not_followed(fake_provider: FakeProvider) -> None:
    fake_provider.script(rules=[{"match": "Rate", "behaviour": {"redirect_to": fake_provider.base_url + "/x"}}])
    result = call(spec_for(fake_provider))
    assert result.error_kind == "redirect" and result.attempts == 1
    assert fake_provider.snapshot()["calls"] == 1


def test_logprobs_are_returned(fake_provider: FakeProvider) -> None:
    fake_provider.script(default={"content": "Fine.\nScore: 4", "logprobs": {"4": 0.7, "3": 0.2, "5": 0.1}})
    result = call(spec_for(fake_provider, logprobs=True))
    last = result.logprobs[-1]
    assert last["token"] == "4"
    assert {t["token"] for t in last["top_logprobs"]} == {"3", "4", "5"}
    assert fake_provider.recorded_bodies()[-1]["logprobs"] is True


def test_metadata_address_is_refused_without_a_connection(fake_provider: FakeProvider) -> None:
    result = call(spec_for(fake_provider, api_base="http://169.254.169.254/v1"))
    assert result.error_kind == "refused_host" and result.attempts == 1
    assert fake_provider.snapshot()["calls"] == 0


def test_loopback_refused_unless_allowlisted(fake_provider: FakeProvider, settings) -> None:  # type: ignore[no-untyped-def]
    settings.JUDGE_API_BASE_ALLOWLIST = []
    result = call(spec_for(fake_provider))
    assert result.error_kind == "refused_host"
    assert fake_provider.snapshot()["calls"] == 0


def test_canary_key_never_reaches_a_foreign_host(fake_provider: FakeProvider, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-6c1f2d")
    monkeypatch.setenv("EVALSITE_FAKE_KEY", "sk-local-bound-key")
    assert call(spec_for(fake_provider)).ok  # no api_key_env: litellm must not fall back to OPENAI_API_KEY
    refused = call(spec_for(fake_provider, api_key_env="OPENAI_API_KEY"))
    assert refused.error_kind == "key_not_allowed"
    bound = call(spec_for(fake_provider, api_key_env="EVALSITE_FAKE_KEY"))
    assert bound.ok
    headers = fake_provider.recorded_headers()
    assert len(headers) == 2
    assert all("sk-canary-6c1f2d" not in str(h) for h in headers)
    assert headers[1]["authorization"] == "Bearer sk-local-bound-key"
    assert "sk-canary" not in refused.error


def test_key_destination_rules(settings) -> None:  # type: ignore[no-untyped-def]
    settings.JUDGE_API_KEY_HOSTS = {"VLLM_KEY": "gpu1.internal|http://gpu2.internal:8000"}
    check_key_destination("OPENAI_API_KEY", None)
    check_key_destination("OPENAI_API_KEY", "https://api.openai.com/v1")
    check_key_destination("VLLM_KEY", "http://gpu2.internal:8000/v1")
    check_key_destination("VLLM_KEY", "https://gpu1.internal/v1")
    for elsewhere in (
        "https://evil.example/v1",
        "http://api.openai.com/v1",
        "https://api.openai.com:8443/v1",
    ):
        with pytest.raises(ValueError):
            check_key_destination("OPENAI_API_KEY", elsewhere)
    for elsewhere in ("http://gpu1.internal/v1", "https://gpu2.internal:8000/v1", "http://gpu2.internal:8001/v1"):
        with pytest.raises(ValueError):
            check_key_destination("VLLM_KEY", elsewhere)


def test_error_messages_redact_the_key(fake_provider: FakeProvider, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("EVALSITE_FAKE_KEY", "sk-secret-in-error")
    fake_provider.script(default={"status": 400})
    fake_provider.script(default={"content": "x"}, rules=[{"match": "Rate", "behaviour": {"status": 401}}])
    result = call(spec_for(fake_provider, api_key_env="EVALSITE_FAKE_KEY"))
    assert result.error_kind == "auth"
    assert "sk-secret-in-error" not in result.error


def test_concurrency_limit_holds(fake_provider: FakeProvider) -> None:
    fake_provider.script(default={"latency": 0.1})
    limiter = LocalLimiter(Limits(max_concurrency=4))

    async def run():  # type: ignore[no-untyped-def]
        gateway = Gateway(limiter=limiter)
        specs = [spec_for(fake_provider, messages=[{"role": "user", "content": f"Rate {i}"}]) for i in range(20)]
        results = await asyncio.gather(*(gateway.call(s) for s in specs))
        await gateway.close()
        return results

    results = asyncio.run(run())
    assert all(r.ok for r in results)
    assert fake_provider.snapshot()["max_in_flight"] == 4


def test_stop_flag_prevents_calls(fake_provider: FakeProvider) -> None:
    result = call(spec_for(fake_provider), should_stop=lambda: True)
    assert result.stopped and not result.ok
    assert fake_provider.snapshot()["calls"] == 0


def test_classify_plain_errors() -> None:
    assert classify(TimeoutError()) == "timeout"
    assert classify(ValueError("bad json")) == "malformed"


class _StatusError(Exception):
    def __init__(self, status_code: int) -> None:
        super().__init__(f"HTTP {status_code}")
        self.status_code = status_code


def test_classify_a_bare_status_code_by_the_one_status_rule() -> None:
    # An error that carries only its status is read by the same rule as a status the gateway read itself.
    kinds = {status: classify(_StatusError(status)) for status in (302, 400, 401, 403, 404, 408, 429, 503)}
    assert kinds == {
        302: "redirect",
        400: "bad_request",
        401: "auth",
        403: "auth",
        404: "not_found",
        408: "timeout",
        429: "rate_limit",
        503: "server",
    }


def test_cache_key_depends_on_model_messages_params_and_sample() -> None:
    base = CallSpec(model="openai/m", messages=MESSAGES)
    assert base.cache_key() == CallSpec(model="openai/m", messages=list(MESSAGES)).cache_key()
    assert base.cache_key() != CallSpec(model="openai/n", messages=MESSAGES).cache_key()
    assert base.cache_key() != CallSpec(model="openai/m", messages=MESSAGES, temperature=0.5).cache_key()
    assert base.cache_key() != CallSpec(model="openai/m", messages=MESSAGES, variant=1).cache_key()
    # Retry settings are not part of what the provider sees.
    assert base.cache_key() == CallSpec(model="openai/m", messages=MESSAGES, max_retries=1, timeout_s=5).cache_key()


def test_a_host_that_does_not_resolve_is_a_retried_connection_error_not_a_refused_address(settings) -> None:  # type: ignore[no-untyped-def]
    # No DNS answer (a resolver outage, no route) says nothing about where the host points, so it is retried.
    settings.JUDGE_API_BASE_ALLOWLIST = []
    spec = CallSpec(
        model="openai/gpt-4o-mini",
        messages=MESSAGES,
        api_base="http://no-such-host.invalid/v1",
        timeout_s=2.0,
        max_retries=2,
    )
    result = call(spec)
    assert not result.ok
    assert result.error_kind == "connection"
    assert result.attempts == 3 and result.errors_seen[:2] == ["connection", "connection"]


def test_a_private_address_is_refused_once_and_never_retried(settings) -> None:  # type: ignore[no-untyped-def]
    settings.JUDGE_API_BASE_ALLOWLIST = []
    spec = CallSpec(model="openai/gpt-4o-mini", messages=MESSAGES, api_base="http://10.1.2.3:9/v1", timeout_s=2.0)
    result = call(spec)
    assert result.error_kind == "refused_host" and result.attempts == 1

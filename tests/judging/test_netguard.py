import httpx
import pytest

from judging.llm import egress
from judging.llm.netguard import ApiBaseRefused, validate_api_base


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data",
        "http://[fd00:ec2::254]/v1",
        "http://127.0.0.1:8000/v1",
        "http://localhost:8000/v1",
        "http://10.0.0.5/v1",
        "http://192.168.1.1/v1",
        "http://[::1]/v1",
        "http://[::ffff:127.0.0.1]/v1",
        "http://100.100.100.200/v1",
        "http://0.0.0.0/v1",
        "http://metadata.google.internal/computeMetadata/v1",
        "ftp://example.com/v1",
        "file:///etc/passwd",
        "http://user:pass@8.8.8.8/v1",
        "http://8.8.8.8/v1?next=1",
    ],
)
def test_private_and_odd_urls_are_refused(url: str, settings) -> None:  # type: ignore[no-untyped-def]
    settings.JUDGE_API_BASE_ALLOWLIST = []
    with pytest.raises(ApiBaseRefused):
        validate_api_base(url)


def test_public_literal_address_is_accepted(settings) -> None:  # type: ignore[no-untyped-def]
    settings.JUDGE_API_BASE_ALLOWLIST = []
    assert validate_api_base("https://8.8.8.8/v1/") == "https://8.8.8.8/v1"


def test_allowlist_by_address_network_and_host(settings) -> None:  # type: ignore[no-untyped-def]
    settings.JUDGE_API_BASE_ALLOWLIST = ["127.0.0.1"]
    assert validate_api_base("http://127.0.0.1:9/v1")
    with pytest.raises(ApiBaseRefused):
        validate_api_base("http://10.1.2.3/v1")
    settings.JUDGE_API_BASE_ALLOWLIST = ["10.0.0.0/8"]
    assert validate_api_base("http://10.1.2.3/v1")
    settings.JUDGE_API_BASE_ALLOWLIST = "localhost, 127.0.0.1"
    assert validate_api_base("http://localhost:8001/v1")


def test_unresolvable_host_is_refused(settings) -> None:  # type: ignore[no-untyped-def]
    settings.JUDGE_API_BASE_ALLOWLIST = []
    with pytest.raises(ApiBaseRefused):
        validate_api_base("http://no-such-host.invalid/v1")


def test_guarded_client_checks_at_connect_time_and_never_follows_redirects(settings) -> None:  # type: ignore[no-untyped-def]
    import asyncio

    settings.JUDGE_API_BASE_ALLOWLIST = []

    async def fetch() -> None:
        client = egress.guarded_async_client(timeout=1)
        assert client.follow_redirects is False
        try:
            await client.get("http://127.0.0.1:9/")
        finally:
            await client.aclose()

    with pytest.raises(ApiBaseRefused):
        asyncio.run(fetch())
    assert isinstance(egress.guarded_async_client(1), httpx.AsyncClient)


@pytest.mark.parametrize(
    "url",
    [
        "http://[2002:7f00:1::]/v1",  # 6to4 around 127.0.0.1
        "http://[2002:a00:1::1]/v1",  # 6to4 around 10.0.0.1
        "http://[2002:a9fe:a9fe::]/v1",  # 6to4 around the cloud metadata address
        "http://[64:ff9b::7f00:1]/v1",  # NAT64 around 127.0.0.1
        "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/v1",  # Teredo
        "http://[::ffff:127.0.0.1]/v1",  # IPv4-mapped
    ],
)
def test_ipv6_forms_of_internal_ipv4_addresses_are_refused(url: str, settings) -> None:  # type: ignore[no-untyped-def]
    settings.JUDGE_API_BASE_ALLOWLIST = []
    with pytest.raises(ApiBaseRefused):
        validate_api_base(url)


def test_a_6to4_address_around_a_public_ipv4_address_is_allowed(settings) -> None:  # type: ignore[no-untyped-def]
    settings.JUDGE_API_BASE_ALLOWLIST = []
    validate_api_base("http://[2002:808:808::1]/v1")

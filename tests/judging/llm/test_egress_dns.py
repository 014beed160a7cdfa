"""Provider egress played by an attacker: the address a connection is actually made to is the one checked, and
errors carry no internals."""

import asyncio
import ipaddress
import socket
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp.abc import AbstractResolver

from judging.llm import egress, gateway, netguard
from judging.llm.netguard import ApiBaseRefused
from judging.models import Judgment
from tests.fakeprovider import FakeProvider
from tests.judging.llm.provider_calls import MESSAGES, Launch, call, config_for, spec_for
from tests.security.recorder import RecordingServer

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

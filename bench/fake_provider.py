"""The fake OpenAI-compatible provider (tests/fakeprovider.py) as the judge benchmarks run it: in its own process on
a free port, scripted through its control endpoints, with the judge config that points a run at it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def judge_bench_environment() -> None:
    """What a judge benchmark's process and its workers need before Django starts: the settings module, litellm's
    bundled price map (no download) and the fake provider's host allowed as an api_base."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("JUDGE_API_BASE_ALLOWLIST", "127.0.0.1")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_http(url: str, timeout: float = 20.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=1.0)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise SystemExit(f"fake provider did not come up at {url}")


@contextmanager
def fake_provider(port: int, latency: float) -> Iterator[str]:
    """The provider running on `port` (0: a free one) with `latency`; yields its OpenAI base URL (…/v1)."""
    port = port or free_port()
    provider = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "fakeprovider.py"), "--port", str(port), "--latency", str(latency)],
        cwd=ROOT,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/_control/stats")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        provider.send_signal(signal.SIGTERM)
        provider.wait(timeout=10)


def control(base_url: str, path: str, payload: dict | None = None) -> dict:
    """A control endpoint of the provider at `base_url` (with or without its /v1): GET without a payload, else POST."""
    import httpx

    base = base_url.removesuffix("/v1")
    if payload is None:
        return httpx.get(f"{base}/_control/{path}", timeout=10).json()
    return httpx.post(f"{base}/_control/{path}", json=payload, timeout=10).json()


def bench_judge_config(name: str, method: str, base_url: str, concurrency: int, **extra: Any) -> dict[str, Any]:
    """A judge config that sends every call to the fake provider, `concurrency` at a time."""
    return {
        "name": name,
        "method": method,
        "model": "openai/gpt-4o-mini",
        "api_base": base_url,
        "max_concurrency": concurrency,
        "timeout_s": 30,
        "max_retries": 3,
        **extra,
    }

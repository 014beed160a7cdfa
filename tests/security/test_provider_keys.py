"""Provider URLs and keys, end to end through real judge runs.

Two recording endpoints listen on real sockets: "own" (127.0.0.1, the host the operator bound the canary key to)
and "foreign" (127.0.0.2, allowlisted as an address but not bound to the key). A canary key sits in the
environment; every test ends by checking that the foreign endpoint never saw it, and the last one checks that it
appears in no database row, page, API response, export, log line or Celery message."""

import asyncio
import json
import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from celery.signals import before_task_publish, task_prerun
from django.apps import apps
from django.contrib.auth.models import User
from django.core import serializers
from django.test import Client

from judging import services
from judging.config import ConfigError, validate_config
from judging.llm import gateway, netguard
from judging.models import JudgeRun, Judgment
from tests.judging.factories import make_dataset
from tests.security.recorder import RecordingServer
from tests.security.test_csrf import _admin_object_params
from tests.security.urlwalk import iter_endpoints

pytestmark = pytest.mark.django_db

CANARY = f"sk-canary-{uuid.uuid4().hex}"
OPENAI_CANARY = f"sk-openai-canary-{uuid.uuid4().hex}"


@pytest.fixture
def own() -> Iterator[RecordingServer]:
    server = RecordingServer("127.0.0.1").start()
    yield server
    server.stop()


@pytest.fixture
def foreign() -> Iterator[RecordingServer]:
    server = RecordingServer("127.0.0.2").start()
    yield server
    server.stop()


@pytest.fixture
def keyed(settings, monkeypatch, fresh_cache, own) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("CANARY_API_KEY", CANARY)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_CANARY)
    settings.JUDGE_API_BASE_ALLOWLIST = ["127.0.0.1", "127.0.0.2"]
    settings.JUDGE_API_KEY_HOSTS = {"CANARY_API_KEY": [own.base_url]}
    settings.JUDGE_RETRY_BASE_S = 0.01
    settings.JUDGE_RETRY_CAP_S = 0.05
    netguard._RESOLVE_CACHE.clear()


def _config(server: RecordingServer, **extra: Any) -> dict[str, Any]:
    values = {
        "name": f"canary-{uuid.uuid4().hex[:6]}",
        "method": "single",
        "model": "openai/gpt-4o-mini",
        "api_base": server.base_url,
        "api_key_env": "CANARY_API_KEY",
        "max_retries": 0,
        "timeout_s": 5,
        "cache": False,
    }
    values.update(extra)
    return values


def _launch(dataset, cfg, capture, **kwargs) -> JudgeRun:  # type: ignore[no-untyped-def]
    with capture(execute=True):
        run = services.judge_run_launch(dataset=dataset, config=cfg, launched_by=None, **kwargs)
    run.refresh_from_db()
    return run


def test_key_reaches_its_own_host(own, foreign, keyed, eager, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    run = _launch(make_dataset(items=2, systems=2), _config(own), django_capture_on_commit_callbacks)
    assert run.status == "succeeded", run.error_summary
    assert own.requests and all(r["headers"]["authorization"] == f"Bearer {CANARY}" for r in own.requests)
    assert not foreign.requests


def test_config_naming_a_foreign_host_is_refused_when_saved(own, foreign, keyed) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match="may not be sent"):
        validate_config(_config(foreign))
    with pytest.raises(ConfigError, match="may not be sent"):
        validate_config(_config(foreign, api_base=foreign.base_url.replace("127.0.0.2", "localhost")))
    assert not foreign.requests


def _canary_call(api_base: str) -> Any:
    """One call through the gateway, with the canary key, to `api_base`: what the gateway returns."""
    spec = gateway.CallSpec(
        model="openai/gpt-4o-mini",
        messages=[{"role": "user", "content": "hi"}],
        api_base=api_base,
        api_key_env="CANARY_API_KEY",
        max_retries=0,
        timeout_s=5,
    )

    async def call_once() -> Any:
        client = gateway.Gateway()
        try:
            return await client.call(spec)
        finally:
            await client.close()

    return asyncio.run(call_once())


def test_call_time_check_refuses_a_foreign_host_even_if_a_config_got_through(  # type: ignore[no-untyped-def]
    own, foreign, keyed
) -> None:
    result = _canary_call(foreign.base_url)
    assert result.error_kind == "key_not_allowed"
    assert CANARY not in result.error
    assert not foreign.requests


def test_a_key_is_bound_to_scheme_and_port_not_only_to_the_host(own, keyed, settings) -> None:  # type: ignore[no-untyped-def]
    # Another service on the key's own host (a different port) and the same port over another scheme are other
    # destinations: the key may not go there, neither when the config is saved nor at call time.
    neighbour = RecordingServer("127.0.0.1").start()
    try:
        with pytest.raises(ConfigError, match=f"may not be sent to http://127.0.0.1:{neighbour.port}"):
            validate_config(_config(neighbour))
        with pytest.raises(ConfigError, match=f"may not be sent to https://127.0.0.1:{own.port}"):
            validate_config(_config(own, api_base=own.base_url.replace("http://", "https://")))
        result = _canary_call(neighbour.base_url)
        assert result.error_kind == "key_not_allowed" and CANARY not in result.error
        assert not neighbour.requests
        # A binding by hostname alone means https on its default port, so it does not cover plain http either.
        settings.JUDGE_API_KEY_HOSTS = {"CANARY_API_KEY": ["127.0.0.1"]}
        with pytest.raises(ConfigError, match="may not be sent"):
            validate_config(_config(own))
    finally:
        neighbour.stop()
    assert validate_config(_config(own, api_key_env=None)).api_base == own.base_url.rstrip("/")


def test_redirect_from_the_own_host_is_not_followed(
    own, foreign, keyed, eager, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    own.mode = "redirect"
    own.redirect_to = foreign.base_url
    run = _launch(make_dataset(items=1, systems=1), _config(own), django_capture_on_commit_callbacks)
    assert own.requests
    assert not foreign.requests, "the redirect was followed and the key went to another host"
    judgment = Judgment.objects.get(run=run)
    assert judgment.status != "done" or judgment.score is None


def test_allowlist_is_checked_again_at_connection_time(  # type: ignore[no-untyped-def]
    own, foreign, keyed, settings, eager, django_capture_on_commit_callbacks
) -> None:
    # Launched (and validated) while 127.0.0.2 is allowlisted; the operator narrows the list before a worker runs.
    with django_capture_on_commit_callbacks(execute=False):
        run = services.judge_run_launch(
            dataset=make_dataset(items=1, systems=1), config=_config(foreign, api_key_env=None), launched_by=None
        )
    settings.JUDGE_API_BASE_ALLOWLIST = ["127.0.0.1"]
    netguard._RESOLVE_CACHE.clear()
    services.judge_run_start(run_id=run.pk)
    assert not foreign.requests
    assert Judgment.objects.get(run=run).error_kind == "refused_host"


@pytest.mark.parametrize(
    "api_base",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:169.254.169.254]/",
        "http://metadata.google.internal/",
        "http://10.0.0.1/v1",
        "http://192.168.1.1/v1",
        "http://172.16.0.1/v1",
        "http://100.64.0.1/v1",
        "http://[fe80::1]/v1",
        "http://[::1]:8000/v1",
        "http://0.0.0.0:8000/v1",
        "http://2130706433/v1",
        "http://0x7f000001/v1",
        "http://127.1/v1",
        "http://localhost:8000/v1",
        "http://user:pass@api.openai.com/v1",
        "file:///etc/passwd",
        "gopher://127.0.0.1:6379/_INFO",
    ],
)
def test_private_metadata_and_odd_api_bases_are_refused(api_base: str, settings) -> None:  # type: ignore[no-untyped-def]
    settings.JUDGE_API_BASE_ALLOWLIST = []
    netguard._RESOLVE_CACHE.clear()
    with pytest.raises(ConfigError):
        validate_config({"name": "x", "method": "single", "model": "openai/gpt-4o-mini", "api_base": api_base})


@pytest.mark.parametrize(
    ("model", "key_env"),
    [
        ("openai/gpt-4o-mini", "ANTHROPIC_API_KEY"),  # a key riding along to another provider
        ("openai/gpt-4o-mini", "SECRET_KEY"),  # an unrelated secret sent as a bearer token
        ("openai/gpt-4o-mini", "AWS_SECRET_ACCESS_KEY"),
        ("openai/gpt-4o-mini", "CANARY_API_KEY"),  # bound to 127.0.0.1, not to api.openai.com
    ],
)
def test_a_key_never_goes_to_another_providers_default_endpoint(model: str, key_env: str, keyed) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match="may not be sent"):
        validate_config({"name": "x", "method": "single", "model": model, "api_key_env": key_env})


def test_providers_with_a_default_endpoint_on_loopback_are_refused(keyed, settings) -> None:  # type: ignore[no-untyped-def]
    settings.JUDGE_API_BASE_ALLOWLIST = []
    for model in ("ollama/llama3", "ollama_chat/llama3", "langflow/flow"):
        with pytest.raises(ConfigError, match="not supported"):
            validate_config({"name": "x", "method": "single", "model": model})


def test_without_api_key_env_no_environment_key_is_sent(own, keyed, eager, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    _launch(make_dataset(items=1, systems=2), _config(own, api_key_env=None), django_capture_on_commit_callbacks)
    assert own.requests
    assert not own.saw(OPENAI_CANARY) and not own.saw(CANARY)


def test_canary_appears_in_no_row_page_api_export_log_or_celery_message(  # type: ignore[no-untyped-def]
    own, foreign, keyed, eager, django_capture_on_commit_callbacks, caplog, capsys
) -> None:
    messages: list[str] = []

    def on_publish(sender: Any = None, body: Any = None, headers: Any = None, **kwargs: Any) -> None:
        messages.append(repr((sender, body, headers)))

    def on_prerun(
        sender: Any = None, task_id: Any = None, task: Any = None, args: Any = None, kwargs: Any = None, **extra: Any
    ) -> None:
        messages.append(repr((getattr(task, "name", ""), args, kwargs)))

    before_task_publish.connect(on_publish, weak=False)
    task_prerun.connect(on_prerun, weak=False)
    caplog.set_level(logging.DEBUG)
    try:
        root = User.objects.create_superuser(username="root", password="x-" * 12, email="root@example.test")
        dataset = make_dataset(items=2, systems=2, owner=root)
        ok_run = _launch(dataset, _config(own), django_capture_on_commit_callbacks)
        own.mode = "echo_key_401"
        failed_run = _launch(dataset, _config(own), django_capture_on_commit_callbacks)
    finally:
        before_task_publish.disconnect(on_publish)
        task_prerun.disconnect(on_prerun)
    assert ok_run.status == "succeeded"
    assert own.saw(CANARY), "the provider echoed the key, so the redaction below is really exercised"
    assert Judgment.objects.filter(run=failed_run).exclude(error="").exists()
    assert messages, "no Celery task ran; the message check would prove nothing"

    leaks = []
    for model in apps.get_models():
        dumped = serializers.serialize("json", model._default_manager.all())
        if CANARY in dumped or OPENAI_CANARY in dumped:
            leaks.append(f"row of {model._meta.label}")
    for record in caplog.records:
        if CANARY in record.getMessage() or CANARY in str(record.args):
            leaks.append(f"log line: {record.name}")
    captured = capsys.readouterr()
    if CANARY in captured.out + captured.err:
        leaks.append("stdout/stderr")
    leaks.extend(f"celery message {m[:80]}" for m in messages if CANARY in m)

    client = Client()
    client.force_login(root)
    params = {
        "pk": str(dataset.pk),
        "dataset_id": str(dataset.pk),
        "run_id": str(failed_run.pk),
        "config_id": str(failed_run.config_id or 1),
    }
    pages = 0
    for endpoint in iter_endpoints(params):
        target = endpoint.path_with({**params, **_admin_object_params(endpoint)}) or endpoint.path
        for query in ({}, {"include_judges": "true"}, {"answers": "1"}):
            response = client.get(target, query)
            body = b"".join(response.streaming_content) if response.streaming else response.content
            pages += response.status_code == 200
            if CANARY.encode() in body or OPENAI_CANARY.encode() in body:
                leaks.append(f"GET {target} {query}")
    assert pages > 20
    assert leaks == []
    assert not foreign.requests
    assert json.dumps(failed_run.config_snapshot).count("CANARY_API_KEY") == 1  # the variable's name, not its value

"""The deployed gunicorn configuration (evalsite/gunicorn_config.py): its environment overrides, and the connection
share policy checked in a real gunicorn serving the project."""

import http.client
import importlib
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from evalsite.env import ImproperEnvironment
from tests.conftest import gunicorn_serving, until_served
from tests.fakeprovider import free_port

GUNICORN_ENV = ("WEB_WORKERS", "WEB_THREADS", "WEB_CONNECTIONS_PER_WORKER", "GUNICORN_BIND")


@pytest.fixture(autouse=True)
def config_read_again_afterwards(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The tests reload the module under their own environment; leave it as the real environment makes it."""
    yield
    monkeypatch.undo()
    import evalsite.gunicorn_config

    importlib.reload(evalsite.gunicorn_config)


def _config(monkeypatch: pytest.MonkeyPatch, **env: str) -> ModuleType:
    for name in GUNICORN_ENV:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    import evalsite.gunicorn_config

    return importlib.reload(evalsite.gunicorn_config)


def test_defaults_are_threaded_workers_with_a_connection_share(monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config(monkeypatch)
    assert config.worker_class == "gthread"
    assert config.wsgi_app == "evalsite.wsgi:application"
    assert config.workers == (os.cpu_count() or 2)
    assert config.threads == 4
    assert config.connections_per_worker == 16
    assert config.bind == ["0.0.0.0:8000"]


def test_environment_sizes_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config(monkeypatch, WEB_WORKERS="3", WEB_THREADS="6", GUNICORN_BIND="127.0.0.1:9000")
    assert (config.workers, config.threads, config.connections_per_worker) == (3, 6, 24)
    assert config.bind == ["127.0.0.1:9000"]
    assert _config(monkeypatch, WEB_CONNECTIONS_PER_WORKER="40").connections_per_worker == 40


@pytest.mark.parametrize(
    ("name", "value", "message"), [("WEB_THREADS", "four", "integer"), ("WEB_WORKERS", "0", "at least 1")]
)
def test_bad_sizes_stop_start_up_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, message: str
) -> None:
    with pytest.raises(ImproperEnvironment, match=f"{name} must be .*{message}"):
        _config(monkeypatch, **{name: value})


def test_a_worker_over_its_share_closes_the_connection_after_the_response(monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config(monkeypatch)
    for held, closes in [(1, False), (16, False), (17, True), (40, True)]:
        request = SimpleNamespace(must_close=False)
        config.pre_request(SimpleNamespace(nr_conns=held), request)
        assert request.must_close is closes, held
    request = SimpleNamespace(must_close=False)
    config.pre_request(SimpleNamespace(), request)  # worker classes without connection counts keep connections
    assert request.must_close is False


@pytest.fixture
def gunicorn_with_share_of_one(tmp_path: Path) -> Iterator[int]:
    port = free_port()
    with gunicorn_serving(
        tmp_path,
        port,
        WEB_CONNECTIONS_PER_WORKER="1",
        # An idle keep-alive connection outlives any pause a loaded machine puts between the test's requests.
        GUNICORN_CMD_ARGS="--keep-alive 60",
    ) as server:

        def probe() -> None:
            # Read to the end of the stream: a probe that hung up after its response could still be counted by the
            # worker when the test's first request arrives, which would then be over the share of one.
            _raw_response_until_server_closes(port, b"Connection: close\r\n")

        until_served(server, tmp_path, probe)
        yield port


def _response_connection_header(connection: http.client.HTTPConnection) -> str:
    connection.request("GET", "/no-such-page/")
    response = connection.getresponse()
    response.read()
    assert response.status == 404
    return (response.getheader("Connection") or "").lower()


def _raw_response_until_server_closes(port: int, headers: bytes = b"") -> bytes:
    """One request on its own socket, read until the server closes it: the worker closes a connection and forgets it
    in the same step, so end-of-file means the worker no longer counts it."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        raw.sendall(b"GET /no-such-page/ HTTP/1.1\r\nHost: 127.0.0.1\r\n" + headers + b"\r\n")
        received = b""
        while chunk := raw.recv(65536):
            received += chunk
        return received


def test_real_gunicorn_closes_connections_beyond_the_share(gunicorn_with_share_of_one: int) -> None:
    port = gunicorn_with_share_of_one
    first = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        assert _response_connection_header(first) != "close"  # the worker holds one connection: its share
        second = _raw_response_until_server_closes(port)  # a second one is over the share
        head = second.split(b"\r\n\r\n", 1)[0].lower()
        assert head.startswith(b"http/1.1 404"), head
        assert b"\r\nconnection: close" in head, head
        assert _response_connection_header(first) != "close"  # the first stays open and keeps being served
    finally:
        first.close()

"""The access logs never carry platform ids: a study link's query string (PROLIFIC_PID, workerId...) is left out of
the development server's log (rundemo's runserver) and of gunicorn's access log, each checked in the real server."""

import http.client
import logging
import threading
from pathlib import Path

import pytest
from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler
from django.core.wsgi import get_wsgi_application

from tests.conftest import gunicorn_serving, until_served
from tests.fakeprovider import free_port

CANARY = "5f0c0ffee0000000000canary"
STUDY_PATH = f"/join/some-link-token/?PROLIFIC_PID={CANARY}&STUDY_ID=st&SESSION_ID=se"
MTURK_PATH = f"/join/mturk/some-link-token/?workerId={CANARY}&assignmentId=A1&hitId=H1"


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.mark.django_db(transaction=True)
def test_runserver_access_log_has_no_platform_ids() -> None:
    port = free_port()
    server = ThreadedWSGIServer(("127.0.0.1", port), WSGIRequestHandler)
    server.set_app(get_wsgi_application())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    kept = _Kept()
    logger = logging.getLogger("django.server")
    logger.addHandler(kept)
    thread.start()
    try:
        for path in (STUDY_PATH, MTURK_PATH):
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
            connection.request("GET", path, headers={"Referer": f"https://app.prolific.com/?PROLIFIC_PID={CANARY}"})
            connection.getresponse().read()
            connection.close()
    finally:
        server.shutdown()
        server.server_close()
        logger.removeHandler(kept)
    assert len(kept.lines) == 2, kept.lines
    assert all("/join/" in line for line in kept.lines)  # the request is logged, its query string is not
    assert not any(CANARY in line or "PROLIFIC_PID" in line or "workerId" in line for line in kept.lines)


def test_gunicorn_access_log_has_no_platform_ids(tmp_path: Path) -> None:
    port = free_port()
    access = tmp_path / "access.log"
    with gunicorn_serving(tmp_path, port, "--access-logfile", str(access)) as server:
        sent = 0

        def send_the_rest() -> None:
            nonlocal sent
            for path in (STUDY_PATH, MTURK_PATH)[sent:]:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                connection.request("GET", path, headers={"Referer": f"https://x.example/?workerId={CANARY}"})
                connection.getresponse().read()
                connection.close()
                sent += 1

        until_served(server, tmp_path, send_the_rest)
    lines = access.read_text().splitlines()
    assert len(lines) >= 2 and all("/join/" in line for line in lines), lines
    assert not any(CANARY in line or "PROLIFIC_PID" in line or "workerId" in line for line in lines), lines

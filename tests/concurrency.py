"""Requests sent at the same moment from threads of their own, each on its own database connection."""

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from django.db import connections


def statuses_at_once(requests: list[Callable[[], Any]], *, timeout: float, in_flight: int | None = None) -> list[int]:
    """Sends each request (a call that returns a test client's response) from a thread of its own, all released
    together; with `in_flight`, at most that many are in flight at any moment. Returns the responses' status codes
    in the order they came back."""
    statuses: list[int] = []
    lock = threading.Lock()
    barrier = threading.Barrier(len(requests))
    limit: AbstractContextManager[object] = threading.BoundedSemaphore(in_flight) if in_flight else nullcontext()

    def send(request: Callable[[], Any]) -> None:
        barrier.wait()
        with limit:
            try:
                status = request().status_code
            finally:
                connections.close_all()
        with lock:
            statuses.append(status)

    threads = [threading.Thread(target=send, args=(request,)) for request in requests]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
    return statuses

"""The annotate benchmark's load generator: simulated annotators, each a thread with its own keep-alive connection,
spread over client processes so that the generator's own interpreter lock does not queue them."""

import json
import multiprocessing
import random
import statistics
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def warm_up(base: str, tokens: list[str]) -> None:
    """Waits until every worker has booted and each of its threads has opened its database connection, so start-up
    is not counted as latency: every annotator sends requests at once on its own connection, as in the run, until a
    whole round answers fast. The connections are closed before the run starts."""

    def round_trip(client: "KeepAliveClient") -> float:
        started = time.perf_counter()
        status = client.get("/api/annotate/campaigns/").status_code
        return time.perf_counter() - started if status == 200 else float("inf")

    clients = [KeepAliveClient(base, {"Authorization": f"Token {token}"}) for token in tokens]
    try:
        deadline = time.monotonic() + 120
        with ThreadPoolExecutor(max_workers=len(clients)) as pool:
            fast_rounds = 0
            while fast_rounds < 10 and time.monotonic() < deadline:
                slowest = max(pool.map(round_trip, clients))
                fast_rounds = fast_rounds + 1 if slowest < 0.5 else 0
    finally:
        for client in clients:
            client.connection.close()
    time.sleep(1)  # lets the workers notice the closed connections and free their slots


class Reply:
    def __init__(self, status_code: int, content: bytes, server_cpu_ms: float | None = None) -> None:
        self.status_code = status_code
        self.content = content
        self.server_cpu_ms = server_cpu_ms

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.content)


def _server_cpu_ms(server_timing: str | None) -> float | None:
    """The CPU the serving thread spent on the request, from the benchmark server's `Server-Timing: cpu;dur=…`."""
    if not server_timing or not server_timing.startswith("cpu;dur="):
        return None
    return float(server_timing.removeprefix("cpu;dur="))


class KeepAliveClient:
    """One keep-alive HTTP/1.1 connection on the standard library. The load generator shares the server's two
    cores, so its own CPU per request shows up in the latencies it measures: http.client costs a fraction of
    httpx's per request (the bench prints the clients' CPU per request)."""

    def __init__(self, base: str, headers: dict[str, str]) -> None:
        import http.client
        from urllib.parse import urlsplit

        parts = urlsplit(base)
        self._connect = lambda: http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
        self._errors = (http.client.HTTPException, ConnectionError)
        self.connection = self._connect()
        self.headers = {**headers, "Content-Type": "application/json"}

    def get(self, path: str) -> Reply:
        return self._send("GET", path, b"")

    def post(self, path: str, body: dict | None = None) -> Reply:
        return self._send("POST", path, json.dumps(body).encode() if body is not None else b"")

    def _send(self, method: str, path: str, payload: bytes) -> Reply:
        for attempt in (1, 2):
            try:
                self.connection.request(method, path, body=payload, headers=self.headers)
                response = self.connection.getresponse()
                return Reply(response.status, response.read(), _server_cpu_ms(response.getheader("Server-Timing")))
            except self._errors:
                # The server closed an idle keep-alive connection (long think times): reconnect once. Both
                # requests are safe to repeat: "next" resumes the open task and a submit carries its idempotency key.
                self.connection.close()
                self.connection = self._connect()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def __enter__(self) -> "KeepAliveClient":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.connection.close()


class Annotator(threading.Thread):
    def __init__(
        self, base: str, campaign_id: int, token: str, deadline: float, seed: int, think_ms: float, floor: bool
    ) -> None:
        """deadline is wall-clock time (time.time()), shared by every client process; `floor` sends the annotator to
        the floor view instead of the task loop."""
        super().__init__(daemon=True)
        self.floor = floor
        self.submit_cpu_ms: list[float] = []  # the serving thread's CPU of each submit (or floor request)
        self.think_s = think_ms / 1000
        self.base = base
        self.campaign_id = campaign_id
        self.token = token
        self.deadline = deadline
        self.rng = random.Random(seed)
        self.latencies: list[float] = []
        self.submit_latencies: list[float] = []  # the submits among them
        self.acknowledged: list[str] = []  # keys answered 201 (new submission)
        self.errors: list[str] = []
        self.replays = 0
        self.ran_out = False  # the campaign had no task left for this annotator before the deadline

    def _think(self) -> None:
        # Reading and rating time between requests (0 = back-to-back requests, the harshest case).
        if self.think_s > 0:
            time.sleep(self.think_s * self.rng.uniform(0.5, 1.5))

    def _post(self, client: "KeepAliveClient", url: str, body: dict | None = None, *, submit: bool = True) -> "Reply":
        started = time.perf_counter()
        response = client.post(url, body)
        self.latencies.append((time.perf_counter() - started) * 1000)
        if body is not None and submit:
            self.submit_latencies.append(self.latencies[-1])
            if response.server_cpu_ms is not None:
                self.submit_cpu_ms.append(response.server_cpu_ms)
        return response

    def run(self) -> None:
        try:
            self._floor_loop() if self.floor else self._loop()
        except Exception as exc:  # a timed-out or refused connection ends this annotator: count it, do not hide it
            self.errors.append(f"{type(exc).__name__}: {exc}")

    def _floor_loop(self) -> None:
        """The floor phase: one request per task, which claims a slot and stores a row (bench/floor_view.py)."""
        url = f"/bench-floor/campaigns/{self.campaign_id}/submit/"
        with KeepAliveClient(self.base, {"Authorization": f"Token {self.token}"}) as client:
            while time.time() < self.deadline:
                response = self._post(client, url, {"idempotency_key": uuid.uuid4().hex})
                if response.status_code == 204:
                    self.ran_out = True
                    return
                if response.status_code == 201:
                    self.acknowledged.append("floor")
                else:
                    self.errors.append(f"floor {response.status_code}: {response.text[:200]}")
                    return
                self._think()

    def _loop(self) -> None:
        with KeepAliveClient(self.base, {"Authorization": f"Token {self.token}"}) as client:
            while time.time() < self.deadline:
                response = self._post(client, f"/api/annotate/campaigns/{self.campaign_id}/next/")
                if response.status_code == 204:
                    self.ran_out = True
                    return
                if response.status_code != 200:
                    self.errors.append(f"next {response.status_code}: {response.text[:200]}")
                    return
                task = response.json()
                self._think()
                # Half the form, as the task page saves it while the annotator works: one draft per task.
                first = task["candidates"][0]["number"]
                draft = {
                    f"r-{first}-{index}": f"{self.rng.choice([o['value'] for o in aspect['options']]):g}"
                    for index, aspect in enumerate(task["aspects"], start=1)
                    if aspect["options"]
                } | {"rationale": "simulated reason, half written"}
                draft_url = f"/api/annotate/campaigns/{self.campaign_id}/tasks/{task['task']}/draft/"
                response = self._post(client, draft_url, draft, submit=False)
                if response.status_code != 204:
                    self.errors.append(f"draft {response.status_code}: {response.text[:200]}")
                ratings = {
                    str(c["number"]): {
                        a["name"]: self.rng.choice([o["value"] for o in a["options"]]) for a in task["aspects"]
                    }
                    for c in task["candidates"]
                }
                key = uuid.uuid4().hex
                body: dict[str, Any] = {
                    "idempotency_key": key,
                    "ratings": ratings,
                    "preference": self.rng.randint(1, len(task["candidates"])),
                    "none_appropriate": self.rng.random() < 0.1,
                    "rationale": "simulated reason",
                }
                url = f"/api/annotate/campaigns/{self.campaign_id}/tasks/{task['task']}/submit/"
                response = self._post(client, url, body)
                if response.status_code == 201:
                    self.acknowledged.append(key)
                else:
                    self.errors.append(f"submit {response.status_code}: {response.text[:200]}")
                self._think()
                if self.rng.random() < 0.03:  # a double click
                    again = self._post(client, url, body)
                    if again.status_code == 201:
                        self.acknowledged.append(key)
                    elif again.status_code == 200:
                        self.replays += 1
                    else:
                        self.errors.append(f"resubmit {again.status_code}")


def _client_process(
    base: str,
    campaign_id: int,
    tokens: list[tuple[int, str]],
    start: float,
    seconds: float,
    think_ms: float,
    floor: bool,
    results: "multiprocessing.Queue[dict[str, Any]]",
) -> None:
    """Runs some of the annotators as threads of this process and sends back what they measured."""
    clients = [Annotator(base, campaign_id, token, start + seconds, seed, think_ms, floor) for seed, token in tokens]
    time.sleep(max(0.0, start - time.time()))
    cpu_before = time.process_time()
    for client in clients:
        client.start()
    for client in clients:
        client.join(seconds + 60)
    results.put(
        {
            "latencies": [ms for client in clients for ms in client.latencies],
            "submit_latencies": [ms for client in clients for ms in client.submit_latencies],
            "submit_cpu_ms": [ms for client in clients for ms in client.submit_cpu_ms],
            "acknowledged": [key for client in clients for key in client.acknowledged],
            "errors": [error for client in clients for error in client.errors],
            "replays": sum(client.replays for client in clients),
            "cpu_s": time.process_time() - cpu_before,
            "ran_out": sum(client.ran_out for client in clients),
            "client_means": [statistics.fmean(client.latencies) for client in clients if client.latencies],
        }
    )


def run_clients(
    base: str, campaign_id: int, tokens: list[str], seconds: float, think_ms: float, processes: int, floor: bool
) -> tuple[list[dict[str, Any]], float]:
    # spawn, not fork: the children must not inherit this process's Django state and database connections.
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    seeded = list(enumerate(tokens))
    start = time.time() + 3  # time for the children to start before the common start
    children = [
        context.Process(
            target=_client_process,
            args=(base, campaign_id, seeded[i::processes], start, seconds, think_ms, floor, queue),
        )
        for i in range(max(1, processes))
    ]
    for child in children:
        child.start()
    results = [queue.get(timeout=seconds + 180) for _ in children]
    for child in children:
        child.join(30)
    return results, time.time() - start

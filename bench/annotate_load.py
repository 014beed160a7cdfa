"""Load test of the annotation hand-out: simulated annotators loop "next task -> draft -> submit" over real HTTP.

    .venv/bin/python bench/annotate_load.py [--annotators 30] [--seconds 60] [--tasks 100000]

It runs two phases against the same gunicorn with the same clients: the task loop below, then a floor, where each
annotator sends back-to-back requests to a minimal view (bench/floor_view.py: one statement claims a free slot with a
conditional UPDATE and stores one row). It prints the submit's server CPU and p95 against the floor's, as ratios
(targets: <= 2x each); the CPU is what the serving thread spent on each request, read from the Server-Timing header
that the benchmark's gunicorn adds (EVALSITE_BENCH_FLOOR, set only here). `--tasks 100000` grows the campaign in SQL
to that many tasks x N slots before the run, for the large-campaign figure (its p95 against the small one's).

Each annotator saves one draft per task (half the form, as the task page does while they work) before submitting. It
creates its own Postgres database (evalsite_bench_annotate or $BENCH_ANNOTATE_DB, dropped first), migrates it,
imports a generated dataset and opens a campaign with N raters per task, refreshes the planner statistics (ANALYZE,
as autovacuum would on a live database), starts gunicorn on it with the deployed configuration
(evalsite/gunicorn_config.py), waits until every gunicorn thread has answered, and runs one thread per annotator,
each with its own keep-alive HTTP connection and API token. The annotator threads run in --client-processes separate
processes (default 2), so the load generator's own interpreter lock does not queue the clients and inflate the
latencies it measures; each latency is taken around one request in the thread that sent it. A few submits are sent
twice on purpose (same idempotency key) to exercise the double-submit path. Afterwards it checks the database:

- lost: submits the server acknowledged (201) whose Submission row or ratings are missing;
- duplicated: ratings beyond one per (answer, aspect, annotator) and submissions acknowledged as new twice;
- over_assigned: tasks holding more than N distinct annotators (submitted or leased), or one annotator twice.

The line before it reports throughput; the CPU seconds per request of the server (gunicorn), the database server
(every Postgres process, background ones included) and the load generator; and the load average, because on a
shared machine latency alone cannot be compared between runs. It ends with the spread of the annotators' mean
latencies, which shows whether the gunicorn workers share the connections evenly.
The last line printed is JSON: {"p50_ms", "p95_ms", "submitted", "lost", "duplicated", "over_assigned"}, with the
latencies over every next/draft/submit request.
"""

import argparse
import io
import json
import multiprocessing
import os
import random
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH_DB = os.environ.get("BENCH_ANNOTATE_DB", "evalsite_bench_annotate")
sys.path.insert(0, str(ROOT))

from bench.database import recreate_database  # noqa: E402


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _generated_jsonl(items: int, systems: int) -> bytes:
    rng = random.Random(0)
    words = [
        "voice",
        "bone",
        "air",
        "skull",
        "sound",
        "frequency",
        "recording",
        "ear",
        "speaker",
        "listener",
        "pitch",
        "resonance",
    ]
    lines = []
    for i in range(items):
        responses = {
            f"llm_{chr(97 + s)}": {"response": " ".join(rng.choice(words) for _ in range(rng.randint(40, 160)))}
            for s in range(systems)
        }
        lines.append(json.dumps({"id": f"q{i}", "turns": [{"prompt": f"Question {i}?", "responses": responses}]}))
    return ("\n".join(lines) + "\n").encode()


def _setup(
    database_url: str, *, items: int, systems: int, annotators: int, raters: int, tasks: int | None
) -> tuple[int, list[str]]:
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    import logging

    logging.getLogger("httpx").setLevel(logging.WARNING)
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from rest_framework.authtoken.models import Token

    from annotations.campaigns.setup import campaign_create
    from annotations.datasets.importing import dataset_import

    call_command("migrate", verbosity=0)
    dataset = dataset_import(
        stream=io.BytesIO(_generated_jsonl(items, systems)), name="bench", preset="lfqa-multiaspect"
    ).dataset
    users = [User.objects.create_user(f"bench{i}") for i in range(annotators)]
    campaign = campaign_create(
        name="bench", dataset=dataset, raters_per_item=raters, annotators=users, lease_minutes=30
    )
    tokens = [Token.objects.create(user=user).key for user in users]
    from django.db import connection, connections

    if tasks and tasks > items:
        _grow_campaign(campaign.pk, dataset.pk, items=items, tasks=tasks, raters=raters)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    connections.close_all()
    return campaign.pk, tokens


# A large campaign is grown in SQL from the imported one: item g is a copy of item g mod `items` (its turn and answers
# too), and its task comes after the imported ones in hand-out order, with the N free slots campaign_create would
# give it. Four INSERT … SELECT statements instead of an import of the whole dataset.
_GROW_CAMPAIGN_SQL = (
    """INSERT INTO annotations_item (external_id, position, source, dataset_id)
    SELECT 'q' || g, g, model.source, model.dataset_id
    FROM generate_series(%(items)s, %(tasks)s - 1) g
    JOIN annotations_item model ON model.dataset_id = %(dataset)s AND model.position = g %% %(items)s""",
    """INSERT INTO annotations_turn (index, prompt, reference, context, source, item_id)
    SELECT model_turn.index, 'Question ' || item.position || '?', model_turn.reference, model_turn.context,
           model_turn.source, item.id
    FROM annotations_item item
    JOIN annotations_item model ON model.dataset_id = item.dataset_id AND model.position = item.position %% %(items)s
    JOIN annotations_turn model_turn ON model_turn.item_id = model.id
    WHERE item.dataset_id = %(dataset)s AND item.position >= %(items)s""",
    """INSERT INTO annotations_response (position, text, source, eval_aspects, has_human_evals, system_id, turn_id)
    SELECT answer.position, answer.text, answer.source, answer.eval_aspects, answer.has_human_evals, answer.system_id,
           turn.id
    FROM annotations_item item
    JOIN annotations_turn turn ON turn.item_id = item.id
    JOIN annotations_item model ON model.dataset_id = item.dataset_id AND model.position = item.position %% %(items)s
    JOIN annotations_turn model_turn ON model_turn.item_id = model.id AND model_turn.index = turn.index
    JOIN annotations_response answer ON answer.turn_id = model_turn.id
    WHERE item.dataset_id = %(dataset)s AND item.position >= %(items)s""",
    """INSERT INTO annotations_task (chunk, position, campaign_id, turn_id, is_gold)
    SELECT 0, item.position, %(campaign)s, turn.id, FALSE
    FROM annotations_item item JOIN annotations_turn turn ON turn.item_id = item.id
    WHERE item.dataset_id = %(dataset)s AND item.position >= %(items)s""",
    """INSERT INTO annotations_task_responses (task_id, response_id)
    SELECT task.id, answer.id
    FROM annotations_task task JOIN annotations_response answer ON answer.turn_id = task.turn_id
    WHERE task.campaign_id = %(campaign)s AND task.position >= %(items)s""",
    """INSERT INTO annotations_assignment (task_position, slot, slot_limit, status, campaign_id, task_id, is_gold)
    SELECT task.position, slot, %(raters)s, 'free', task.campaign_id, task.id, FALSE
    FROM annotations_task task CROSS JOIN generate_series(1, %(raters)s) slot
    WHERE task.campaign_id = %(campaign)s AND task.position >= %(items)s""",
)


def _grow_campaign(campaign_id: int, dataset_id: int, *, items: int, tasks: int, raters: int) -> None:
    from django.db import connection, transaction

    started = time.monotonic()
    params = {"campaign": campaign_id, "dataset": dataset_id, "items": items, "tasks": tasks, "raters": raters}
    with transaction.atomic(), connection.cursor() as cursor:
        for statement in _GROW_CAMPAIGN_SQL:
            cursor.execute(statement, params)
    print(f"grew the campaign to {tasks} tasks x {raters} slots in {time.monotonic() - started:.1f}s", flush=True)


def _warm_up(base: str, tokens: list[str]) -> None:
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


def _start_gunicorn(database_url: str, port: int, workers: int, threads: int) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env.update(
        {
            "DATABASE_URL": database_url,
            "DJANGO_SETTINGS_MODULE": "evalsite.settings",
            "DEBUG": "false",
            "GUNICORN_BIND": f"127.0.0.1:{port}",
            "WEB_WORKERS": str(workers),
            "WEB_THREADS": str(threads),
            # Mounts the floor view and the per-request CPU header (bench/floor_view.py); never set in production.
            "EVALSITE_BENCH_FLOOR": "true",
        }
    )
    env.pop("CELERY_BROKER_URL", None)
    # The deployed configuration (docker-compose uses the same module), sized as main() resolved it.
    process = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("gunicorn")),
            "--config",
            "python:evalsite.gunicorn_config",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return process
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit("gunicorn did not start")


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


def _check_database(acknowledged: list[str], raters: int) -> dict[str, int]:
    from django.db.models import Count, F, Q, Sum

    from annotations.models import Assignment, AssignmentStatus, Campaign, Rating, RatingOrigin, Submission, Task

    keys = set(Submission.objects.values_list("idempotency_key", flat=True))
    submitted = len(keys)
    lost = sum(1 for key in set(acknowledged) if key not in keys)
    aspects = Campaign.objects.get(name="bench").aspects.count()
    candidates = (
        Task.objects.filter(assignments__submission__isnull=False)
        .annotate(n=Count("responses", distinct=True), done=Count("assignments__submission", distinct=True))
        .aggregate(total=Sum(F("n") * F("done")))["total"]
        or 0
    )
    expected_ratings = candidates * aspects
    app_ratings = Rating.objects.filter(origin=RatingOrigin.APP).count()
    lost += max(0, expected_ratings - app_ratings)
    duplicated = max(0, app_ratings - expected_ratings) + (len(acknowledged) - len(set(acknowledged)))
    duplicated += Rating.objects.values("response", "aspect", "rater").annotate(n=Count("pk")).filter(n__gt=1).count()
    held = Q(assignments__status__in=[AssignmentStatus.SUBMITTED, AssignmentStatus.LEASED])
    over_assigned = (
        Task.objects.annotate(
            people=Count("assignments__annotator", filter=held, distinct=True),
            slots=Count("assignments", filter=held),
        )
        .filter(Q(people__gt=raters) | Q(slots__gt=raters) | ~Q(slots=F("people")))
        .count()
    )
    over_assigned += (
        Assignment.objects.filter(annotator__isnull=False)
        .values("task", "annotator")
        .annotate(n=Count("pk"))
        .filter(n__gt=1)
        .count()
    )
    return {"submitted": submitted, "lost": lost, "duplicated": duplicated, "over_assigned": over_assigned}


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


def _run_clients(
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


def _process_tree_cpu(pid: int) -> float:
    """User+system CPU seconds of a process and its descendants, from /proc: the live ones' own time plus what the
    kernel credited to each of them for children that have exited (reaped database backends, for one)."""
    total = 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            with open(f"/proc/{current}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            total += sum(int(value) for value in fields[11:15]) / ticks  # utime, stime, cutime, cstime
            with open(f"/proc/{current}/task/{current}/children") as children:
                pending.extend(int(child) for child in children.read().split())
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def _database_server_pid(postgres_url: str) -> int:
    """The postmaster's process id (same host only): the parent of this connection's backend."""
    import psycopg

    # The backend exits with its connection, so its stat file is read while the connection is still open.
    with psycopg.connect(f"{postgres_url}/postgres", autocommit=True) as conn:
        (backend,) = conn.execute("SELECT pg_backend_pid()").fetchall()[0]
        with open(f"/proc/{backend}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def _spread(values: list[float]) -> str:
    """min / median / max: a wide spread means the connections are unevenly shared between the gunicorn workers."""
    if not values:
        return "none"
    return f"min {min(values):.0f} / median {statistics.median(values):.0f} / max {max(values):.0f} ms"


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--annotators", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument(
        "--items", type=int, default=6000, help="prompts in the generated dataset (enough tasks for 60 s at full speed)"
    )
    parser.add_argument(
        "--tasks",
        type=int,
        help="grow the campaign to this many tasks in SQL after importing --items (100000 for the large campaign)",
    )
    parser.add_argument("--systems", type=int, default=4, help="answers per prompt = candidates per task")
    parser.add_argument("--raters", type=int, default=3, help="raters per task N")
    parser.add_argument("--workers", type=int, help="gunicorn workers (default: WEB_WORKERS or the deployed default)")
    parser.add_argument(
        "--threads", type=int, help="threads per gunicorn worker (default: WEB_THREADS or the deployed default)"
    )
    parser.add_argument(
        "--client-processes", type=int, default=2, help="processes the annotator threads are spread over"
    )
    parser.add_argument(
        "--think-ms", type=float, default=0, help="mean pause after each response (reading/rating); 0 = back to back"
    )
    parser.add_argument(
        "--postgres",
        default=os.environ.get("BENCH_POSTGRES", "postgres://postgres@127.0.0.1:5432"),
        help="server URL without a database name",
    )
    return parser.parse_args()


def _phase(
    args: argparse.Namespace, base: str, campaign_id: int, tokens: list[str], server_pid: int, *, floor: bool
) -> dict[str, Any]:
    """One timed phase of the same clients against the same gunicorn: the task loop, or the floor view."""
    load_before = os.getloadavg()
    server_cpu_before = _process_tree_cpu(server_pid)
    database_pid = _database_server_pid(args.postgres)
    database_cpu_before = _process_tree_cpu(database_pid)
    results, elapsed = _run_clients(
        base, campaign_id, tokens, args.seconds, args.think_ms, args.client_processes, floor
    )
    latencies = [ms for result in results for ms in result["latencies"]]
    submit_cpu = [ms for result in results for ms in result["submit_cpu_ms"]]
    return {
        "results": results,
        "elapsed": elapsed,
        "latencies": latencies,
        "submit_latencies": [ms for result in results for ms in result["submit_latencies"]],
        "submit_cpu_ms": statistics.fmean(submit_cpu) if submit_cpu else 0.0,
        "server_cpu_ms": (_process_tree_cpu(server_pid) - server_cpu_before) / max(len(latencies), 1) * 1000,
        "database_cpu_ms": (_process_tree_cpu(database_pid) - database_cpu_before) / max(len(latencies), 1) * 1000,
        "client_cpu_ms": sum(result["cpu_s"] for result in results) / max(len(latencies), 1) * 1000,
        "load": (load_before[0], os.getloadavg()[0]),
        "errors": [error for result in results for error in result["errors"]],
        "ran_out": sum(result["ran_out"] for result in results),
    }


def _ratio(ours: float, floor: float) -> float:
    return ours / floor if floor else float("inf")


def main() -> None:
    args = _arguments()
    from evalsite import gunicorn_config  # the deployed sizes, read from this environment as gunicorn would

    workers = args.workers or gunicorn_config.workers
    threads = args.threads or gunicorn_config.threads

    database_url = recreate_database(args.postgres, BENCH_DB)
    campaign_id, tokens = _setup(
        database_url,
        items=args.items,
        systems=args.systems,
        annotators=args.annotators,
        raters=args.raters,
        tasks=args.tasks,
    )
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    server = _start_gunicorn(database_url, port, workers, threads)
    try:
        _warm_up(base, tokens)
        loop = _phase(args, base, campaign_id, tokens, server.pid, floor=False)
        # Checked before the floor phase, whose rows are answers without ratings by design.
        acknowledged = [key for result in loop["results"] for key in result["acknowledged"]]
        checks = _check_database(acknowledged, args.raters)
        floor = _phase(args, base, campaign_id, tokens, server.pid, floor=True)
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
    latencies, submit_latencies = loop["latencies"], loop["submit_latencies"]
    results = loop["results"]
    client_means = [ms for result in results for ms in result["client_means"]]
    tasks = args.tasks or args.items
    print(
        f"{len(latencies)} requests in {loop['elapsed']:.1f}s ({len(latencies) / max(loop['elapsed'], 1e-9):.0f}/s) "
        f"from {args.annotators} annotators in {args.client_processes} client processes (think {args.think_ms:.0f} "
        f"ms) on a campaign of {tasks} tasks x {args.raters} slots; gunicorn {workers}x{threads}; "
        f"mean {statistics.fmean(latencies) if latencies else 0:.1f} ms; "
        f"submits p50 {_percentile(submit_latencies, 0.5):.1f} / p95 {_percentile(submit_latencies, 0.95):.1f} ms; "
        f"CPU per request: server {loop['server_cpu_ms']:.2f} ms (per submit, its thread: "
        f"{loop['submit_cpu_ms']:.2f} ms), database server {loop['database_cpu_ms']:.2f} ms, "
        f"clients {loop['client_cpu_ms']:.2f} ms; load average {loop['load'][0]:.2f} -> {loop['load'][1]:.2f} on "
        f"{os.cpu_count()} CPUs; acknowledged {len(acknowledged)}, replayed {sum(r['replays'] for r in results)}, "
        f"errors {len(loop['errors'])}; each annotator's mean latency: {_spread(client_means)}"
    )
    floor_latencies = floor["latencies"]
    print(
        f"floor (one statement: claim a slot, store a row): {len(floor_latencies)} requests in "
        f"{floor['elapsed']:.1f}s ({len(floor_latencies) / max(floor['elapsed'], 1e-9):.0f}/s); "
        f"p50 {_percentile(floor_latencies, 0.5):.1f} / p95 {_percentile(floor_latencies, 0.95):.1f} ms; "
        f"CPU per request: server {floor['server_cpu_ms']:.2f} ms (its thread: {floor['submit_cpu_ms']:.2f} ms), "
        f"database server {floor['database_cpu_ms']:.2f} ms; load average {floor['load'][0]:.2f} -> "
        f"{floor['load'][1]:.2f}; errors {len(floor['errors'])}"
    )
    cpu_ratio = _ratio(loop["submit_cpu_ms"], floor["submit_cpu_ms"])
    p95_ratio = _ratio(_percentile(submit_latencies, 0.95), _percentile(floor_latencies, 0.95))
    print(
        f"submit against the floor: server CPU per request {cpu_ratio:.2f}x "
        f"({loop['submit_cpu_ms']:.2f} vs {floor['submit_cpu_ms']:.2f} ms; target <= 2x), "
        f"p95 {p95_ratio:.2f}x ({_percentile(submit_latencies, 0.95):.1f} vs "
        f"{_percentile(floor_latencies, 0.95):.1f} ms; target <= 2x)"
    )
    for phase, name in ((loop, "task loop"), (floor, "floor")):
        if phase["ran_out"]:
            print(f"warning: in the {name}, {phase['ran_out']} annotators ran out of tasks; raise --items or --tasks")
    for error in (loop["errors"] + floor["errors"])[:10]:
        print("error:", error)
    result = {
        "p50_ms": round(_percentile(latencies, 0.50), 1),
        "p95_ms": round(_percentile(latencies, 0.95), 1),
        "submit_p95_ms": round(_percentile(submit_latencies, 0.95), 1),
        "floor_p95_ms": round(_percentile(floor_latencies, 0.95), 1),
        "submit_cpu_ratio": round(cpu_ratio, 2),
        "submit_p95_ratio": round(p95_ratio, 2),
        "tasks": tasks,
        **checks,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()

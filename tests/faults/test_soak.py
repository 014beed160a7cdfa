"""Soak test: annotators keep rating through a Redis outage and a Postgres restart, and nothing they were told is
saved goes missing or is stored twice.

The test starts a Postgres cluster and a redis-server of its own (the machine's shared ones are never touched),
migrates the cluster, opens a campaign there and serves it with gunicorn in the deployed configuration
(evalsite/gunicorn_config.py). Twenty simulated annotators then work as a browser does for 80 seconds: sign in,
press "Next task", load the task page, read its scales, post the form. They answer a 503 as a person with a
browser would, waiting the Retry-After the server sent and sending the same form again (same idempotency key).
Fifteen seconds in, Redis is stopped for ten seconds; forty seconds in, Postgres is restarted.

Everyone signs in before the clock starts. Afterwards every submit the server acknowledged (its 303) must be
stored with all its ratings, none twice, and no request may have been answered with a 500; the server's log must
show sessions read from the database while Redis was away. How many 503s the faults caused depends on the
machine's speed, so it is printed, not asserted.
"""

import collections
import json
import logging
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from judging.management.worker import process_stop
from tests.conftest import CAST_PASSWORD, PROJECT_ROOT, wait_for
from tests.fakeprovider import free_port
from tests.judging.private_redis import PrivateRedis
from tests.judging.test_outages_postgres import PrivatePostgres

logging.getLogger("httpx").setLevel(logging.WARNING)

ANNOTATORS = 20
SECONDS = 80.0
REDIS_STOP_AT, REDIS_DOWN_FOR = 15.0, 10.0
POSTGRES_RESTART_AT = 40.0
# A browser's user gives up on a page after a while; this is far beyond any outage here.
GIVE_UP_AFTER_S = 90.0
ARTIFACTS = PROJECT_ROOT / "tests" / "artifacts"

SETUP = """
import os
from django.contrib.auth.models import User
from tests.annotate.factories import make_campaign, make_dataset
password = os.environ["SOAK_PASSWORD"]
owner = User.objects.create_user("soak-owner", password=password, is_staff=True)
users = [User.objects.create_user(f"soak{i}", password=password) for i in range(int(os.environ["SOAK_ANNOTATORS"]))]
dataset = make_dataset(owner=owner, items=int(os.environ["SOAK_ITEMS"]), systems=2)
campaign = make_campaign(dataset, users, raters_per_item=2, lease_minutes=30)
print(campaign.pk)
"""

CHECK = """
import json, os
from django.db.models import Count
from annotations.models import Assignment, Campaign, Rating, RatingOrigin, Submission
with open(os.environ["SOAK_ACKNOWLEDGED_FILE"], encoding="utf-8") as stream:
    acknowledged = json.load(stream)
campaign = Campaign.objects.get(pk=int(os.environ["SOAK_CAMPAIGN"]))
aspects = campaign.aspects.count()
stored = {s.idempotency_key: s for s in Submission.objects.select_related("assignment__task", "assignment__annotator")}
lost, incomplete = [], []
for key in acknowledged:
    submission = stored.get(key)
    if submission is None:
        lost.append(key)
        continue
    task = submission.assignment.task
    ratings = Rating.objects.filter(
        origin=RatingOrigin.APP, rater__user=submission.assignment.annotator, response__in=task.responses.all()
    ).count()
    if ratings != task.responses.count() * aspects:
        incomplete.append([key, ratings])
twice = list(
    Assignment.objects.filter(submission__isnull=False)
    .values("task", "annotator")
    .annotate(n=Count("pk"))
    .filter(n__gt=1)
    .values_list("task", "annotator", "n")
)
expected = sum(s.assignment.task.responses.count() * aspects for s in stored.values())
print(json.dumps({
    "submissions": len(stored),
    "lost": lost,
    "incomplete": incomplete,
    "submitted_twice": twice,
    "ratings": Rating.objects.filter(origin=RatingOrigin.APP).count(),
    "expected_ratings": expected,
}))
"""


def _manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=PROJECT_ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "evalsite.settings", **env},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.fixture
def private_services(tmp_path: Path) -> Iterator[tuple[PrivatePostgres, PrivateRedis]]:
    cluster = PrivatePostgres().init()
    server = PrivateRedis(tmp_path).start()
    yield cluster, server
    server.stop()
    cluster.destroy()


class Gunicorn:
    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.port = free_port()
        self.log = log
        with open(log, "wb") as out:
            self.process = subprocess.Popen(
                [
                    str(Path(sys.executable).with_name("gunicorn")),
                    *("--config", "python:evalsite.gunicorn_config", "--log-level", "warning"),
                ],
                cwd=PROJECT_ROOT,
                env={
                    **os.environ,
                    **env,
                    "DJANGO_SETTINGS_MODULE": "evalsite.settings",
                    "DEBUG": "false",
                    "GUNICORN_BIND": f"127.0.0.1:{self.port}",
                    "WEB_WORKERS": "2",
                    "WEB_THREADS": "4",
                },
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        wait_for(self._answers, timeout=120, interval=0.5, message="gunicorn to answer")

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _answers(self) -> bool:
        assert self.process.poll() is None, self.log.read_text(errors="replace")[-3000:]
        try:
            return httpx.get(f"{self.base}/accounts/login/", timeout=5).status_code == 200
        except httpx.TransportError:
            return False

    def stop(self) -> None:
        process_stop(self.process, timeout_s=30)


_HIDDEN = re.compile(r'<input type="hidden" name="(csrfmiddlewaretoken|idempotency_key|lease)" value="([^"]*)"')
_TASK_URL = re.compile(r"/annotate/(\d+)/tasks/([a-z2-7]{13})/$")


class Annotator(threading.Thread):
    """A person with a browser: on a 503 (or a dropped connection) they wait as told and send the same thing again."""

    def __init__(self, base: str, campaign_id: int, username: str, go: threading.Event, seed: int) -> None:
        super().__init__(daemon=True)
        self.go = go
        self.signed_in = threading.Event()
        self.client = httpx.Client(base_url=base, timeout=60, follow_redirects=False)
        self.campaign_id = campaign_id
        self.username = username
        self.started = 0.0  # set by the test before go
        self.think_s = 0.2 + (seed % 5) / 10
        self.statuses: collections.Counter[int] = collections.Counter()
        self.dropped = 0
        self.unavailable_at: list[float] = []  # seconds into the run of each 503
        self.acknowledged: list[tuple[str, float]] = []  # (idempotency key, seconds into the run)
        self.problems: list[str] = []

    def send(self, method: str, path: str, data: dict[str, str] | None = None) -> httpx.Response:
        first = time.monotonic()
        while True:
            try:
                response = self.client.request(method, path, data=data)
            except httpx.TransportError:
                self.dropped += 1
                wait = 1.0
            else:
                self.statuses[response.status_code] += 1
                if response.status_code != 503:
                    return response
                self.unavailable_at.append(time.monotonic() - self.started)
                wait = float(response.headers["Retry-After"])
            if time.monotonic() - first > GIVE_UP_AFTER_S:
                raise RuntimeError(f"{method} {path} unanswered for {GIVE_UP_AFTER_S} s")
            time.sleep(wait)

    def csrf(self) -> str:
        return str(self.client.cookies.get("csrftoken", ""))

    def run(self) -> None:
        try:
            self.work()
        except Exception as exc:  # the failure is reported by the test, with the others
            self.problems.append(f"{self.username}: {type(exc).__name__}: {exc}")
        finally:
            self.signed_in.set()
            self.client.close()

    def work(self) -> None:
        self.send("GET", "/accounts/login/")
        login = self.send(
            "POST",
            "/accounts/login/",
            {"username": self.username, "password": CAST_PASSWORD, "csrfmiddlewaretoken": self.csrf()},
        )
        if login.status_code != 302:
            raise RuntimeError(f"login answered {login.status_code}")
        self.signed_in.set()
        self.go.wait()
        location = self.next_task()
        while time.monotonic() - self.started < SECONDS:
            match = _TASK_URL.search(location)
            if match is None:
                return  # no task left for this annotator
            location = self.rate(location, match[2]) or self.next_task()

    def next_task(self) -> str:
        response = self.send("POST", f"/annotate/{self.campaign_id}/next/", {"csrfmiddlewaretoken": self.csrf()})
        if response.status_code != 303:
            raise RuntimeError(f"next answered {response.status_code}")
        return response.headers["Location"]

    def rate(self, page_url: str, task_ref: str) -> str | None:
        """Rates the task on page_url; the address the server sent the annotator to next, or None to ask again."""
        page = self.send("GET", page_url)
        if page.status_code != 200:
            self.problems.append(f"task page {page.status_code}")
            return None
        hidden = dict(_HIDDEN.findall(page.text))
        detail = self.send("GET", f"/api/annotate/campaigns/{self.campaign_id}/tasks/{task_ref}/")
        if detail.status_code != 200:
            self.problems.append(f"task detail {detail.status_code}: {detail.text[:200]}")
            return None
        task = detail.json()
        spread = sum(map(ord, task_ref))  # varies the answers from task to task
        form = {name: hidden[name] for name in ("csrfmiddlewaretoken", "idempotency_key", "lease")}
        for candidate in task["candidates"]:
            for index, aspect in enumerate(task["aspects"], start=1):
                values = [option["value"] for option in aspect["options"]]
                form[f"r-{candidate['number']}-{index}"] = f"{values[(spread + index) % len(values)]:g}"
        form["preference"] = "1"
        form["rationale"] = "soak test"
        time.sleep(self.think_s)
        submitted = self.send("POST", f"/annotate/{self.campaign_id}/tasks/{task_ref}/submit/", form)
        if submitted.status_code != 303:
            self.problems.append(f"submit {submitted.status_code}: {submitted.text[:300]}")
            return None
        self.acknowledged.append((form["idempotency_key"], time.monotonic() - self.started))
        return submitted.headers["Location"]


def test_annotators_lose_nothing_through_a_redis_stop_and_a_postgres_restart(
    private_services: tuple[PrivatePostgres, PrivateRedis], tmp_path: Path
) -> None:
    cluster, redis_server = private_services
    env = {
        "DATABASE_URL": cluster.url(),
        "CELERY_BROKER_URL": redis_server.url,
        "REDIS_URL": redis_server.url,
        "FAULT_RETRY_AFTER_S": "1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    _manage(env, "migrate", "--noinput")
    # Work for the whole soak at the fastest pace seen (1,200 answers in under 40 s): the annotators must still be
    # answering when the database comes back, or the restart meets no one.
    setup_env = {**env, "SOAK_PASSWORD": CAST_PASSWORD, "SOAK_ANNOTATORS": str(ANNOTATORS), "SOAK_ITEMS": "2400"}
    campaign_id = int(_manage(setup_env, "shell", "-c", SETUP).strip().splitlines()[-1])
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    server = Gunicorn(env, ARTIFACTS / "soak-gunicorn.log")
    try:
        # Everyone signs in first (password hashing is slow on purpose); the clock starts when all have.
        go = threading.Event()
        annotators = [Annotator(server.base, campaign_id, f"soak{i}", go, seed=i) for i in range(ANNOTATORS)]
        for annotator in annotators:
            annotator.start()
        for annotator in annotators:
            assert annotator.signed_in.wait(timeout=300)
        started = time.monotonic()
        for annotator in annotators:
            annotator.started = started
        go.set()
        time.sleep(max(0.0, started + REDIS_STOP_AT - time.monotonic()))
        redis_server.stop()
        redis_down = time.monotonic() - started
        time.sleep(REDIS_DOWN_FOR)
        redis_server.start()
        redis_up = time.monotonic() - started
        time.sleep(max(0.0, started + POSTGRES_RESTART_AT - time.monotonic()))
        cluster.stop()
        cluster.start()
        postgres_back = time.monotonic() - started
        for annotator in annotators:
            annotator.join(timeout=SECONDS + GIVE_UP_AFTER_S + 60)
        assert not any(annotator.is_alive() for annotator in annotators)
    finally:
        server.stop()

    statuses = sum((annotator.statuses for annotator in annotators), collections.Counter())
    acknowledged = [entry for annotator in annotators for entry in annotator.acknowledged]
    keys = [key for key, _ in acknowledged]
    # Thousands of keys are more than one environment string may hold (the kernel caps each at 128 KiB).
    keys_file = tmp_path / "acknowledged.json"
    keys_file.write_text(json.dumps(keys), encoding="utf-8")
    report = json.loads(
        _manage(
            {**env, "SOAK_ACKNOWLEDGED_FILE": str(keys_file), "SOAK_CAMPAIGN": str(campaign_id)}, "shell", "-c", CHECK
        )
        .strip()
        .splitlines()[-1]
    )
    unavailable = sorted(at for annotator in annotators for at in annotator.unavailable_at)
    print(
        f"soak: 503s at {[round(at) for at in unavailable]}; "
        f"{len(keys)} acknowledged, statuses {dict(statuses)}, dropped connections "
        f"{sum(a.dropped for a in annotators)}, redis down {redis_down:.0f}-{redis_up:.0f} s, "
        f"postgres back at {postgres_back:.0f} s, database {report}"
    )
    problems = [problem for annotator in annotators for problem in annotator.problems]
    assert problems == []
    assert statuses[500] == 0
    assert not [status for status in statuses if status >= 500 and status != 503]
    assert report["lost"] == [] and report["incomplete"] == []
    assert report["submitted_twice"] == []
    assert len(keys) == len(set(keys))  # each answer acknowledged once, however often it was sent
    assert report["ratings"] == report["expected_ratings"]
    # The faults really met the annotators: sessions were read from the database while Redis was away, and answers
    # were stored after the database came back.
    assert "reading the session from the database" in (ARTIFACTS / "soak-gunicorn.log").read_text(errors="replace")
    assert any(at > postgres_back for _, at in acknowledged)

"""Start-up benchmark: what a process pays before it does any work, against the floor of Django itself.

    .venv/bin/python bench/cli_startup.py [--repeat 5] [--worker-repeat 3] [--no-limit] [--json FILE]

Each figure is the median over fresh subprocesses (interpreter start-up included, as a user sees it) of the wall
time and, for the commands, of the CPU time (user + system), which a busy machine inflates less:

  floor       a minimal Django configured in code (the contrib apps and DRF only) running django.setup()
  help        manage.py help
  agreement   manage.py agreement on the 24-line llm-jp sample, imported first
  worker      a Celery worker from spawn until its first task (worker_ping, queued before the spawn) is done

Everything runs on the embedded defaults in a temporary directory (SQLite database, kombu's SQLAlchemy broker on
SQLite), whatever DATABASE_URL and CELERY_BROKER_URL say, so the figures do not depend on a Postgres or Redis server.
The worker figure includes the broker's polling interval (kombu's SQLAlchemy transport polls once a second).
Exits with status 1 when the median wall time or CPU time of help or agreement is over --limit (default 2) times the
floor's; --no-limit only reports.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MANAGE = str(ROOT / "manage.py")
SAMPLE = ROOT / "annotations" / "sample_data" / "llm_jp_sample.jsonl"
SAMPLE_DATASET = "bench-startup-llm-jp"
# The commands whose start-up the limit applies to; the worker's figure is reported only (its broker polls).
LIMITED = ("help", "agreement")

FLOOR_PROGRAM = """
import django
from django.conf import settings

settings.configure(
    INSTALLED_APPS=[
        "django.contrib.admin",
        "django.contrib.auth",
        "django.contrib.contenttypes",
        "django.contrib.sessions",
        "django.contrib.messages",
        "django.contrib.staticfiles",
        "rest_framework",
    ],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
)
django.setup()
"""


def embedded_environment(var_dir: Path) -> dict[str, str]:
    """The environment of `manage.py rundemo`: SQLite and the SQLAlchemy broker under var_dir."""
    # PYTHONDONTWRITEBYTECODE is dropped so that the warm-up run writes the bytecode caches a user's runs load:
    # without them every run compiles the project's sources again, which a user never pays.
    dropped = ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL", "PYTHONDONTWRITEBYTECODE")
    env = {key: value for key, value in os.environ.items() if key not in dropped}
    env.update(
        {
            "EVALSITE_VAR_DIR": str(var_dir),
            "DJANGO_SETTINGS_MODULE": "evalsite.settings",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }
    )
    return env


def broker_url(var_dir: Path) -> str:
    return f"sqla+sqlite:///{var_dir / 'celery-broker.sqlite3'}"


@dataclass(frozen=True)
class Timing:
    wall: float
    cpu: float | None  # user + system of the child; None for the worker, which runs on after its first task


def run(argv: list[str], env: dict[str, str]) -> Timing:
    """Wall and CPU seconds from spawn to exit; a failing command stops the bench with its output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return Timing(elapsed, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)


def median_timing(measure: Callable[[], Timing], repeat: int) -> Timing:
    timings = [measure() for _ in range(repeat)]
    cpus = [t.cpu for t in timings if t.cpu is not None]
    return Timing(statistics.median(t.wall for t in timings), statistics.median(cpus) if cpus else None)


def prepare(env: dict[str, str]) -> None:
    """Migrate the temporary database and import the sample dataset (once; also warms the bytecode caches)."""
    run([sys.executable, MANAGE, "migrate", "--noinput"], env)
    run(
        [
            sys.executable,
            MANAGE,
            "import_dataset",
            str(SAMPLE),
            "--name",
            SAMPLE_DATASET,
            "--preset",
            "llm-human-eval-jp",
        ],
        env,
    )


def _ping_answered(database: Path, token: str) -> bool:
    try:
        with sqlite3.connect(database, timeout=5) as conn:
            return conn.execute("SELECT 1 FROM judging_workerping WHERE token = ?", (token,)).fetchone() is not None
    except sqlite3.OperationalError:  # locked by the worker's write: ask again
        return False


def lone_worker_command(*, concurrency: int) -> list[str]:
    """A Celery worker of the project on `concurrency` threads, logging at INFO, without the gossip, mingle and
    heartbeat that only matter between several workers."""
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "evalsite",
        "worker",
        "--loglevel=INFO",
        "--pool=threads",
        f"--concurrency={concurrency}",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
    ]


def worker_first_task(env: dict[str, str], var_dir: Path, timeout_s: float = 120.0) -> Timing:
    """Seconds from spawning a worker until the worker_ping queued before it is in the database."""
    from celery import Celery

    token = f"bench-startup-{uuid.uuid4().hex}"
    # Celery prefers a CELERY_BROKER_URL in the environment over the broker it is given.
    os.environ.pop("CELERY_BROKER_URL", None)
    sender = Celery("bench-startup", broker=broker_url(var_dir))
    try:
        sender.send_task("judging.worker_ping", args=[token])
    finally:
        sender.close()
    log_path = var_dir / f"worker-{token}.log"
    with open(log_path, "wb") as log:
        start = time.perf_counter()
        worker = subprocess.Popen(
            lone_worker_command(concurrency=1), cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        while not _ping_answered(var_dir / "evalsite.sqlite3", token):
            if worker.poll() is not None or time.perf_counter() - start > timeout_s:
                raise SystemExit(f"the worker did not answer its first task:\n{log_path.read_text(errors='replace')}")
            time.sleep(0.02)
        return Timing(time.perf_counter() - start, None)
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(timeout=30)


def measure(repeat: int, worker_repeat: int, var_dir: Path) -> dict[str, Timing]:
    env = embedded_environment(var_dir)
    prepare(env)
    commands = {
        "floor": [sys.executable, "-c", FLOOR_PROGRAM],
        "help": [sys.executable, MANAGE, "help"],
        "agreement": [sys.executable, MANAGE, "agreement", SAMPLE_DATASET, "--json"],
    }
    figures: dict[str, Timing] = {}
    for name, argv in commands.items():
        figures[name] = median_timing(functools.partial(run, argv, env), repeat)
    if worker_repeat:
        figures["worker"] = median_timing(lambda: worker_first_task(env, var_dir), worker_repeat)
    return figures


def over_limit(figures: dict[str, Timing], limit: float) -> list[str]:
    """The limited commands whose median wall time or CPU time is over `limit` times the floor's."""
    floor = figures["floor"]

    def over(timing: Timing) -> bool:
        cpu_over = timing.cpu is not None and floor.cpu is not None and timing.cpu > limit * floor.cpu
        return timing.wall > limit * floor.wall or cpu_over

    return [name for name in LIMITED if name in figures and over(figures[name])]


def report(figures: dict[str, Timing]) -> str:
    floor = figures["floor"]
    lines = [f"{'':<10} {'wall':>8}  {'ratio':>6}  {'cpu':>8}  {'ratio':>6}"]
    for name, timing in figures.items():
        cpu = "" if timing.cpu is None or not floor.cpu else f"{timing.cpu:7.3f}s  {timing.cpu / floor.cpu:5.2f}x"
        lines.append(f"{name:<10} {timing.wall:7.3f}s  {timing.wall / floor.wall:5.2f}x  {cpu}".rstrip())
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5, help="runs per command (median)")
    parser.add_argument("--worker-repeat", type=int, default=3, help="worker boots (median); 0 skips the worker")
    parser.add_argument("--limit", type=float, default=2.0, help="allowed ratio of help and agreement to the floor")
    parser.add_argument("--no-limit", action="store_true", help="report only; never fail on the ratio")
    parser.add_argument("--json", type=Path, help="also write the figures (seconds) to this file")
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.worker_repeat < 0:
        parser.error("--repeat must be at least 1 and --worker-repeat at least 0")

    with tempfile.TemporaryDirectory(prefix="evalsite-startup-") as var_dir:
        figures = measure(args.repeat, args.worker_repeat, Path(var_dir))
    print(
        f"median of {args.repeat} runs ({args.worker_repeat} for the worker), fresh subprocesses, ratios to the floor:"
    )
    print(report(figures))
    if args.json:
        seconds = {name: {"wall": timing.wall, "cpu": timing.cpu} for name, timing in figures.items()}
        args.json.write_text(json.dumps(seconds, indent=2) + "\n", encoding="utf-8")
    slow = over_limit(figures, args.limit)
    if slow and not args.no_limit:
        print(f"over {args.limit:g}x the floor: {', '.join(slow)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

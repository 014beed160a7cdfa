"""Judge-engine throughput, end to end through Celery, against a bare asyncio+httpx client.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalsite_bench \
    CELERY_BROKER_URL=redis://127.0.0.1:6379/5 \
    .venv/bin/python bench/judge_throughput.py [--calls 5000] [--latency 0.3] [--concurrency 64]

What it does:
1. starts the fake OpenAI-compatible provider in its own process (scripted latency);
2. creates a dataset with `--calls` single-aspect answers (fresh text each time, so nothing is cached),
   starts `--workers` Celery worker processes and launches a `single` judge run with
   max_concurrency = `--concurrency`; times it from launch to the run's end, which commits its scores
   (JudgeScore rows) with its status, and checks that every answer got its score;
3. makes the same number of calls with a bare asyncio+httpx client at the same concurrency;
4. times `--baseline-calls` notebook-style sequential calls (1 s sleep after each) and
   extrapolates them to `--calls`.
It prints calls/s of each, the ratio, the maximum in-flight count the provider saw during our run,
and the speedup over the notebook baseline. Exit status 1 when a target is missed (ratio >= 0.8, speedup >= 100x).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.fake_provider import bench_judge_config, control, fake_provider, judge_bench_environment  # noqa: E402
from judging.management.worker import worker_command  # noqa: E402

judge_bench_environment()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--baseline-calls", type=int, default=50)
    parser.add_argument("--baseline-sleep", type=float, default=1.0)
    # One worker process per core, as Celery's own default concurrency is: one process runs its provider calls
    # and database work under one interpreter lock, so a second core is only used by a second process.
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="Celery worker processes")
    parser.add_argument(
        "--tasks-per-run", type=int, default=None, help="parallel work tasks per run (default: 2 per worker)"
    )
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=900.0, help="give up on the judge run after this long")
    return parser.parse_args()


def build_dataset(calls: int):  # type: ignore[no-untyped-def]
    from annotations.models import Aspect, Dataset, Item, Response, System, Turn

    nonce = uuid.uuid4().hex[:8]
    systems_per_item = 5
    items = (calls + systems_per_item - 1) // systems_per_item
    dataset = Dataset.objects.create(name=f"bench-judge-{nonce}")
    Aspect.objects.create(
        dataset=dataset, name="overall", label="Overall", min_value=1, max_value=5, ideal=5, position=0
    )
    systems = [System(dataset=dataset, key=f"llm_{i}", position=i) for i in range(systems_per_item)]
    System.objects.bulk_create(systems)
    item_rows = Item.objects.bulk_create(
        [Item(dataset=dataset, external_id=f"{nonce}-{i}", position=i, source={}) for i in range(items)]
    )
    turns = Turn.objects.bulk_create(
        [Turn(item=item, index=0, prompt=f"Question {nonce} #{item.position}?", source={}) for item in item_rows]
    )
    responses = []
    for turn in turns:
        for system in systems:
            if len(responses) == calls:
                break
            responses.append(
                Response(
                    turn=turn,
                    system=system,
                    position=system.position,
                    text=f"Answer {nonce} to {turn.item_id} by {system.key}.",
                    source={},
                    eval_aspects=[],
                )
            )
    Response.objects.bulk_create(responses, batch_size=2000)
    return dataset


def start_workers(count: int, tasks_per_run: int, concurrency: int) -> list[subprocess.Popen]:
    env = dict(os.environ)
    env["JUDGE_TASKS_PER_RUN"] = str(tasks_per_run)
    env["JUDGE_TIME_SLICE_S"] = env.get("JUDGE_TIME_SLICE_S", "600")
    logs = ROOT / "var" / "bench"
    logs.mkdir(parents=True, exist_ok=True)
    workers = []
    for index in range(count):
        log = open(logs / f"judge-worker-{index}.log", "wb")  # noqa: SIM115 - lives as long as the worker
        workers.append(
            subprocess.Popen(
                worker_command(
                    # Threads per worker = its share of the work tasks, so with prefetch 1 one worker cannot
                    # reserve the whole run while the other idles.
                    f"--concurrency={max(2, -(-tasks_per_run // count))}",
                    "--loglevel=WARNING",
                    "--without-heartbeat",
                    *("-n", f"judgebench{index}@%h"),
                ),
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
    # Worker start-up (Django, litellm import) must not be timed: wait until every worker answers.
    from evalsite.celery import app

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if len(app.control.ping(timeout=1.0) or []) >= count:
            break
    else:
        raise SystemExit("the Celery workers did not come up; see var/bench/judge-worker-*.log")
    return workers


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds a process (all its threads) has used; 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def database_backends() -> list[int]:
    """The Postgres server processes serving this benchmark's database now."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
        return [int(row[0]) for row in cursor.fetchall()]


class CpuMeter:
    """CPU seconds the run costs on this machine, which unlike its wall time does not depend on what else runs: the
    workers', this (launching) process's and the Postgres backends' of the benchmark database. A backend that ends
    before the meter is read again is missed (the workers keep theirs open)."""

    def __init__(self, workers: list[subprocess.Popen]) -> None:
        self.workers = [worker.pid for worker in workers]
        self.start = self._read()

    def _read(self) -> dict[str, float]:
        backends = database_backends()
        return {
            "workers": sum(cpu_seconds(pid) for pid in self.workers),
            "launcher": cpu_seconds(os.getpid()),
            **{f"pg{pid}": cpu_seconds(pid) for pid in backends},
        }

    def used(self) -> dict[str, float]:
        end = self._read()
        postgres = sum(end[k] - self.start.get(k, 0.0) for k in end if k.startswith("pg"))
        return {
            "workers": end["workers"] - self.start["workers"],
            "launcher": end["launcher"] - self.start["launcher"],
            "postgres": postgres,
        }


def judge_run(args: argparse.Namespace, base_url: str) -> dict:
    from bench.database import set_up_django_database

    set_up_django_database()
    from judging import services
    from judging.models import JudgeRun, JudgeScore, RunStatus

    dataset = build_dataset(args.calls)
    config = bench_judge_config("bench", "single", base_url, args.concurrency)
    workers = start_workers(args.workers, args.tasks_per_run, args.concurrency)
    # Like the workers' start-up, this process's one-time loads are not timed: litellm's import (the launch checks the
    # model's route through it) and the tokenizer its estimate counts with, which a web process has loaded long before.
    from judging.llm import gateway

    gateway.load()
    gateway.count_tokens(config["model"], [{"role": "user", "content": "warm up"}])
    try:
        control(base_url, "reset", {})
        control(base_url, "script", {"default": {"latency": args.latency}})
        meter = CpuMeter(workers)
        started = time.monotonic()
        run = services.judge_run_launch(dataset=dataset, config=config, launched_by=None)
        launch_s = time.monotonic() - started
        deadline = started + args.timeout
        while time.monotonic() < deadline:
            status = JudgeRun.objects.filter(pk=run.pk).values_list("status", flat=True).first()
            if status not in (RunStatus.QUEUED, RunStatus.RUNNING):
                break
            time.sleep(0.05)
        # The run ends in the transaction that writes its scores, so they exist once its status says it ended.
        elapsed = time.monotonic() - started
        cpu = meter.used()
        run.refresh_from_db()
        scores = JudgeScore.objects.filter(judge_id=run.judge_id).count()
        stats = control(base_url, "stats")
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
    engine_s = (run.finished_at - run.started_at).total_seconds() if run.finished_at and run.started_at else None
    return {
        "status": run.status,
        "engine_s": engine_s,
        "engine_calls_per_s": run.done / engine_s if engine_s else None,
        "units": run.total,
        "done": run.done,
        "failed": run.failed,
        "elapsed_s": elapsed,
        "launch_s": launch_s,
        "scores_written": scores,
        "calls_per_s": run.done / elapsed if elapsed else 0.0,
        "provider_calls": stats["calls"],
        "max_in_flight": stats["max_in_flight"],
        "cpu_s": cpu,
        "cpu_ms_per_call": {k: 1000 * v / max(1, run.done) for k, v in cpu.items()},
    }


async def bare_client(base_url: str, calls: int, concurrency: int) -> dict:
    import httpx

    semaphore = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=30) as client:

        async def one(i: int) -> None:
            body = {
                "model": "gpt-4o-mini",
                "messages": [{"role": "user", "content": f"bare call {i} {uuid.uuid4().hex}"}],
                "temperature": 0.0,
            }
            async with semaphore:
                response = await client.post("/chat/completions", json=body)
                response.raise_for_status()
                response.json()

        started = time.monotonic()
        await asyncio.gather(*(one(i) for i in range(calls)))
        elapsed = time.monotonic() - started
    return {"elapsed_s": elapsed, "calls_per_s": calls / elapsed}


def notebook_baseline(base_url: str, calls: int, sleep_s: float) -> dict:
    import httpx

    with httpx.Client(base_url=base_url, timeout=30) as client:
        started = time.monotonic()
        for i in range(calls):
            body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"notebook {i}"}]}
            client.post("/chat/completions", json=body).raise_for_status()
            time.sleep(sleep_s)
        elapsed = time.monotonic() - started
    return {"elapsed_s": elapsed, "seconds_per_call": elapsed / calls}


def main() -> int:
    args = parse_args()
    if args.tasks_per_run is None:
        args.tasks_per_run = 2 * args.workers
    with fake_provider(args.port, args.latency) as base_url:
        # The bare client runs before and after our run and the faster of the two counts, so a
        # busy moment on a shared machine cannot flatter our ratio.
        bare_runs = [asyncio.run(bare_client(base_url, args.calls, args.concurrency))]
        ours = judge_run(args, base_url)
        control(base_url, "reset", {})
        control(base_url, "script", {"default": {"latency": args.latency}})
        bare_runs.append(asyncio.run(bare_client(base_url, args.calls, args.concurrency)))
        bare_in_flight = control(base_url, "stats")["max_in_flight"]
        bare = max(bare_runs, key=lambda r: r["calls_per_s"])
        bare["runs_calls_per_s"] = [round(r["calls_per_s"], 1) for r in bare_runs]
        notebook = notebook_baseline(base_url, args.baseline_calls, args.baseline_sleep)
    notebook_total = notebook["seconds_per_call"] * args.calls
    ratio = ours["calls_per_s"] / bare["calls_per_s"] if bare["calls_per_s"] else 0.0
    speedup = notebook_total / ours["elapsed_s"] if ours["elapsed_s"] else 0.0
    report = {
        "calls": args.calls,
        "latency_s": args.latency,
        "max_concurrency": args.concurrency,
        "workers": args.workers,
        "tasks_per_run": args.tasks_per_run,
        "ours": ours,
        "bare_asyncio_httpx": {**bare, "max_in_flight": bare_in_flight},
        "ratio_ours_to_bare": ratio,
        "notebook_baseline": {**notebook, "calls_timed": args.baseline_calls, "estimated_total_s": notebook_total},
        "speedup_over_notebook": speedup,
    }
    print(json.dumps(report, indent=2))
    cpu_per_call = ", ".join(f"{k} {v:.2f} ms" for k, v in ours["cpu_ms_per_call"].items())
    print(
        f"\nour run: {ours['calls_per_s']:.1f} calls/s ({ours['done']}/{ours['units']} in {ours['elapsed_s']:.1f} s "
        f"from launch to the scores written, launch {ours['launch_s']:.1f} s, {ours['scores_written']} scores, "
        f"status {ours['status']}), max in-flight {ours['max_in_flight']} (limit {args.concurrency})\n"
        f"CPU per call: {cpu_per_call}\n"
        f"bare asyncio+httpx: {bare['calls_per_s']:.1f} calls/s (best of {bare['runs_calls_per_s']}, before and "
        f"after ours) -> ratio {ratio:.2f} (target >= 0.8)\n"
        f"notebook baseline: {notebook['seconds_per_call']:.2f} s/call, about {notebook_total / 3600:.2f} h for "
        f"{args.calls} calls -> we are {speedup:.0f}x faster (target >= 100x)"
    )
    ok = (
        ours["status"] == "succeeded"
        and ours["scores_written"] == ours["done"]
        and ours["max_in_flight"] <= args.concurrency
        and ratio >= 0.8
        and (speedup >= 100 or args.calls < 5000)
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

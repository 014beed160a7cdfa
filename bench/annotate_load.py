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
imports a generated dataset and opens a campaign with N raters per task, settles the database as a live one would be
when annotators arrive (VACUUM ANALYZE, then CHECKPOINT), starts gunicorn on it with the deployed configuration
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
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH_DB = os.environ.get("BENCH_ANNOTATE_DB", "evalsite_bench_annotate")
sys.path.insert(0, str(ROOT))

from bench.annotate_campaign import check_database, set_up_campaign  # noqa: E402
from bench.annotate_clients import run_clients, warm_up  # noqa: E402
from bench.annotate_server import database_server_pid, free_port, process_tree_cpu, start_gunicorn  # noqa: E402
from bench.database import recreate_database  # noqa: E402
from judging.management.worker import process_stop  # noqa: E402


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
    server_cpu_before = process_tree_cpu(server_pid)
    database_pid = database_server_pid(args.postgres)
    database_cpu_before = process_tree_cpu(database_pid)
    results, elapsed = run_clients(base, campaign_id, tokens, args.seconds, args.think_ms, args.client_processes, floor)
    latencies = [ms for result in results for ms in result["latencies"]]
    submit_cpu = [ms for result in results for ms in result["submit_cpu_ms"]]
    return {
        "results": results,
        "elapsed": elapsed,
        "latencies": latencies,
        "submit_latencies": [ms for result in results for ms in result["submit_latencies"]],
        "submit_cpu_ms": statistics.fmean(submit_cpu) if submit_cpu else 0.0,
        "server_cpu_ms": (process_tree_cpu(server_pid) - server_cpu_before) / max(len(latencies), 1) * 1000,
        "database_cpu_ms": (process_tree_cpu(database_pid) - database_cpu_before) / max(len(latencies), 1) * 1000,
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
    campaign_id, tokens = set_up_campaign(
        database_url,
        items=args.items,
        systems=args.systems,
        annotators=args.annotators,
        raters=args.raters,
        tasks=args.tasks,
    )
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_gunicorn(database_url, port, workers, threads)
    try:
        warm_up(base, tokens)
        loop = _phase(args, base, campaign_id, tokens, server.pid, floor=False)
        # Checked before the floor phase, whose rows are answers without ratings by design.
        acknowledged = [key for result in loop["results"] for key in result["acknowledged"]]
        checks = check_database(acknowledged, args.raters)
        floor = _phase(args, base, campaign_id, tokens, server.pid, floor=True)
    finally:
        process_stop(server, timeout_s=20)
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

"""The annotate benchmark's server side: gunicorn started with the deployed configuration on a free port, and the
CPU time of a process tree (gunicorn's, the database server's) read from /proc."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_gunicorn(database_url: str, port: int, workers: int, threads: int) -> subprocess.Popen[bytes]:
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


def process_tree_cpu(pid: int) -> float:
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


def database_server_pid(postgres_url: str) -> int:
    """The postmaster's process id (same host only): the parent of this connection's backend."""
    import psycopg

    # The backend exits with its connection, so its stat file is read while the connection is still open.
    with psycopg.connect(f"{postgres_url}/postgres", autocommit=True) as conn:
        (backend,) = conn.execute("SELECT pg_backend_pid()").fetchall()[0]
        with open(f"/proc/{backend}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])

"""Timing of gold and regular hand-outs: whether the time a claim takes tells a gold task apart.

    .venv/bin/python -m bench.gold_timing [--people 10] [--rounds 10] [--repeats 3]

Creates its own Postgres database (evalsite_bench_gold_timing or $BENCH_GOLD_TIMING_DB, dropped first, on
$BENCH_POSTGRES_URL or the local server), migrates it, and for each repeat opens a campaign of 40 regular and 6 gold
items (gold rate 1/3, 2 raters per item) with the test suite's helpers; then every person claims and submits, round
after round, each claim timed alone. It prints, per repeat, the median milliseconds of a gold and of a regular
hand-out and their ratio; the last line is JSON with the medians over all repeats and "ratio" (gold / regular).
A ratio near 1 means the hand-out's time does not tell gold apart. The suite checks the same property without a
clock (tests/security/test_gold_timing.py: both kinds send the same statements); this measures it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.database import drop_database, recreate_database  # noqa: E402

BENCH_DB = os.environ.get("BENCH_GOLD_TIMING_DB", "evalsite_bench_gold_timing")
SERVER_URL = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432")


def measure(people: int, rounds: int, repeat: int) -> tuple[list[float], list[float]]:
    """Seconds of each gold and each regular claim on a fresh gold-last campaign."""
    from django.contrib.auth.models import User

    from annotations.campaigns.claims import assignment_claim
    from tests.annotate.test_gold_oracles import gold_last_campaign, submit

    owner = User.objects.create_user(f"owner{repeat}", is_staff=True)
    users = [User.objects.create_user(f"timed{repeat}-{i:02d}") for i in range(people)]
    campaign = gold_last_campaign(owner, users, regular=40, gold=6, raters_per_item=2, name=f"timed {repeat}")
    timings: dict[bool, list[float]] = {True: [], False: []}
    for _round in range(rounds):
        for user in users:
            started = time.perf_counter()
            assignment = assignment_claim(campaign=campaign, user=user)
            elapsed = time.perf_counter() - started
            if assignment is None:
                continue
            timings[assignment.is_gold].append(elapsed)
            submit(campaign, assignment, user)
    return timings[True], timings[False]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--people", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    args = parser.parse_args()

    os.environ["DATABASE_URL"] = recreate_database(SERVER_URL, BENCH_DB)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    gold_all: list[float] = []
    regular_all: list[float] = []
    try:
        for repeat in range(args.repeats):
            gold, regular = measure(args.people, args.rounds, repeat)
            if not gold or not regular:
                print(f"repeat {repeat}: {len(gold)} gold and {len(regular)} regular claims; nothing to compare")
                continue
            gold_all += gold
            regular_all += regular
            ratio = statistics.median(gold) / statistics.median(regular)
            print(
                f"repeat {repeat}: gold {statistics.median(gold) * 1000:.2f} ms (n={len(gold)}), "
                f"regular {statistics.median(regular) * 1000:.2f} ms (n={len(regular)}), ratio {ratio:.3f}"
            )
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            drop_database(SERVER_URL, BENCH_DB)
    if not gold_all or not regular_all:
        raise SystemExit("no gold or no regular claim was measured")
    gold_ms = statistics.median(gold_all) * 1000
    regular_ms = statistics.median(regular_all) * 1000
    print(
        json.dumps(
            {"gold_ms": round(gold_ms, 3), "regular_ms": round(regular_ms, 3), "ratio": round(gold_ms / regular_ms, 3)}
        )
    )


if __name__ == "__main__":
    main()

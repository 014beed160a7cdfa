"""Writing an ended judge run's scores on Postgres, against a floor measured in the same process.

    .venv/bin/python -m bench.score_write [--units 20000] [--samples 1] [--keep-db]

Creates its own database (evalsite_bench_scores, dropped at the end unless --keep-db), migrates it, and builds a
dataset of `--units / --samples` answers with one aspect and an ended `single` run holding `--samples` finished,
scored judgments per answer (written in bulk: no provider, no worker). Then it times, each twice (the second
write replaces the first one's scores, as a rewrite does):

  write   judging.services.judge_run_write_scores: the means computed, the run's old scores deleted and the new
          ones inserted, each checked by the database trigger that keeps a score an aggregate of its judgments
  floor   INSERT INTO a temporary table of the score columns SELECT answer, aspect, AVG(score) FROM the run's
          finished judgments GROUP BY answer, aspect: the same rows written set-based, with no check at all

and prints one line: units, scores written, the best write and floor times and their ratio. The check reads one
index range per score, so the ratio stays the same as the run grows; a check that read the run's judgments for
every score would grow with the run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.database import drop_database, recreate_database, set_up_django_on  # noqa: E402

BENCH_DB = "evalsite_bench_scores"
SERVER_URL = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--units", type=int, default=20000, help="judgments in the run")
    parser.add_argument("--samples", type=int, default=1, help="samples per answer (units / samples answers)")
    parser.add_argument("--repeat", type=int, default=2, help="times each of write and floor is measured")
    parser.add_argument("--keep-db", action="store_true", help="keep the benchmark database")
    return parser.parse_args()


def build_run(answers: int, samples: int) -> int:
    """An ended run over `answers` answers with `samples` finished judgments each; returns its id."""
    from django.db import connection

    from annotations.models import Aspect, Dataset, Item, Response, System, Turn
    from judging.models import Judge, JudgeKind, JudgeRun, Judgment, JudgmentStatus, RunStatus

    dataset = Dataset.objects.create(name="score write bench")
    Aspect.objects.create(dataset=dataset, name="overall", min_value=1, max_value=5, ideal=5)
    system = System.objects.create(dataset=dataset, key="llm_a")
    items = Item.objects.bulk_create(
        [Item(dataset=dataset, external_id=f"item-{i}", position=i) for i in range(answers)], batch_size=5000
    )
    turns = Turn.objects.bulk_create(
        [Turn(item=item, index=0, prompt=f"question {item.position}") for item in items], batch_size=5000
    )
    responses = Response.objects.bulk_create(
        [Response(turn=turn, system=system, position=0, text=f"answer {n}") for n, turn in enumerate(turns)],
        batch_size=5000,
    )
    judge = Judge.objects.create(dataset=dataset, name="bench judge", kind=JudgeKind.RUN)
    run = JudgeRun.objects.create(
        judge=judge,
        dataset=dataset,
        config_snapshot={},
        method="single",
        status=RunStatus.SUCCEEDED,
        total=answers * samples,
        done=answers * samples,
    )
    # As a run's life leaves them: created pending at the launch, and analysed then (autovacuum analyses a table
    # after a bulk insert), then finished by the slices, so the statistics still say that hardly any is done.
    Judgment.objects.bulk_create(
        [
            Judgment(run=run, response=response, aspect_name="overall", sample=sample)
            for response in responses
            for sample in range(samples)
        ],
        batch_size=5000,
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE judging_judgment")
        cursor.execute(
            "UPDATE judging_judgment SET status = %s, score = 1 + (response_id + sample) %% 5 WHERE run_id = %s",
            [JudgmentStatus.DONE, run.pk],
        )
    return run.pk


def time_write(run_id: int) -> tuple[float, int]:
    from judging.services import judge_run_write_scores

    started = time.perf_counter()
    written = judge_run_write_scores(run_id=run_id)
    return time.perf_counter() - started, written


def time_floor(run_id: int) -> tuple[float, int]:
    from django.db import connection, transaction

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMPORARY TABLE floor_scores (judge_id bigint, response_id bigint, aspect_name varchar(200), "
            "value double precision) ON COMMIT DROP"
        )
        started = time.perf_counter()
        cursor.execute(
            "INSERT INTO floor_scores (judge_id, response_id, aspect_name, value) "
            "SELECT r.judge_id, j.response_id, j.aspect_name, AVG(j.score) FROM judging_judgment j "
            "JOIN judging_judgerun r ON r.id = j.run_id "
            "WHERE j.run_id = %s AND j.status = 'done' AND j.score IS NOT NULL "
            "GROUP BY r.judge_id, j.response_id, j.aspect_name",
            [run_id],
        )
        written = cursor.rowcount
        seconds = time.perf_counter() - started
    return seconds, written


def main() -> int:
    args = parse_args()
    answers = max(1, args.units // max(1, args.samples))
    recreate_database(SERVER_URL, BENCH_DB)
    try:
        set_up_django_on(SERVER_URL, BENCH_DB)
        run_id = build_run(answers, args.samples)
        writes = [time_write(run_id) for _ in range(args.repeat)]
        floors = [time_floor(run_id) for _ in range(args.repeat)]
    finally:
        if not args.keep_db:
            from django.db import connections

            connections.close_all()
            drop_database(SERVER_URL, BENCH_DB)
    write_s, written = min(writes)
    floor_s, floor_rows = min(floors)
    if written != floor_rows:
        print(f"error: the write stored {written} scores, the floor {floor_rows}", file=sys.stderr)
        return 1
    print(
        f"score write, {answers * args.samples:,} units ({written:,} scores): {write_s:.2f} s, "
        f"floor (bare INSERT ... SELECT of the same rows) {floor_s:.2f} s, ratio {write_s / floor_s:.1f}x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Scale benchmark: a million human ratings and a million pairwise votes, each step timed against its floor measured
in the same run.

    python -m bench.scale [--scale 1.0] [--keep-db]

--scale multiplies the sizes (0.1 for a quick run). At 1.0:

  ratings  10,000 items x 10 systems x 5 aspects, 1 to 3 raters per answer (drawn from 60), about 1,000,000
           ratings, plus one judge's score on every answer and aspect (500,000 judge scores)
  votes    20,000 prompts, each answered by 10 of 100 systems, 50 votes per prompt between two of its answers
           (ties included): 1,000,000 pairwise votes

Steps and their floors:

  import          dataset_import of the JSONL file   vs  COPY of the same item/turn/answer/rating rows into
                                                          temp tables of the same shape (rows built beforehand)
  agreement       the `agreement` command, cold       vs  the same statistics (agreement_summary, 1,000 bootstrap
                                                          resamples) on arrays already in memory
  correlate       the `correlate` command, one judge  vs  the statistics it prints on arrays already in memory:
                                                          correlation_levels (1,000 resamples), the human
                                                          ceiling, the alternative-annotator test, length bias
  preferences     win rates and preference alpha      vs  preference_summary on arrays already in memory
  dashboard       dataset and judges pages, warm      target <= 2 s (time to the whole response)
  exports         flat CSV and ratings Parquet        vs  COPY (SELECT ...) TO STDOUT of the same rating rows,
                  export, each in a child process         written by csv.writer / as Arrow record batches by
                  (bench/scale_exports.py)                pyarrow's ParquetWriter, in a child process too

  ranking         the `ranking` command (Bradley-Terry  vs  bradley_terry on the same comparisons already in
                  over the votes, 1,000 bootstrap          memory as arrays, with the same 1,000 prompt draws
                  rounds, cold)

Targets: import <= 2x floor, statistics <= 3x floor, exports <= 3x floor with the export process's peak RSS
<= 500 MB, dashboard <= 2 s, ranking <= 10 s, peak RSS <= 2 GB.
"""

from __future__ import annotations

import argparse
import functools
import io
import json
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from bench.copy_rows import imported_rating_row, response_row
from bench.database import drop_database, recreate_database, set_up_django_on
from bench.import_export import PeakRss
from bench.scale_exports import run_child

BENCH_DB = os.environ.get("BENCH_SCALE_DB", "evalsite_bench_scale")  # another name runs two at once
SERVER_URL = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432")
ASPECTS = ("fluency", "factuality", "relevance", "detail", "overall")
JUDGE = "scale judge"
IMPORT_RATIO, STATS_RATIO, PAGE_SECONDS, RSS_LIMIT = 2.0, 3.0, 2.0, 2 * 1024**3
EXPORT_RSS_LIMIT = 500 * 1024**2

RANKING_SECONDS = 10.0


def generate_ratings(path: Path, *, items: int, seed: int) -> int:
    rng = random.Random(seed)
    quality = {f"sys{s:02d}": rng.uniform(1.5, 4.5) for s in range(10)}
    pool = [f"rater{r:02d}" for r in range(60)]
    count = 0
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(items):
            responses = {}
            for system, level in quality.items():
                raters = rng.sample(pool, rng.randint(1, 3))
                truth = {a: level + rng.gauss(0, 0.8) for a in ASPECTS}
                evals = {a: [max(1, min(5, round(truth[a] + rng.gauss(0, 0.6)))) for _ in raters] for a in ASPECTS}
                count += len(raters) * len(ASPECTS)
                responses[system] = {
                    "response": f"answer {i} of {system}",
                    "raters": raters,
                    "human_evals": evals,
                    # Whole-number judge scores, as a 1-5 LLM judge gives: correlation_levels computes Kendall's
                    # tau from a table of distinct values, which grows with every distinct score (see README).
                    "auto_evals": {JUDGE: {a: max(1, min(5, round(truth[a] + rng.gauss(0, 0.7)))) for a in ASPECTS}},
                }
            handle.write(json.dumps({"id": f"r{i}", "turns": [{"prompt": f"prompt {i}", "responses": responses}]}))
            handle.write("\n")
    return count


def generate_votes(path: Path, *, prompts: int, seed: int) -> int:
    rng = random.Random(seed + 1)
    strength = [rng.gauss(0, 1) for _ in range(100)]
    count = 0
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(prompts):
            shown = rng.sample(range(100), 10)
            preferences = []
            for v in range(50):
                a, b = rng.sample(shown, 2)
                p_a = 1 / (1 + 10 ** ((strength[b] - strength[a]) / 2))
                draw = rng.random()
                entry: dict[str, Any] = {"rater": f"voter{v}", "candidates": [f"m{a:03d}", f"m{b:03d}"]}
                if draw < 0.1:
                    entry.update(preferred=None, tie=True)
                else:
                    entry["preferred"] = f"m{a:03d}" if draw < 0.1 + 0.9 * p_a else f"m{b:03d}"
                preferences.append(entry)
            count += len(preferences)
            responses = {f"m{s:03d}": {"response": f"answer {i} of m{s:03d}"} for s in shown}
            turn = {"prompt": f"question {i}", "responses": responses, "preferences": preferences}
            handle.write(json.dumps({"id": f"v{i}", "turns": [turn]}) + "\n")
    return count


def floor_rows(path: Path, parents: dict[str, dict[str, int]] | None = None) -> dict[str, list[tuple[Any, ...]]]:
    """The rows an import writes, built with no checks (ids assigned here, as COPY needs them). `parents`, when
    given, receives the system and rater ids assigned (by key), for parent rows of those ids."""
    from psycopg.types.json import Jsonb

    rows: dict[str, list[tuple[Any, ...]]] = {"item": [], "turn": [], "response": [], "rating": [], "judgescore": []}
    systems: dict[str, int] = {}
    raters: dict[str, int] = {}
    turn_id = response_id = 0
    now = datetime.now(UTC)
    with open(path, "rb") as handle:
        for position, raw in enumerate(handle):
            line = json.loads(raw)
            item_id = position + 1
            rows["item"].append((item_id, 1, line["id"], position, Jsonb({})))
            for index, turn in enumerate(line["turns"]):
                turn_id += 1
                source = {k: ({} if k == "responses" else v) for k, v in turn.items()}
                rows["turn"].append((turn_id, item_id, index, turn["prompt"], None, None, Jsonb(source)))
                for answer_position, (key, answer) in enumerate(turn["responses"].items()):
                    response_id += 1
                    system_id = systems.setdefault(key, len(systems) + 1)
                    rows["response"].append(response_row(response_id, turn_id, system_id, answer_position, answer))
                    for aspect_id, tokens in enumerate(answer.get("human_evals", {}).values(), start=1):
                        for rater_position, token in enumerate(tokens):
                            rater_id = raters.setdefault(answer["raters"][rater_position], len(raters) + 1)
                            rows["rating"].append(
                                imported_rating_row(
                                    len(rows["rating"]) + 1,
                                    response_id,
                                    aspect_id,
                                    rater_id,
                                    rater_position,
                                    token,
                                    now,
                                )
                            )
                    for by_aspect in answer.get("auto_evals", {}).values():
                        for aspect, value in by_aspect.items():
                            rows["judgescore"].append(
                                (len(rows["judgescore"]) + 1, 1, response_id, aspect, float(value))
                            )
    if parents is not None:
        parents.update(systems=systems, raters=raters)
    return rows


FLOOR_COLUMNS = {
    "item": ("annotations_item", ["id", "dataset_id", "external_id", "position", "source"]),
    "turn": ("annotations_turn", ["id", "item_id", "index", "prompt", "reference", "context", "source"]),
    "response": (
        "annotations_response",
        ["id", "turn_id", "system_id", "position", "text", "source", "eval_aspects", "has_human_evals"],
    ),
    "rating": (
        "annotations_rating",
        [
            "id",
            "response_id",
            "aspect_id",
            "rater_id",
            "position",
            "raw",
            "value",
            "is_missing",
            "rationale",
            "comment",
            "seconds_spent",
            "origin",
            "created_at",
            "updated_at",
        ],
    ),
    "judgescore": ("judging_judgescore", ["id", "judge_id", "response_id", "aspect_name", "value"]),
}


def floor_copy(rows: dict[str, list[tuple[Any, ...]]], including: str = "DEFAULTS") -> None:
    """COPY into temp tables shaped like the real ones (columns, types, NOT NULL; with "ALL" also their indexes and
    check constraints, though never their foreign keys or triggers), then drop them."""
    import psycopg

    with psycopg.connect(f"{SERVER_URL}/{BENCH_DB}") as conn, conn.cursor() as cursor:
        for name, table_rows in rows.items():
            source, columns = FLOOR_COLUMNS[name]
            if not table_rows:
                continue
            cursor.execute(f"CREATE TEMP TABLE floor_{name} (LIKE {source} INCLUDING {including})")
            column_sql = ", ".join(f'"{c}"' for c in columns)
            with cursor.copy(f"COPY floor_{name} ({column_sql}) FROM STDIN") as copy:
                for row in table_rows:
                    copy.write_row(row)
        conn.commit()


def floor_copy_into_tables(path: Path, timer: Callable[[str, Callable[[], Any]], tuple[float, Any, float]]) -> float:
    """The same COPY into the real tables, in a fresh database: their indexes, checks, foreign keys (checked at the
    end, as the import's commit checks them) and row triggers, in a transaction rolled back. Parent rows (the
    dataset, aspects, systems, raters and judge, with the ids the rows name) are written first, outside the time."""
    from django.db import connection, transaction

    from annotations.datasets import judge_scores
    from annotations.models import Aspect, Dataset, Rater, System

    parents: dict[str, dict[str, int]] = {}
    rows = floor_rows(path, parents)
    with transaction.atomic():
        dataset = Dataset.objects.create(id=1, name="floor")
        for position, name in enumerate(ASPECTS, start=1):
            Aspect.objects.create(
                id=position, dataset=dataset, name=name, min_value=1, max_value=5, ideal=5, position=position
            )
        for key, pk in parents["systems"].items():
            System.objects.create(id=pk, dataset=dataset, key=key, position=pk)
        for key, pk in parents["raters"].items():
            Rater.objects.create(id=pk, dataset=dataset, external_id=key, pseudonym=key)
        judge_id = judge_scores.imported_judge_create(dataset=dataset, name=JUDGE) if rows["judgescore"] else 0
        rows["judgescore"] = [(pk, judge_id, *rest) for pk, _, *rest in rows["judgescore"]]

        def copy() -> None:
            with connection.cursor() as cursor:
                for name, table_rows in rows.items():
                    table, columns = FLOOR_COLUMNS[name]
                    if not table_rows:
                        continue
                    column_sql = ", ".join(f'"{c}"' for c in columns)
                    with cursor.cursor.copy(f"COPY {table} ({column_sql}) FROM STDIN") as writer:
                        for row in table_rows:
                            writer.write_row(row)
                cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")

        seconds, _, _ = timer("tables floor", copy)
        transaction.set_rollback(True)
    return seconds


def correlate_floor_inputs(data: Any, scores: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Per aspect, the arrays the `correlate` command's statistics start from, built before the floor's time."""
    import numpy as np

    from judging.analysis import judge_reports
    from judging.analysis.reports import human_means

    inputs = []
    for aspect in data.aspects:
        human, judge_values = human_means(data, aspect), scores[aspect.name]
        paired = judge_reports._paired_for(data, human, judge_values)
        judged = np.isfinite(judge_values)
        rater_scores = judge_reports._rater_scores(data, aspect, judged)
        lengths = data.answers.lengths[np.flatnonzero(np.isfinite(human) & judged)].astype(np.float64)
        inputs.append((aspect, paired, rater_scores, judge_values, lengths))
    return inputs


def correlate_floor(data: Any, aspect: Any, paired: Any, rater_scores: Any, judge_values: Any, lengths: Any) -> None:
    """The statistics `correlate` prints for one aspect, on arrays already in memory: the four levels with their
    bootstrap intervals, the human ceiling, the alternative-annotator test and the length bias."""
    from judging.analysis import judge_reports
    from judging.statistics.correlation import correlation_levels
    from judging.statistics.human_ceiling import human_ceiling
    from judging.statistics.judge_tables import length_bias

    correlation_levels(paired)
    human_ceiling(rater_scores, list(data.answers.turn_ids), list(data.answers.system_keys))
    judge_reports._alt_test(rater_scores, judge_values, aspect, judge_reports.DEFAULT_ALT_TEST)
    length_bias(lengths, paired.human, paired.judge)


def _process_peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Results:
    def __init__(self) -> None:
        self.rows: list[tuple[str, float, float | None, str, float]] = []
        self.missed: list[str] = []

    def step(self, label: str, action: Callable[[], Any]) -> tuple[float, Any, float]:
        sampler = PeakRss(interval=0.02)
        with sampler.measure():
            started = time.perf_counter()
            value = action()
            seconds = time.perf_counter() - started
        return seconds, value, float(sampler.peak)

    def compare(
        self, label: str, seconds: float, floor: float, limit: float, rss: float, rss_limit: float = RSS_LIMIT
    ) -> None:
        ratio = seconds / floor if floor > 0 else float("inf")
        verdict = "OK" if ratio <= limit and rss <= rss_limit else "MISSED"
        if verdict == "MISSED":
            self.missed.append(label)
        self.rows.append((label, seconds, floor, f"{ratio:5.2f}x floor (target <= {limit:g}x) {verdict}", rss))
        print(
            f"{label}: {seconds:.2f} s, floor {floor:.2f} s, {ratio:.2f}x, peak RSS {rss / 2**20:.0f} MB "
            f"(the process's so far, floors and their inputs included: {_process_peak_mb():.0f} MB)",
            flush=True,
        )

    def absolute(self, label: str, seconds: float, limit: float, rss: float) -> None:
        verdict = "OK" if seconds <= limit else "MISSED"
        if verdict == "MISSED":
            self.missed.append(label)
        self.rows.append((label, seconds, None, f"target <= {limit:g} s {verdict}", rss))
        print(f"{label}: {seconds:.2f} s, peak RSS {rss / 2**20:.0f} MB", flush=True)

    def print(self) -> None:
        print(f"\n{'step':<34} {'seconds':>9} {'floor s':>9}  {'ratio':<36} {'peak RSS MB':>11}")
        for label, seconds, floor, verdict, rss in self.rows:
            shown = f"{floor:9.2f}" if floor is not None else f"{'':>9}"
            print(f"{label:<34} {seconds:9.2f} {shown}  {verdict:<36} {rss / 2**20:11.0f}")
        print(f"load average at the end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
        print(f"\nprocess peak RSS (ru_maxrss): {_process_peak_mb():.0f} MB")
        print("missed: " + (", ".join(self.missed) if self.missed else "none"))


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the sizes (0.1 for a quick run)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep-db", action="store_true", help="do not drop the benchmark database at the end")
    return parser.parse_args()


def main() -> int:  # noqa: PLR0915 - one measured story, step after step
    args = _arguments()
    workdir = Path(tempfile.mkdtemp(prefix="evalsite-bench-scale-"))
    ratings_path, votes_path = workdir / "ratings.jsonl", workdir / "votes.jsonl"
    n_ratings = generate_ratings(ratings_path, items=max(1, round(10_000 * args.scale)), seed=args.seed)
    n_votes = generate_votes(votes_path, prompts=max(1, round(20_000 * args.scale)), seed=args.seed)
    print(f"load average at the start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}, {os.cpu_count()} CPUs")
    print(
        f"data: {n_ratings:,} ratings ({ratings_path.stat().st_size / 1e6:.0f} MB), {n_votes:,} votes "
        f"({votes_path.stat().st_size / 1e6:.0f} MB)"
    )
    recreate_database(SERVER_URL, BENCH_DB)
    results = Results()
    try:
        set_up_django_on(SERVER_URL, BENCH_DB)
        from django.contrib.auth.models import User
        from django.core.cache import cache
        from django.core.management import call_command
        from django.db import connection
        from django.test import Client
        from django.urls import reverse
        from threadpoolctl import threadpool_limits

        from annotations.datasets.importing import dataset_import
        from annotations.models import Dataset
        from judging.analysis import reports
        from judging.analysis.preference_selectors import pairwise_judgments, stats_preferences
        from judging.analysis.reports import aspect_ratings, load_dataset_data
        from judging.analysis.selectors import judge_scores
        from judging.models import Judge
        from judging.statistics.agreement import agreement_summary
        from judging.statistics.pairwise import comparisons_from, preference_comparisons
        from judging.statistics.preference import pair_outcomes, preference_data, preference_summary
        from judging.statistics.ranking import bradley_terry, prompt_weights

        print(f"RSS after django.setup(): {psutil.Process().memory_info().rss / 2**20:.0f} MB")
        owner = User.objects.create_user(username="scale-bench", is_staff=True)

        def import_file(path: Path, name: str) -> Any:
            with open(path, "rb") as stream:
                return dataset_import(stream=stream, name=name, owner=owner)

        # Into the real tables before any import, so that the ids the floor's rows name are free.
        tables_floor = {path: floor_copy_into_tables(path, results.step) for path in (ratings_path, votes_path)}
        for path, name, count in (
            (ratings_path, "scale-ratings", f"{n_ratings:,} ratings"),
            (votes_path, "scale-votes", f"{n_votes:,} votes"),
        ):
            seconds, _, rss = results.step(f"import {name}", functools.partial(import_file, path, name))
            copy_rows = floor_rows(path)
            floor, _, _ = results.step("floor", functools.partial(floor_copy, copy_rows))
            indexed, _, _ = results.step("indexed floor", functools.partial(floor_copy, copy_rows, "ALL"))
            del copy_rows
            print(
                f"import {name}: {seconds:.2f} s is {seconds / indexed:.2f}x a COPY into tables with the real ones' "
                f"indexes and check constraints ({indexed:.2f} s), {seconds / tables_floor[path]:.2f}x a COPY into "
                f"the real tables with their foreign keys and triggers ({tables_floor[path]:.2f} s); the target is "
                "against the bare COPY below"
            )
            results.compare(f"import {name} ({count})", seconds, floor, IMPORT_RATIO, rss)
        connection.close()

        ratings_ds = Dataset.objects.get(name="scale-ratings")
        votes_ds = Dataset.objects.get(name="scale-votes")
        judge = Judge.objects.get(dataset=ratings_ds, name=JUDGE)

        def cold() -> None:
            cache.clear()
            reports._DATA_MEMO.clear()

        cold()
        seconds, _, rss = results.step(
            "agreement", lambda: call_command("agreement", "scale-ratings", "--json", stdout=io.StringIO())
        )
        data = load_dataset_data(ratings_ds)
        arrays = [(aspect_ratings(data, a), a.level) for a in data.aspects]
        floor, _, _ = results.step("floor", lambda: [agreement_summary(r, level) for r, level in arrays])
        results.compare("agreement, 5 aspects (cold)", seconds, floor, STATS_RATIO, rss)

        cold()
        seconds, _, rss = results.step(
            "correlate",
            lambda: call_command(
                "correlate", "--dataset", "scale-ratings", "--judge", JUDGE, "--json", stdout=io.StringIO()
            ),
        )
        data = load_dataset_data(ratings_ds)
        floor_inputs = correlate_floor_inputs(data, judge_scores(judge, data.answers))

        def correlate_statistics() -> None:
            for inputs in floor_inputs:
                correlate_floor(data, *inputs)

        floor, _, _ = results.step("floor", correlate_statistics)
        results.compare("correlate, one judge (cold)", seconds, floor, STATS_RATIO, rss)

        cold()
        seconds, _, rss = results.step("preferences", lambda: reports.compute_preferences(votes_ds))
        votes = stats_preferences(votes_ds)
        prefs = preference_data(votes.turn_ids, votes.candidates, votes.preferred, votes.none_appropriate)
        judges = {n: pair_outcomes(j) for n, j in pairwise_judgments(votes_ds).items()}
        floor, _, _ = results.step("floor", lambda: preference_summary(prefs, judges))
        results.compare(f"preferences, {prefs.n:,} decided votes", seconds, floor, STATS_RATIO, rss)

        cold()
        seconds, _, rss = results.step(
            "ranking",
            lambda: call_command("ranking", "--dataset", "scale-votes", "--json", stdout=io.StringIO()),
        )
        comparisons = comparisons_from(preference_comparisons(votes.turn_ids, votes.candidates, votes.preferred), {})

        def ranking_floor() -> None:
            with threadpool_limits(limits=1, user_api="blas"):
                bradley_terry(comparisons, weights=prompt_weights(comparisons.n_prompts, 1000, 0))

        floor, _, _ = results.step("floor", ranking_floor)
        results.compare(f"ranking, {comparisons.n:,} comparisons (cold)", seconds, floor, STATS_RATIO, rss)
        results.absolute("ranking, 1,000 bootstrap rounds (cold)", seconds, RANKING_SECONDS, rss)

        client = Client()
        client.force_login(owner)
        for label, url in (
            ("dashboard dataset page", reverse("dashboard-dataset", args=[ratings_ds.pk])),
            ("dashboard judges page", reverse("dashboard-judges", args=[ratings_ds.pk]) + f"?judge={JUDGE}"),
            ("dashboard votes page", reverse("dashboard-dataset", args=[votes_ds.pk])),
        ):
            cold_s, response, _ = results.step(label, functools.partial(client.get, url))
            assert response.status_code == 200, (url, response.status_code)
            warm_s, _, rss = results.step(label, functools.partial(client.get, url))
            print(f"{label}: cold {cold_s:.2f} s, warm {warm_s:.2f} s")
            results.absolute(f"{label} (warm)", warm_s, PAGE_SECONDS, rss)

        connection.close()
        for label, kind, floor_kind in (
            ("flat CSV export", "csv", "floor-csv"),
            ("ratings Parquet export", "parquet", "floor-parquet"),
        ):
            export = run_child(SERVER_URL, BENCH_DB, ratings_ds.pk, kind, str(workdir / f"export.{kind}"))
            floor_run = run_child(SERVER_URL, BENCH_DB, ratings_ds.pk, floor_kind, str(workdir / f"floor.{kind}"))
            print(
                f"{label}: {export['rows']:,} rows, floor wrote {floor_run['rows']:,}; "
                f"peak RSS of the export's process {export['peak_rss'] / 2**20:.0f} MB (VmHWM), "
                f"of the floor's {floor_run['peak_rss'] / 2**20:.0f} MB"
            )
            results.compare(
                f"{label} ({export['rows']:,} rows)",
                export["seconds"],
                floor_run["seconds"],
                STATS_RATIO,
                export["peak_rss"],
                rss_limit=EXPORT_RSS_LIMIT,
            )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        if not args.keep_db:
            from django.db import connections

            connections.close_all()
            drop_database(SERVER_URL, BENCH_DB)
    results.print()
    return 0 if not results.missed else 1


if __name__ == "__main__":
    sys.exit(main())

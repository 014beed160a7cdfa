"""Statistics benchmark: agreement with 1,000 bootstrap resamples and all correlation levels on the
60,600-rating llm-human-eval-jp-shaped dataset with one judge, next to the reference libraries, plus the dashboard
pages cold and warm.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalsite .venv/bin/python bench/stats.py [--items 404]

It migrates the database, imports a generated dataset under a unique name (with one imported judge under
auto_evals), measures, and deletes the dataset again. Targets: agreement <= 2 s, correlation <= 1 s, dashboard
cold <= 1.5 s. The reference timings for bootstrap loops are measured on a smaller number of resamples and scaled
up linearly (labelled "scaled"), because running them 1,000 times would take minutes.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import django  # noqa: E402

from bench.database import ensure_postgres_database  # noqa: E402

ensure_postgres_database()
django.setup()

import krippendorff  # noqa: E402
import numpy as np  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from django.core.cache import cache  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402
from django.urls import reverse  # noqa: E402
from scipy import stats  # noqa: E402

from annotations.datasets.importing import dataset_import  # noqa: E402
from bench.datagen import add_imported_judge, generate_llm_jp_jsonl  # noqa: E402
from judging.analysis import reports as stats_service  # noqa: E402
from judging.analysis.judge_reports import compute_correlation_report  # noqa: E402
from judging.analysis.reports import (  # noqa: E402
    aspect_ratings,
    compute_agreement_report,
    human_means,
    load_dataset_data,
)
from judging.analysis.selectors import judge_scores  # noqa: E402
from judging.models import Judge  # noqa: E402

JUDGE_NAME = "bench judge"


def timed(function: Callable[[], Any], repeat: int = 1) -> tuple[float, Any]:
    best = float("inf")
    result = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - start)
    return best, result


def add_judge(path: Path) -> None:
    items = [json.loads(raw) for raw in path.read_text(encoding="utf-8").splitlines()]
    add_imported_judge(items, JUDGE_NAME, seed=1)
    path.write_text("\n".join(json.dumps(item, ensure_ascii=False) for item in items) + "\n", encoding="utf-8")


def reference_agreement(data: Any, resamples: int) -> float:
    """krippendorff (3 levels) + its alpha on materialised unit resamples, for every aspect."""
    for aspect in data.aspects:
        ratings = aspect_ratings(data, aspect)
        units, unit_rows = np.unique(ratings.unit, return_inverse=True)
        matrix = np.full((units.size, int(np.bincount(unit_rows).max())), np.nan)
        slot = np.zeros(units.size, dtype=int)
        for row, value in zip(unit_rows, ratings.value, strict=True):
            matrix[row, slot[row]] = value
            slot[row] += 1
        for level in ("nominal", "ordinal", "interval"):
            krippendorff.alpha(reliability_data=matrix.T, level_of_measurement=level)
        rng = np.random.default_rng(0)
        for _ in range(resamples):
            sample = matrix[rng.integers(0, units.size, units.size)]
            krippendorff.alpha(reliability_data=sample.T, level_of_measurement="ordinal")
    return 0.0


def reference_correlation(data: Any, judge: Judge, resamples: int) -> None:
    """scipy per level (loops over groups) and on materialised prompt resamples, for every aspect."""
    scores = judge_scores(judge, data.answers)
    turns = data.answers.turn_ids
    systems = np.asarray(data.answers.system_keys)
    for aspect in data.aspects:
        human = human_means(data, aspect)
        judged = scores[aspect.name]
        keep = np.isfinite(human) & np.isfinite(judged)
        h, j, t, s = human[keep], judged[keep], turns[keep], systems[keep]

        def levels(h: np.ndarray, j: np.ndarray, t: np.ndarray, s: np.ndarray) -> None:
            for function in (stats.pearsonr, stats.spearmanr, stats.kendalltau):
                function(h, j)
                for key in (t, s):
                    for group in np.unique(key):
                        members = key == group
                        if members.sum() >= 3 and np.ptp(h[members]) > 0 and np.ptp(j[members]) > 0:
                            function(h[members], j[members])
                means_h = [h[s == system].mean() for system in np.unique(s)]
                means_j = [j[s == system].mean() for system in np.unique(s)]
                function(means_h, means_j)

        levels(h, j, t, s)
        rng = np.random.default_rng(0)
        prompts = np.unique(t)
        for _ in range(resamples):
            drawn = rng.choice(prompts, prompts.size)
            rows = np.concatenate([np.flatnonzero(t == prompt) for prompt in drawn])
            levels(h[rows], j[rows], t[rows], s[rows])


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=404)
    parser.add_argument("--systems", type=int, default=10)
    parser.add_argument("--raters", type=int, default=3)
    parser.add_argument("--reference-resamples", type=int, default=20, help="bootstrap loops timed for references")
    parser.add_argument("--keep", action="store_true", help="keep the generated dataset (and print its name)")
    return parser.parse_args()


def main() -> None:
    args = _arguments()

    call_command("migrate", verbosity=0)
    name = f"bench-stats-{uuid.uuid4().hex[:8]}"
    username = f"bench-researcher-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.jsonl"
        counts = generate_llm_jp_jsonl(path, items=args.items, systems=args.systems, raters=args.raters, seed=0)
        add_judge(path)
        with open(path, "rb") as handle:
            dataset = dataset_import(stream=handle, name=name, preset="llm-human-eval-jp").dataset
    user = User.objects.create_user(username=username, is_staff=True)
    dataset.members.add(user)
    try:
        judge = Judge.objects.get(dataset=dataset, name=JUDGE_NAME)
        print(f"dataset: {counts['items']} items, {counts['responses']} answers, {counts['ratings']} ratings + 1 judge")
        load_s, data = timed(lambda: load_dataset_data(dataset), repeat=3)
        agreement_s, _ = timed(lambda: compute_agreement_report(dataset, data), repeat=3)
        correlation_s, _ = timed(lambda: compute_correlation_report(dataset, judge, data), repeat=3)
        print(f"load from the database (selectors):                 {load_s:8.3f} s")
        print(f"agreement, 5 aspects, 1,000 bootstrap resamples:    {agreement_s:8.3f} s  (target <= 2 s)")
        print(f"correlation, 5 aspects x 4 levels, 1,000 resamples: {correlation_s:8.3f} s  (target <= 1 s)")

        k = args.reference_resamples
        ref_point_s, _ = timed(lambda: reference_agreement(data, 0))
        ref_boot_s, _ = timed(lambda: reference_agreement(data, k))
        ref_agreement = ref_point_s + (ref_boot_s - ref_point_s) * 1000 / k
        print(
            f"reference agreement (krippendorff, {k} resamples scaled to 1,000): {ref_agreement:8.3f} s "
            f"-> ours is {ref_agreement / agreement_s:6.1f}x faster"
        )
        ref_levels_s, _ = timed(lambda: reference_correlation(data, judge, 0))
        ref_corr_boot_s, _ = timed(lambda: reference_correlation(data, judge, k))
        ref_correlation = ref_levels_s + (ref_corr_boot_s - ref_levels_s) * 1000 / k
        print(
            f"reference correlation (scipy loops, {k} resamples scaled to 1,000): {ref_correlation:8.3f} s "
            f"-> ours is {ref_correlation / correlation_s:6.1f}x faster"
        )
        print(f"reference correlation point estimates only (no CIs):  {ref_levels_s:8.3f} s")

        client = Client()
        client.force_login(user)
        for label, url in (
            ("dashboard dataset page", reverse("dashboard-dataset", args=[dataset.pk])),
            ("dashboard judges page", reverse("dashboard-judges", args=[dataset.pk]) + "?judge=bench+judge"),
        ):
            cache.clear()
            stats_service._DATA_MEMO.clear()  # cold means no cached report and no arrays kept in this process
            cold_s, response = timed(lambda url=url: client.get(url))
            warm_s, _ = timed(lambda url=url: client.get(url), repeat=3)
            assert response.status_code == 200, response.status_code
            print(f"{label}: cold {cold_s:6.3f} s (target <= 1.5 s), cached {warm_s:6.3f} s")
        buffer = io.StringIO()
        cli_s, _ = timed(lambda: call_command("agreement", name, "--json", stdout=buffer))
        print(f"agreement command (includes cache lookup/fill):     {cli_s:8.3f} s")
    finally:
        if args.keep:
            print(f"kept dataset {name!r} (judge {JUDGE_NAME!r})")
        else:
            dataset.delete()
            user.delete()


if __name__ == "__main__":
    main()

"""Ranking benchmark: Bradley–Terry on 1,000,000 comparisons among 100 systems with 1,000 bootstrap rounds.

    .venv/bin/python -m bench.ranking [--comparisons 1000000] [--systems 100] [--prompts 2000] [--rounds 1000]

Generates comparisons from known strengths (5% ties) spread over prompts, then times evalsite's ranking (the point
fit with its standard errors and the 1,000 prompt-bootstrap refits that give the rank intervals) against a baseline
run in the same process: a logistic regression with one row per comparison (design row +1 for the first system, −1
for the second, the reference's column dropped), fitted by iteratively reweighted least squares, each bootstrap
round refitted with the prompt draws as row weights. The baseline is timed on a few rounds and scaled linearly to
the same number of rounds (labelled "scaled"), because running it 1,000 times takes many minutes. Both fits are
checked to agree. Target: evalsite <= 10 s.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from scipy import sparse  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from judging.statistics.pairwise import Comparisons, comparisons_from  # noqa: E402
from judging.statistics.ranking import bradley_terry, prompt_weights  # noqa: E402

BASELINE_ROUNDS = 3


def generate(n: int, systems: int, prompts: int, seed: int) -> tuple[Comparisons, np.ndarray]:
    rng = np.random.default_rng(seed)
    truth = rng.normal(0.0, 1.0, systems)
    first = rng.integers(0, systems, n)
    second = (first + rng.integers(1, systems, n)) % systems
    p_first = 1.0 / (1.0 + np.exp(truth[second] - truth[first]))
    score = (rng.random(n) < p_first).astype(np.float64)
    score[rng.random(n) < 0.05] = 0.5
    labels = tuple(f"system-{k:03d}" for k in range(systems))
    comparisons = Comparisons(
        prompt=rng.integers(0, prompts, n).astype(np.int64),
        first=first.astype(np.int64),
        second=second.astype(np.int64),
        score=score,
        system_labels=labels,
        n_prompts=prompts,
    )
    return comparisons, truth


def logistic_fit(comparisons: Comparisons, row_weights: np.ndarray, reference: int) -> np.ndarray:
    """IRLS on the per-comparison design matrix; returns log-strengths with the reference at 0."""
    size = len(comparisons.system_labels)
    n = comparisons.n
    rows = np.concatenate([np.arange(n), np.arange(n)])
    columns = np.concatenate([comparisons.first, comparisons.second])
    values = np.concatenate([np.ones(n), -np.ones(n)])
    design = sparse.csr_matrix((values, (rows, columns)), shape=(n, size))
    keep = [k for k in range(size) if k != reference]
    design = design[:, keep].tocsc()
    beta = np.zeros(len(keep))
    for _ in range(50):
        eta = design @ beta
        mu = 1.0 / (1.0 + np.exp(-eta))
        working = row_weights * mu * (1.0 - mu)
        gradient = design.T @ (row_weights * (comparisons.score - mu))
        information = (design.T @ design.multiply(working[:, None])).toarray()
        step = np.linalg.solve(information + 1e-9 * np.eye(len(keep)), gradient)
        beta += step
        if np.max(np.abs(step)) < 1e-10:
            break
    strength = np.zeros(size)
    strength[keep] = beta
    return strength


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--comparisons", type=int, default=1_000_000)
    parser.add_argument("--systems", type=int, default=100)
    parser.add_argument("--prompts", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    comparisons, truth = generate(args.comparisons, args.systems, args.prompts, args.seed)
    print(
        f"{comparisons.n:,} comparisons, {args.systems} systems, {args.prompts:,} prompts, {args.rounds:,} bootstrap "
        f"rounds, {os.cpu_count()} CPUs, one BLAS thread"
    )
    labels = comparisons.system_labels
    rows = list(
        zip(
            comparisons.prompt.tolist(),
            [labels[k] for k in comparisons.first.tolist()],
            [labels[k] for k in comparisons.second.tolist()],
            comparisons.score.tolist(),
            strict=True,
        )
    )
    with threadpool_limits(limits=1, user_api="blas"):
        started = time.perf_counter()
        cpu_started = time.process_time()
        comparisons = comparisons_from(rows)
        built = time.perf_counter() - started
        weights = prompt_weights(comparisons.n_prompts, args.rounds, args.seed)
        result, boot = bradley_terry(comparisons, weights=weights)
        ours = time.perf_counter() - started
        ours_cpu = time.process_time() - cpu_started
        fitted = np.array([row["strength"]["value"] for row in sorted(result["systems"], key=lambda r: r["system"])])

        started = time.perf_counter()
        baseline_point = logistic_fit(comparisons, np.ones(comparisons.n), 0)
        for round_index in range(BASELINE_ROUNDS):
            baseline_boot = logistic_fit(comparisons, weights[round_index][comparisons.prompt], 0)
        baseline_measured = time.perf_counter() - started
    per_fit = baseline_measured / (1 + BASELINE_ROUNDS)
    baseline_scaled = per_fit * (1 + args.rounds)
    assert boot is not None
    point_gap = float(np.max(np.abs(fitted - baseline_point)))
    boot_gap = float(np.max(np.abs(boot[BASELINE_ROUNDS - 1] - baseline_boot)))
    recovered = float(np.corrcoef(fitted, truth)[0, 1])
    print(
        f"evalsite ranking from (prompt, system, other, score) rows: {ours:.2f} s "
        f"(of which building the comparisons {built:.2f} s; then the point fit, SEs, {args.rounds:,} bootstrap refits "
        f"and rank intervals); CPU time of this process {ours_cpu:.2f} s (wall time grows when other processes share "
        f"the CPUs; load average {os.getloadavg()[0]:.1f})"
    )
    print(
        f"baseline per-comparison logistic regression: {baseline_measured:.2f} s for {1 + BASELINE_ROUNDS} fits, "
        f"{per_fit:.2f} s per fit, {baseline_scaled:.0f} s for {1 + args.rounds:,} fits (scaled)"
    )
    print(f"largest difference from the baseline: point {point_gap:.1e}, bootstrap round {boot_gap:.1e}")
    print(f"correlation of fitted and true strengths: {recovered:.4f}")
    print(
        f"ratio baseline / evalsite: {baseline_scaled / ours:.0f}x; target evalsite <= 10 s: "
        f"{'met' if ours <= 10 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()

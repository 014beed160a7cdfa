"""The alternative-annotator test (Calderon, Reichart and Dror 2025): can the judge replace one of the raters?

Each rater h is left out in turn. On every answer that h and the judge both scored and that at least one other rater
scored, the judge's score and h's score are each compared with the remaining raters' scores by an alignment score
(accuracy: the share of remaining raters it equals; negative RMSE: minus the root mean squared difference to them).
The judge wins the answer when its alignment is at least h's, h wins it when its alignment is at least the judge's
(a tie is a win for both). With d = (h wins) − (judge wins) per answer, a one-sided one-sample t-test asks whether
mean(d) < ε, i.e. rejects H0: P(judge wins) ≤ P(h wins) − ε, the judge being given the cost–benefit margin ε.

The raters' p-values are corrected by Benjamini and Yekutieli (2001) at FDR level q (valid under any dependence; the
raters share answers). The winning rate ω is the share of tested raters whose H0 is rejected, and the judge passes
when ω ≥ 0.5. The advantage probability ρ is the mean over tested raters of P(judge wins). A rater with fewer than
``min_instances`` usable answers is not tested (the t-test's normal approximation needs about 30) and does not count
in ω; with no rater tested the result is undefined, never a pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from judging.statistics.arrays import FloatArray, IntArray
from judging.statistics.results import Stat, defined, undefined

METRICS = ("accuracy", "neg_rmse")
DEFAULT_Q = 0.05
DEFAULT_MIN_INSTANCES = 30
PASS_WINNING_RATE = 0.5
# The same label on a nominal scale; scores are stored as floats, so equality allows for their rounding.
_EQUAL = 1e-9


@dataclass(frozen=True)
class Labels:
    """Individual non-missing labels of one aspect: ``answer`` indexes the per-answer ``judge`` array."""

    answer: IntArray
    rater: IntArray
    value: FloatArray
    rater_labels: tuple[str, ...]


def metric_for_level(level: str) -> str:
    """Accuracy for nominal aspects, negative RMSE for the rest, the paper's choices for such data."""
    return "accuracy" if level == "nominal" else "neg_rmse"


def by_adjusted(p_values: FloatArray) -> FloatArray:
    """Benjamini–Yekutieli adjusted p-values, as R's ``p.adjust(p, "BY")``: rejecting those ≤ q is the BY step-up
    procedure at FDR level q."""
    m = p_values.size
    if m == 0:
        return p_values.copy()
    order = np.argsort(p_values, kind="stable")
    harmonic = float(np.sum(1.0 / np.arange(1, m + 1)))
    ranks = np.arange(1, m + 1, dtype=np.float64)
    scaled = p_values[order] * m * harmonic / ranks
    adjusted_sorted = np.minimum(1.0, np.minimum.accumulate(scaled[::-1])[::-1])
    adjusted = np.empty(m)
    adjusted[order] = adjusted_sorted
    return adjusted


def _alignment(label: FloatArray, rest: FloatArray, metric: str) -> FloatArray:
    """Alignment of one label per row with the row's remaining labels (``rest``: rows x remaining labels)."""
    if metric == "accuracy":
        return np.asarray(np.mean(np.abs(rest - label[:, None]) <= _EQUAL, axis=1), dtype=np.float64)
    return np.asarray(-np.sqrt(np.mean((rest - label[:, None]) ** 2, axis=1)), dtype=np.float64)


@dataclass(frozen=True)
class _LeftOut:
    """One row per (answer, rater) where the rater, the judge and another rater scored the answer, in the order of
    the answers' first appearance: the rater's and the judge's alignment with the other raters' labels."""

    rater: IntArray
    human: FloatArray
    judge: FloatArray


def _left_out_rows(labels: Labels, judge: FloatArray, metric: str) -> _LeftOut:
    """Every rater left out of every answer at once. Labels are grouped by answer in the order answers first
    appear; each row's remaining labels keep their input order, so each alignment sums the same numbers in the
    same order as a per-answer loop would."""
    answer = np.asarray(labels.answer, dtype=np.int64)
    rater = np.asarray(labels.rater, dtype=np.int64)
    value = np.asarray(labels.value, dtype=np.float64)
    empty = _LeftOut(np.empty(0, dtype=np.int64), np.empty(0), np.empty(0))
    if answer.size == 0:
        return empty
    answers, first_seen, answer_code = np.unique(answer, return_index=True, return_inverse=True)
    appearance = np.empty(answers.size, dtype=np.int64)
    appearance[np.argsort(first_seen, kind="stable")] = np.arange(answers.size)
    order = np.argsort(appearance[answer_code], kind="stable")
    group = appearance[answer_code][order]
    rater, value = rater[order], value[order]
    answer_of_group = answers[np.argsort(appearance)]
    size = np.bincount(group, minlength=answers.size)
    start = np.concatenate(([0], np.cumsum(size)[:-1]))
    # A rater's first label on an answer is its own; any repeat of it is neither its own nor one of the others'.
    pair = group * (int(rater.max()) + 1) + rater
    _, first_of_pair, pair_code, pair_count = np.unique(
        pair, return_index=True, return_inverse=True, return_counts=True
    )
    own = np.sort(first_of_pair)
    others = size[group[own]] - pair_count[pair_code[own]]
    judge_label = judge[answer_of_group[group[own]]]
    usable = (others > 0) & np.isfinite(judge_label)
    own, others, judge_label = own[usable], others[usable], judge_label[usable]
    if own.size == 0:
        return empty
    total = size[group[own]]
    human_score = np.empty(own.size)
    judge_score = np.empty(own.size)
    for labelled, remaining in sorted(set(zip(total.tolist(), others.tolist(), strict=True))):
        rows = np.flatnonzero((total == labelled) & (others == remaining))
        positions = start[group[own[rows]]][:, None] + np.arange(labelled)
        keep = rater[positions] != rater[own[rows]][:, None]
        rest = value[positions][keep].reshape(rows.size, remaining)
        human_score[rows] = _alignment(value[own[rows]], rest, metric)
        judge_score[rows] = _alignment(judge_label[rows], rest, metric)
    return _LeftOut(rater[own], human_score, judge_score)


def _one_sided_p(differences: FloatArray, epsilon: float) -> tuple[float | None, str | None]:
    """P-value of the one-sample t-test of H0: mean(d) ≥ ε against H1: mean(d) < ε (scipy's ``ttest_1samp`` with
    ``alternative="less"``). Without variance the t statistic is ±∞ (p 0 or 1) unless mean(d) = ε."""
    from scipy import stats  # noqa: PLC0415 -- ~1.8 s to import; a command that never tests pays nothing

    n = differences.size
    mean = float(differences.mean())
    sd = float(differences.std(ddof=1))
    if sd == 0.0:
        if mean == epsilon:
            return None, "every answer gives the same advantage difference, equal to epsilon"
        return (0.0 if mean < epsilon else 1.0), None
    t = (mean - epsilon) / (sd / np.sqrt(n))
    return float(stats.t.cdf(t, df=n - 1)), None


def _rater_row(
    name: str, human_score: FloatArray, judge_score: FloatArray, *, epsilon: float, min_instances: int
) -> dict[str, Any]:
    """One rater left out: its usable answers, advantage probabilities and one-sided p-value."""
    n = int(human_score.size)
    row: dict[str, Any] = {"rater": name, "n": n}
    if n < min_instances:
        reason = (
            f"only {n} answers scored by this rater, the judge and another rater; at least {min_instances} are needed"
        )
        row.update(
            {
                "p_value": undefined(reason),
                "p_adjusted": undefined(reason),
                "rejected": None,
                "rho_judge": undefined(reason),
                "rho_human": undefined(reason),
                "skipped": reason,
            }
        )
        return row
    judge_wins = (judge_score >= human_score).astype(np.float64)
    human_wins = (human_score >= judge_score).astype(np.float64)
    p_value, why = _one_sided_p(human_wins - judge_wins, epsilon)
    row.update(
        {
            "p_value": undefined(why or "undefined") if p_value is None else defined(p_value),
            "rho_judge": defined(float(judge_wins.mean())),
            "rho_human": defined(float(human_wins.mean())),
            "skipped": None,
        }
    )
    return row


def alt_test(
    labels: Labels,
    judge: FloatArray,
    *,
    epsilon: float,
    q: float = DEFAULT_Q,
    metric: str = "neg_rmse",
    min_instances: int = DEFAULT_MIN_INSTANCES,
) -> dict[str, Any]:
    """The test of one judge on one aspect; ``judge`` holds one score per answer (NaN: not judged)."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(METRICS)}, not {metric!r}")
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must lie strictly between 0 and 1, not {q}")
    if not 0.0 <= epsilon < 1.0:
        raise ValueError(f"epsilon must lie in [0, 1), not {epsilon}")
    if min_instances < 2:
        raise ValueError(f"min_instances must be at least 2, not {min_instances}")
    left_out = _left_out_rows(labels, np.asarray(judge, dtype=np.float64), metric)
    by_rater = np.argsort(left_out.rater, kind="stable")
    bounds = np.searchsorted(left_out.rater[by_rater], np.arange(len(labels.rater_labels) + 1))

    raters: list[dict[str, Any]] = []
    tested: list[dict[str, Any]] = []
    p_values: list[float] = []
    for code, name in enumerate(labels.rater_labels):
        mine = by_rater[bounds[code] : bounds[code + 1]]
        row = _rater_row(name, left_out.human[mine], left_out.judge[mine], epsilon=epsilon, min_instances=min_instances)
        raters.append(row)
        if row["skipped"] is None:
            tested.append(row)
            # An undefined p-value cannot reject; it enters the correction as 1 so that m still counts this rater.
            p_values.append(1.0 if row["p_value"]["value"] is None else row["p_value"]["value"])

    adjusted = by_adjusted(np.asarray(p_values, dtype=np.float64))
    for row, p_adjusted in zip(tested, adjusted.tolist(), strict=True):
        row["p_adjusted"] = defined(p_adjusted) if row["p_value"]["value"] is not None else row["p_value"]
        row["rejected"] = row["p_value"]["value"] is not None and p_adjusted <= q
    result: dict[str, Any] = {
        "epsilon": epsilon,
        "q": q,
        "metric": metric,
        "min_instances": min_instances,
        "correction": "Benjamini-Yekutieli",
        "raters_tested": len(tested),
        "raters_skipped": len(raters) - len(tested),
        "raters": raters,
    }
    if not tested:
        reason = (
            f"no rater has {min_instances} answers scored by the rater, the judge and another rater"
            if raters
            else "no rater scored an answer that the judge and another rater also scored"
        )
        result.update(
            {
                "winning_rate": undefined(reason),
                "advantage_probability": undefined(reason),
                "rejected": 0,
                "passed": {"value": None, "undefined": reason},
            }
        )
        return result
    rejected = sum(1 for row in tested if row["rejected"])
    winning_rate = rejected / len(tested)
    rho: Stat = defined(float(np.mean([row["rho_judge"]["value"] for row in tested])))
    result.update(
        {
            "winning_rate": defined(winning_rate),
            "advantage_probability": rho,
            "rejected": rejected,
            "passed": {"value": winning_rate >= PASS_WINNING_RATE, "undefined": None},
        }
    )
    return result

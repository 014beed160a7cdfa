"""Where a judge may stand in for the humans: prediction-powered system means and differences, and the Trust or
Escalate confidence threshold. Shared by the commands (``ppi``, ``trust_or_escalate``), the API and the dashboard,
like ``judging.analysis.reports``, whose data loading and cache they reuse. Both only read.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

import numpy as np

from annotations.models import Dataset
from judging.analysis.confidence_selectors import judge_confidences
from judging.analysis.reports import (
    DatasetData,
    ReportError,
    aspect_rating_rows,
    aspects_or_error,
    cached_report,
    human_means,
    judge_or_raise,
    judged_aspects,
    load_dataset_data,
    single_threaded_blas,
)
from judging.analysis.selectors import (
    ALL_RATINGS,
    AspectInfo,
    RatingScope,
    exclusions_json,
)
from judging.models import Judge
from judging.statistics.ppi import TUNINGS, human_only_mean, ppi_mean
from judging.statistics.results import undefined, undefined_interval
from judging.statistics.trust_escalate import DEFAULT_MIN_KEPT, TrustOrEscalate, modal_label, trust_or_escalate

PPI_CONFIDENCE = 0.95
DEFAULT_TARGET = 0.9
DEFAULT_DELTA = 0.1


def _ppi_or_undefined(human: np.ndarray, judge: np.ndarray, tuning: str, what: str) -> dict[str, Any]:
    """PPI over the items; undefined when the judge misses any, since the estimator needs the judge on every item
    (the human-only mean stays, from every human-scored item)."""
    labelled = np.isfinite(human)
    judged = np.isfinite(judge)
    missing = int(np.count_nonzero(~judged))
    if not missing:
        return dict(
            ppi_mean(human[labelled], judge[labelled], judge[~labelled], confidence=PPI_CONFIDENCE, tuning=tuning)
        )
    reason = (
        f"the judge has no score for {missing} of the {judge.size} {what}; prediction-powered inference needs the "
        "judge on every one"
    )
    gone = undefined(reason)
    return {
        "ppi": {"estimate": gone, "standard_error": gone, "interval": undefined_interval(reason)},
        "human_only": human_only_mean(human[labelled], confidence=PPI_CONFIDENCE),
        "effective_n": gone,
        "tuning_lambda": gone,
        "tuning": tuning,
        "confidence": PPI_CONFIDENCE,
        "n": int(np.count_nonzero(labelled)),
        "n_judge_only": int(np.count_nonzero(~labelled)),
        "n_total": int(judge.size),
        "undefined": reason,
    }


def _system_rows(data: DatasetData) -> dict[str, np.ndarray]:
    keys = np.asarray(data.answers.system_keys, dtype=object)
    return {key: np.flatnonzero(keys == key) for key in sorted(set(data.answers.system_keys))}


def _paired_prompts(data: DatasetData, rows_a: np.ndarray, rows_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Answer rows of A and B on the prompts (turns) both answered once."""
    turns_a, turns_b = data.answers.turn_ids[rows_a], data.answers.turn_ids[rows_b]
    unique_a, count_a = np.unique(turns_a, return_counts=True)
    unique_b, count_b = np.unique(turns_b, return_counts=True)
    shared = np.intersect1d(unique_a[count_a == 1], unique_b[count_b == 1])
    pick_a = rows_a[np.isin(turns_a, shared)]
    pick_b = rows_b[np.isin(turns_b, shared)]
    return (
        pick_a[np.argsort(data.answers.turn_ids[pick_a], kind="stable")],
        pick_b[np.argsort(data.answers.turn_ids[pick_b], kind="stable")],
    )


@single_threaded_blas
def compute_ppi_report(
    dataset: Dataset, judge: Judge, aspect_name: str | None, tuning: str, data: DatasetData
) -> dict[str, Any]:
    systems = _system_rows(data)
    aspects: dict[str, Any] = {}
    for aspect, values in judged_aspects(judge, data, aspect_name):
        human = human_means(data, aspect)
        means = [
            {"system": key, **_ppi_or_undefined(human[rows], values[rows], tuning, "answers")}
            for key, rows in systems.items()
        ]
        differences = []
        for first, second in combinations(systems, 2):
            rows_a, rows_b = _paired_prompts(data, systems[first], systems[second])
            differences.append(
                {
                    "system_a": first,
                    "system_b": second,
                    **_ppi_or_undefined(
                        human[rows_a] - human[rows_b], values[rows_a] - values[rows_b], tuning, "shared prompts"
                    ),
                }
            )
        aspects[aspect.name] = {"systems": means, "differences": differences}
    return {
        "dataset": dataset.name,
        "judge": judge.name,
        "scope": exclusions_json(data.scope, data.ratings.excluded),
        "tuning": tuning,
        "confidence": PPI_CONFIDENCE,
        "aspects": aspects,
    }


def ppi_report(
    dataset: Dataset,
    judge_name: str,
    aspect_name: str | None = None,
    tuning: str = "ppi++",
    scope: RatingScope = ALL_RATINGS,
) -> dict[str, Any]:
    """``ppi --dataset D --judge J --json``: {"dataset", "judge", "scope", "tuning", "confidence", "aspects": {A:
    {"systems": [{"system", "ppi", "human_only", "effective_n", "tuning_lambda", "n", "n_judge_only", "n_total",
    "undefined"}], "differences": [{"system_a", "system_b", ...the same}]}}}. A difference is A minus B on the
    prompts both answered."""
    if tuning not in TUNINGS:
        raise ReportError(f"tuning must be one of {', '.join(TUNINGS)}, not {tuning!r}")
    judge = judge_or_raise(dataset, judge_name)
    return cached_report(
        dataset,
        scope,
        ["ppi", judge.pk, aspect_name or "", tuning],
        lambda data: compute_ppi_report(dataset, judge, aspect_name, tuning, data),
    )


def _human_labels(data: DatasetData, aspect: AspectInfo) -> tuple[np.ndarray, int]:
    """Per answer row, the human label: the most frequent rating of the answer (NaN where it has none, or where two
    values tie for most frequent), and how many answers were left out for a tie."""
    rows = aspect_rating_rows(data, aspect)
    labels = np.full(data.answers.response_ids.size, np.nan)
    by_answer: dict[int, list[float]] = {}
    for answer, value in zip(data.ratings.answer[rows].tolist(), data.ratings.value[rows].tolist(), strict=True):
        by_answer.setdefault(answer, []).append(value)
    ties = 0
    for answer, values in by_answer.items():
        label = modal_label(values)
        if label is not None:
            labels[answer] = label
        else:
            ties += 1
    return labels, ties


@single_threaded_blas
def trust_or_escalate_calibrate(
    *,
    dataset: Dataset,
    judge_name: str,
    aspect_name: str,
    target: float = DEFAULT_TARGET,
    delta: float = DEFAULT_DELTA,
    min_kept: int = DEFAULT_MIN_KEPT,
    scope: RatingScope = ALL_RATINGS,
) -> dict[str, Any]:
    """Calibrate the judge's confidence threshold on the answers the humans labelled, for one aspect.

    A calibration item is an answer with a human label and a judge confidence; the judge agrees when its chosen
    score equals the human label. Returns the pure calibration (threshold, coverage, kept, empirical agreement,
    its lower bound, n; undefined with the reason when no threshold passes) with the judge, aspect, scope, how
    confidence was measured, and how many labelled answers had no confidence or a tied human label.
    """
    judge = judge_or_raise(dataset, judge_name)
    data = load_dataset_data(dataset, scope)
    aspect = aspects_or_error(data.aspects, aspect_name)[0]
    labels, ties = _human_labels(data, aspect)
    confidences = judge_confidences(judge, data.answers, aspect.name)
    labelled = np.isfinite(labels)
    usable = labelled & np.isfinite(confidences.confidence) & np.isfinite(confidences.chosen)
    calibration: TrustOrEscalate = trust_or_escalate(
        confidences.confidence[usable],
        confidences.chosen[usable] == labels[usable],
        target=target,
        delta=delta,
        min_kept=min_kept,
    )
    return {
        "dataset": dataset.name,
        "judge": judge.name,
        "aspect": aspect.name,
        "scope": exclusions_json(data.scope, data.ratings.excluded),
        "confidence_sources": confidences.sources,
        "labelled_without_confidence": int(np.count_nonzero(labelled & ~usable)),
        "tied_human_labels": ties,
        **calibration,
    }

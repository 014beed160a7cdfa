"""The reports on one judge against the humans: the correlation report (``correlate --json``), everything the
judges page shows for one judge and aspect, and the alternative-annotator test (``alt_test --json``). They load,
scope and cache as every report does, through ``judging.analysis.reports``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from annotations.models import Dataset
from judging.analysis.reports import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    DatasetData,
    aspect_rating_rows,
    cached_report,
    human_means,
    judge_or_raise,
    judged_aspects,
    load_dataset_data,
    pick_aspect,
    single_threaded_blas,
    system_mask,
)
from judging.analysis.selectors import (
    ALL_RATINGS,
    AspectInfo,
    RatingScope,
    exclusions_json,
    judge_scores,
    system_models,
)
from judging.analysis.span_reports import span_agreement_report
from judging.models import Judge
from judging.statistics.alt_test import DEFAULT_MIN_INSTANCES, DEFAULT_Q, Labels, alt_test, metric_for_level
from judging.statistics.correlation import Paired, correlation_levels, paired_scores
from judging.statistics.human_ceiling import RaterScores, human_ceiling
from judging.statistics.judge_tables import (
    confusion_matrix,
    length_bias,
    per_system_table,
    position_consistency,
    self_preference,
)
from judging.statistics.results import defined

# The alternative-annotator test's cost-benefit margin when the researcher sets none: the paper's value for
# crowd-workers, the smallest (strictest) of its three suggestions.
DEFAULT_EPSILON = 0.1
METRIC_CHOICES = ("auto", "accuracy", "neg_rmse")


@dataclass(frozen=True)
class AltTestSettings:
    epsilon: float = DEFAULT_EPSILON
    q: float = DEFAULT_Q
    metric: str = "auto"
    min_instances: int = DEFAULT_MIN_INSTANCES

    def cache_parts(self) -> list[Any]:
        return [self.epsilon, self.q, self.metric, self.min_instances]


DEFAULT_ALT_TEST = AltTestSettings()


# ---------------------------------------------------------------- judge versus humans


def _paired_for(data: DatasetData, human: np.ndarray, judge: np.ndarray, mask: np.ndarray | None = None) -> Paired:
    keep = np.isfinite(human) & np.isfinite(judge)
    if mask is not None:
        keep &= mask
    rows = np.flatnonzero(keep)
    return paired_scores(
        human[rows], judge[rows], list(data.answers.turn_ids[rows]), [data.answers.system_keys[r] for r in rows]
    )


@single_threaded_blas
def compute_correlation_report(
    dataset: Dataset,
    judge: Judge,
    data: DatasetData | None = None,
    *,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, Any]:
    data = data or load_dataset_data(dataset)
    scores = judge_scores(judge, data.answers)
    aspects = {}
    diagnostics = {}
    for aspect in data.aspects:
        if aspect.name not in scores:
            continue
        human = human_means(data, aspect)
        paired = _paired_for(data, human, scores[aspect.name])
        aspects[aspect.name] = correlation_levels(paired, n_resamples=n_resamples, seed=seed)
        diagnostics[aspect.name] = _judge_diagnostics(dataset, judge, data, aspect, human, scores[aspect.name], paired)
    return {
        "dataset": dataset.name,
        "judge": judge.name,
        "scope": exclusions_json(data.scope, data.ratings.excluded),
        "aspects": aspects,
        "diagnostics": diagnostics,
    }


def correlation_report(dataset: Dataset, judge_name: str, scope: RatingScope = ALL_RATINGS) -> dict[str, Any]:
    """``correlate --dataset N --judge J --json``: {"dataset", "judge", "scope", "aspects": {A: {level: {...}}},
    "diagnostics": {A: {"ceiling", "alternative_annotator", "bias"}}}."""
    judge = judge_or_raise(dataset, judge_name)
    return cached_report(
        dataset, scope, ["correlation", judge.pk], lambda data: compute_correlation_report(dataset, judge, data)
    )


def _position_consistency(judge: Judge) -> dict[str, Any]:
    """From the pairwise run's recorded rate, or Judge.params {"position_consistency": {"consistent": k, "n": n}}
    for imported pairwise results; anything else is not a pairwise judge."""
    run = getattr(judge, "run", None)  # the reverse one-to-one raises an AttributeError subclass when absent
    rate = getattr(run, "position_consistency", None)
    if isinstance(rate, float) and 0.0 <= rate <= 1.0:
        return {"rate": defined(rate), "n": None}
    record = (judge.params or {}).get("position_consistency")
    if isinstance(record, dict):
        consistent, total = record.get("consistent"), record.get("n")
        if isinstance(consistent, int) and isinstance(total, int) and 0 <= consistent <= total:
            return position_consistency([True] * consistent + [False] * (total - consistent))
    return position_consistency(None)


def _judge_model(judge: Judge) -> str | None:
    """The judging model: a run's config snapshot, else Judge.params["model"] (imported or derived judges)."""
    run = getattr(judge, "run", None)
    if run is not None and run.judge_settings.model is not None:
        return run.judge_settings.model
    model = (judge.params or {}).get("model")
    return model if isinstance(model, str) else None


@single_threaded_blas
def compute_judge_details(
    dataset: Dataset,
    judge: Judge,
    aspect_name: str | None,
    system_key: str | None,
    data: DatasetData | None = None,
    alt_settings: AltTestSettings = DEFAULT_ALT_TEST,
) -> dict[str, Any]:
    data = data or load_dataset_data(dataset)
    scores = judge_scores(judge, data.answers)
    shared = [aspect for aspect in data.aspects if aspect.name in scores]
    result: dict[str, Any] = {
        "judge": judge.name,
        "kind": judge.kind,
        "scope": exclusions_json(data.scope, data.ratings.excluded),
        "aspects": [aspect.name for aspect in shared],
        "unmatched_aspects": sorted(set(scores) - {aspect.name for aspect in data.aspects}),
        "systems": sorted(set(data.answers.system_keys)),
        "system": system_key or None,
    }
    aspect = pick_aspect(shared, aspect_name)
    result["aspect"] = aspect.name if aspect else None
    if aspect is None:
        return result
    judge_values = scores[aspect.name]
    human = human_means(data, aspect)
    paired = _paired_for(data, human, judge_values)
    mask = system_mask(data, system_key)
    shown = _paired_for(data, human, judge_values, mask)
    result.update(
        {
            "scale": {"min": aspect.min_value, "max": aspect.max_value},
            # Only the shown aspect, from the same inputs and function as correlation_report's entry for it.
            "levels": correlation_levels(paired, n_resamples=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED),
            **_judge_diagnostics(dataset, judge, data, aspect, human, judge_values, paired, alt_settings),
            "scatter": [
                {"human": float(h), "judge": float(j), "system": shown.system_labels[s]}
                for h, j, s in zip(shown.human, shown.judge, shown.system, strict=True)
            ],
            "confusion": confusion_matrix(shown, aspect.min_value, aspect.max_value),
            "per_system": per_system_table(paired),
            "spans": span_agreement_report(judge.pk, aspect, data.answers, data.ratings),
        }
    )
    return result


def _rater_scores(data: DatasetData, aspect: AspectInfo, judged: np.ndarray) -> RaterScores:
    """The aspect's individual ratings of the answers the judge scored."""
    rows = aspect_rating_rows(data, aspect, judged)
    rater_ids, rater_codes = np.unique(data.ratings.rater_id[rows], return_inverse=True)
    return RaterScores(
        answer=data.ratings.answer[rows],
        rater=rater_codes.astype(np.int64),
        value=data.ratings.value[rows],
        rater_labels=tuple(data.ratings.rater_pseudonyms.get(int(r), str(r)) for r in rater_ids),
    )


def _alt_test(
    rater_scores: RaterScores, judge_values: np.ndarray, aspect: AspectInfo, settings: AltTestSettings
) -> Any:
    metric = metric_for_level(aspect.level) if settings.metric == "auto" else settings.metric
    labels = Labels(rater_scores.answer, rater_scores.rater, rater_scores.value, rater_scores.rater_labels)
    return alt_test(
        labels,
        judge_values,
        epsilon=settings.epsilon,
        q=settings.q,
        metric=metric,
        min_instances=settings.min_instances,
    )


def _judge_diagnostics(
    dataset: Dataset,
    judge: Judge,
    data: DatasetData,
    aspect: AspectInfo,
    human: np.ndarray,
    judge_values: np.ndarray,
    paired: Paired,
    alt_settings: AltTestSettings = DEFAULT_ALT_TEST,
) -> dict[str, Any]:
    """The human ceiling, the alternative-annotator test and the bias diagnostics of one judge on one aspect: the
    judges page, `correlate --json` and the statistics API all report these same figures."""
    judged = np.isfinite(judge_values)
    rater_scores = _rater_scores(data, aspect, judged)
    keep = np.isfinite(human) & judged
    lengths = data.answers.lengths[np.flatnonzero(keep)].astype(np.float64)
    return {
        "ceiling": human_ceiling(rater_scores, list(data.answers.turn_ids), list(data.answers.system_keys)),
        "alternative_annotator": _alt_test(rater_scores, judge_values, aspect, alt_settings),
        "bias": {
            "length": length_bias(lengths, paired.human, paired.judge),
            "position_consistency": _position_consistency(judge),
            "self_preference": self_preference(paired, _judge_model(judge), system_models(dataset)),
        },
    }


def judge_details(
    dataset: Dataset,
    judge_name: str,
    aspect_name: str | None = None,
    system_key: str | None = None,
    scope: RatingScope = ALL_RATINGS,
    alt_settings: AltTestSettings = DEFAULT_ALT_TEST,
) -> dict[str, Any]:
    """Everything the judges page shows for one judge and aspect."""
    judge = judge_or_raise(dataset, judge_name)
    return cached_report(
        dataset,
        scope,
        ["judge", judge.pk, aspect_name or "", system_key or "", *alt_settings.cache_parts()],
        lambda data: compute_judge_details(dataset, judge, aspect_name, system_key, data, alt_settings),
    )


@single_threaded_blas
def compute_alt_test_report(
    dataset: Dataset, judge: Judge, aspect_name: str | None, settings: AltTestSettings, data: DatasetData
) -> dict[str, Any]:
    aspects = {
        aspect.name: _alt_test(_rater_scores(data, aspect, np.isfinite(values)), values, aspect, settings)
        for aspect, values in judged_aspects(judge, data, aspect_name, where=" in this scope")
    }
    return {
        "dataset": dataset.name,
        "judge": judge.name,
        "scope": exclusions_json(data.scope, data.ratings.excluded),
        "aspects": aspects,
    }


def alt_test_report(
    dataset: Dataset,
    judge_name: str,
    aspect_name: str | None = None,
    settings: AltTestSettings = DEFAULT_ALT_TEST,
    scope: RatingScope = ALL_RATINGS,
) -> dict[str, Any]:
    """``alt_test --dataset D --judge J --json``: {"dataset", "judge", "scope", "aspects": {A: {"epsilon", "q",
    "metric", "winning_rate", "advantage_probability", "passed", "raters": [...]}}}."""
    judge = judge_or_raise(dataset, judge_name)
    return cached_report(
        dataset,
        scope,
        ["alt_test", judge.pk, aspect_name or "", *settings.cache_parts()],
        lambda data: compute_alt_test_report(dataset, judge, aspect_name, settings, data),
    )

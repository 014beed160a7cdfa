"""The rankings report: systems ranked by the humans or by one judge (Bradley-Terry on pairwise comparisons, or the
mean rating), with bootstrap rank intervals and the agreement between the two rankings; cached like every report."""

from __future__ import annotations

from typing import Any

import numpy as np

from annotations.models import Dataset
from judging.analysis.preference_selectors import choice_comparisons, pairwise_judgments
from judging.analysis.reports import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    DatasetData,
    ReportError,
    aspects_or_error,
    cached_report,
    human_means,
    judge_or_raise,
    single_threaded_blas,
)
from judging.analysis.selectors import (
    ALL_RATINGS,
    AspectInfo,
    RatingScope,
    exclusions_json,
    judge_scores,
)
from judging.models import Judge
from judging.statistics.pairwise import (
    DEFAULT_TIES,
    TIE_CONVENTIONS,
    Comparisons,
    RankingError,
    choice_comparisons_from,
    comparisons_from,
)
from judging.statistics.ranking import bradley_terry, mean_rating, prompt_weights, ranking_agreement, system_scores

HUMANS = "humans"


def _pairwise_comparisons(
    dataset: Dataset, scope: RatingScope, source: str, prompt_index: dict[Any, int]
) -> Comparisons:
    if source == HUMANS:
        choices = choice_comparisons(dataset, scope)
        return choice_comparisons_from(
            choices.turn_ids,
            choices.chosen,
            choices.other,
            prompt_index,
            tied=(choices.tied_turn_ids, choices.tied_first, choices.tied_second),
        )
    return comparisons_from(_judgment_rows(dataset, source), prompt_index)


def _judgment_rows(dataset: Dataset, source: str) -> list[tuple[Any, str, str, float]]:
    judgments = pairwise_judgments(dataset).get(source)
    if not judgments:
        raise ReportError(
            f"judge {source!r} has no finished pairwise judgments; rank it by its mean scores with an aspect"
        )
    # Every judgment counts, both orders of a pair included: score 1 a win, 0.5 a tie, 0 a loss for the system.
    return [(turn, system, other, float(score)) for turn, system, other, _aspect, _sample, _order, score in judgments]


def _source_scores(data: DatasetData, judge: Judge | None, aspect: AspectInfo) -> np.ndarray:
    if judge is None:
        return human_means(data, aspect)
    scores = judge_scores(judge, data.answers).get(aspect.name)
    if scores is None or not np.isfinite(scores).any():
        raise ReportError(f"judge {judge.name!r} has no score on aspect {aspect.name!r}")
    return scores


def _ranking_of(
    dataset: Dataset,
    data: DatasetData,
    source: str,
    judge: Judge | None,
    aspect: AspectInfo | None,
    reference: str | None,
    weights_for: Any,
    prompt_index: dict[Any, int],
    ties: str = DEFAULT_TIES,
) -> tuple[dict[str, Any], np.ndarray | None, tuple[str, ...]]:
    if aspect is None:
        comparisons = _pairwise_comparisons(dataset, data.scope, source, prompt_index)
        result, boot = bradley_terry(
            comparisons, reference=reference, weights=weights_for(comparisons.n_prompts), ties=ties
        )
        return result, boot, comparisons.system_labels
    scores = system_scores(
        _source_scores(data, judge, aspect), list(data.answers.turn_ids), data.answers.system_keys, prompt_index
    )
    result, boot = mean_rating(scores, weights=weights_for(scores.n_prompts))
    return result, boot, scores.system_labels


@single_threaded_blas
def compute_ranking_report(
    dataset: Dataset,
    source: str,
    judge: Judge | None,
    aspect_name: str | None,
    reference: str | None,
    n_resamples: int,
    seed: int,
    data: DatasetData,
    ties: str | None = None,
) -> dict[str, Any]:
    if aspect_name is not None and reference is not None:
        raise ReportError(
            "a reference system applies to the Bradley-Terry ranking only, not to a ranking by mean rating"
        )
    if aspect_name is not None and ties is not None:
        raise ReportError("a tie convention applies to the Bradley-Terry ranking only, not to a ranking by mean rating")
    ties = ties or DEFAULT_TIES
    if ties not in TIE_CONVENTIONS:
        raise ReportError(f"unknown tie convention {ties!r}; choose one of {', '.join(TIE_CONVENTIONS)}")
    aspect = aspects_or_error(data.aspects, aspect_name)[0] if aspect_name is not None else None
    prompt_index: dict[Any, int] = {}
    weights_cache: dict[int, np.ndarray] = {}

    def weights_for(n_prompts: int) -> np.ndarray | None:
        # One set of draws over the prompts of both sources, so a judge's ranking and the humans' are resampled alike.
        if n_prompts == 0:
            return None
        return weights_cache.setdefault(n_prompts, prompt_weights(n_prompts, n_resamples, seed))

    try:
        if judge is not None:
            # Register both sources' prompts first, so that both rankings are bootstrapped over the same prompt draws.
            if aspect is None:
                _pairwise_comparisons(dataset, data.scope, HUMANS, prompt_index)
                _pairwise_comparisons(dataset, data.scope, source, prompt_index)
            else:
                system_scores(
                    _source_scores(data, judge, aspect),
                    list(data.answers.turn_ids),
                    data.answers.system_keys,
                    prompt_index,
                )
        ranking, boot, labels = _ranking_of(
            dataset, data, source, judge, aspect, reference, weights_for, prompt_index, ties
        )
        result: dict[str, Any] = {
            "dataset": dataset.name,
            "source": source,
            "aspect": aspect.name if aspect else None,
            "scope": exclusions_json(data.scope, data.ratings.excluded),
            "bootstrap": {"resamples": n_resamples, "seed": seed, "unit": "prompt"},
            **ranking,
        }
        if judge is not None:
            humans, human_boot, human_labels = _ranking_of(
                dataset, data, HUMANS, None, aspect, None, weights_for, prompt_index, ties
            )
            result["versus_humans"] = ranking_agreement(ranking, boot, labels, humans, human_boot, human_labels)
    except RankingError as exc:
        raise ReportError(str(exc)) from None
    return result


def ranking_report(
    dataset: Dataset,
    source: str = HUMANS,
    aspect_name: str | None = None,
    reference: str | None = None,
    *,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    scope: RatingScope = ALL_RATINGS,
    ties: str | None = None,
) -> dict[str, Any]:
    """``ranking --dataset D [--source humans|JUDGE] [--ties half|drop|davidson] --json``: {"dataset", "source",
    "aspect", "scope", "bootstrap", "model", "ties", "reference", "n_comparisons", "systems": [...]} and, for a
    judge, "versus_humans" (Kendall's tau-b). ``ties`` (Bradley-Terry only) defaults to ``DEFAULT_TIES``."""
    judge = None if source == HUMANS else judge_or_raise(dataset, source)
    return cached_report(
        dataset,
        scope,
        [
            "ranking",
            source,
            judge.pk if judge else 0,
            aspect_name or "",
            reference or "",
            n_resamples,
            seed,
            ties or "",
        ],
        lambda data: compute_ranking_report(
            dataset, source, judge, aspect_name, reference, n_resamples, seed, data, ties
        ),
    )

"""One function per statistics report, used identically by the CLI, the API and the dashboard.

``agreement_report`` and ``judge_reports.correlation_report`` produce the stable JSON documented in the README
(``agreement N --json`` and ``correlate --dataset N --judge J --json``). Every report reads the ratings of one
``RatingScope`` (all ratings unless asked otherwise) and says which under ``"scope"``, with the excluded raters it
leaves out (or includes) under ``"scope"."exclusions"``. Results are cached in the Django cache under a key that
includes the scope and ``stats_version``, so any change to ratings, judge scores, judges, aspects, exclusions or
gold items makes the next request recompute.

Every report shares the loading, the rating scope, the cache key and the single-threaded BLAS defined at the top of
this module. The agreement reports are here; the judge-versus-humans and alternative-annotator reports are
`judge_reports`, the rankings `ranking_reports`, the dataset details `rating_details`, and the reports that need
more `decisions` and `prediction_powered`.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import wraps
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from django.core.cache import cache
from threadpoolctl import threadpool_limits

from annotations.models import Campaign, Dataset
from judging.analysis.preference_selectors import pairwise_judgments, stats_preferences
from judging.analysis.selectors import (
    ALL_RATINGS,
    Answers,
    AspectInfo,
    RatingRows,
    RatingScope,
    exclusions_json,
    judge_by_name,
    judge_scores,
    rating_scope,
    stats_adjudicated,
    stats_answers,
    stats_aspects,
    stats_ratings,
    stats_version,
)
from judging.analysis.span_reports import rater_span_agreement_report
from judging.analysis.span_selectors import (
    campaign_gold_expectations,
    campaign_gold_spans,
    campaign_has_span_aspects,
    campaign_spans,
    campaign_spans_version,
)
from judging.models import Judge
from judging.statistics.agreement import Ratings, agreement_summary
from judging.statistics.preference import human_pair_votes, pair_outcomes, preference_data, preference_summary

if TYPE_CHECKING:
    from judging.statistics.rater_models import RaterModelResult

# Bump when a statistic's definition changes so cached reports are not reused.
STATS_CODE_VERSION = "8"
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 0
CACHE_SECONDS = 24 * 3600
DISAGREEMENT_ROWS = 20
HISTOGRAM_MAX_BARS = 20
EXCERPT_CHARS = 400

T = TypeVar("T")


def single_threaded_blas(function: Callable[..., T]) -> Callable[..., T]:
    """The statistics multiply many small matrices; on a shared 2-core machine OpenBLAS threads spin and make
    them 2-3x slower than one thread, so each report runs with a single BLAS thread."""

    @wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        with threadpool_limits(limits=1, user_api="blas"):
            return function(*args, **kwargs)

    return wrapper


class JudgeNotFound(LookupError):
    pass


@dataclass(frozen=True)
class DatasetData:
    aspects: list[AspectInfo]
    answers: Answers
    ratings: RatingRows
    scope: RatingScope = ALL_RATINGS
    # Per aspect id, answer row -> adjudicated value; read only when the scope asks for adjudicated human scores.
    adjudicated: dict[int, dict[int, float]] = field(default_factory=dict)


def load_dataset_data(dataset: Dataset, scope: RatingScope = ALL_RATINGS) -> DatasetData:
    """Every answer of the dataset, and the ratings of the scope only: an answer outside it simply has none."""
    answers = stats_answers(dataset)
    return DatasetData(
        aspects=stats_aspects(dataset),
        answers=answers,
        ratings=stats_ratings(dataset, answers, scope),
        scope=scope,
        adjudicated=stats_adjudicated(answers) if scope.adjudicated else {},
    )


# The last few datasets' arrays, keyed by (dataset, scope, data version): one page computes several reports from
# the same ratings, and this keeps it to one round of queries. Entries of an old version are never read again.
_DATA_MEMO: dict[tuple[int, tuple[str, int | None, str | None, bool, bool, str], str], DatasetData] = {}
_DATA_MEMO_SIZE = 4
_DATA_MEMO_LOCK = threading.Lock()


def _dataset_data(dataset: Dataset, version: str, scope: RatingScope) -> DatasetData:
    key = (dataset.pk, scope.cache_key(), version)
    with _DATA_MEMO_LOCK:
        found = _DATA_MEMO.get(key)
    if found is not None:
        return found
    data = load_dataset_data(dataset, scope)
    with _DATA_MEMO_LOCK:
        _DATA_MEMO[key] = data
        while len(_DATA_MEMO) > _DATA_MEMO_SIZE:
            _DATA_MEMO.pop(next(iter(_DATA_MEMO)))
    return data


_VERSIONS_READ: ContextVar[dict[tuple[Any, ...], str] | None] = ContextVar("stats_versions_read", default=None)


@contextmanager
def one_stats_version() -> Iterator[None]:
    """Inside the block every report of a dataset and scope uses the version read first. A dashboard page shows
    several reports, and reading the version aggregates every rating and judge score of the dataset (about a
    second each at a million ratings); one page is one reading of the data anyway."""
    token = _VERSIONS_READ.set({})
    try:
        yield
    finally:
        _VERSIONS_READ.reset(token)


def _stats_version(dataset: Dataset, scope: RatingScope) -> str:
    read = _VERSIONS_READ.get()
    if read is None:
        return stats_version(dataset, scope)
    key = (dataset.pk, *scope.cache_key())
    if key not in read:
        read[key] = stats_version(dataset, scope)
    return read[key]


def cached_report(dataset: Dataset, scope: RatingScope, parts: Sequence[Any], compute: Callable[[DatasetData], T]) -> T:
    """A report of the dataset's data in a scope, computed once per statistics version: `parts` name the report and
    its options, `compute` builds it from the loaded data when the cache has no copy for this version."""
    version = _stats_version(dataset, scope)
    raw = json.dumps([STATS_CODE_VERSION, dataset.pk, scope.cache_key(), version, *parts], ensure_ascii=True)
    key = "evalsite:stats:" + hashlib.sha256(raw.encode()).hexdigest()
    found = cache.get(key)
    if found is not None:
        return found  # type: ignore[no-any-return]
    value = compute(_dataset_data(dataset, version, scope))
    cache.set(key, value, CACHE_SECONDS)
    return value


def aspect_rating_rows(data: DatasetData, aspect: AspectInfo, answer_mask: np.ndarray | None = None) -> np.ndarray:
    rows = data.ratings.aspect_id == aspect.id
    if answer_mask is not None:
        rows &= answer_mask[data.ratings.answer]
    return np.flatnonzero(rows)


def aspect_ratings(data: DatasetData, aspect: AspectInfo, answer_mask: np.ndarray | None = None) -> Ratings:
    """The aspect's non-missing ratings as pure-statistics input (unit = answer row)."""
    rows = aspect_rating_rows(data, aspect, answer_mask)
    rater_ids, rater_codes = np.unique(data.ratings.rater_id[rows], return_inverse=True)
    return Ratings(
        unit=data.ratings.answer[rows],
        rater=rater_codes.astype(np.int64),
        value=data.ratings.value[rows],
        n_units=int(data.answers.response_ids.size),
        rater_labels=tuple(data.ratings.rater_pseudonyms.get(int(r), str(r)) for r in rater_ids),
        raters_consistent=not any(int(r) in data.ratings.positional_raters for r in rater_ids),
    )


def human_means(data: DatasetData, aspect: AspectInfo) -> np.ndarray:
    """Mean of the non-missing ratings of each answer row (NaN when it has none). With adjudicated human scores,
    an answer's adjudicated value replaces that mean where there is one."""
    rows = aspect_rating_rows(data, aspect)
    size = data.answers.response_ids.size
    count = np.bincount(data.ratings.answer[rows], minlength=size).astype(np.float64)
    total = np.bincount(data.ratings.answer[rows], weights=data.ratings.value[rows], minlength=size)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = total / count
    if data.scope.adjudicated:
        for row, value in data.adjudicated.get(aspect.id, {}).items():
            means[row] = value
    if data.scope.rater_model != "none":
        return model_scores(data, aspect)
    return means


def aspect_rater_model_fit(data: DatasetData, aspect: AspectInfo, model: str) -> RaterModelResult | None:
    """The rater model fitted to the aspect's ratings, items keyed by answer row and raters by pseudonym; None when
    the raters are columns of an imported file rather than one person each."""
    from judging.statistics.rater_models import fit_rater_model  # noqa: PLC0415 - scipy-free but heavy to fit

    ratings = aspect_ratings(data, aspect)
    if not ratings.raters_consistent:
        return None
    triples = [
        (int(unit), ratings.rater_labels[int(rater)], float(value))
        for unit, rater, value in zip(ratings.unit, ratings.rater, ratings.value, strict=True)
    ]
    return fit_rater_model(model, triples)


def model_scores(data: DatasetData, aspect: AspectInfo) -> np.ndarray:
    """Each answer row's human score estimated by the scope's rater model from all of the aspect's ratings: the
    adjusted score of the severity model, the posterior label of Dawid–Skene and MACE; NaN for an answer without
    ratings, and everywhere when the model is undefined (raters that are file columns, too little data)."""
    scores = np.full(data.answers.response_ids.size, np.nan)
    result = aspect_rater_model_fit(data, aspect, data.scope.rater_model)
    if result is None:
        return scores
    for item in result["items"]:
        value = item["score"]["value"]
        scores[int(str(item["item"]))] = float(item["label"] if value is None else value)
    return scores


# ---------------------------------------------------------------- agreement


def compute_preferences(
    dataset: Dataset,
    scope: RatingScope = ALL_RATINGS,
    *,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, Any]:
    """The preference question of the scope: win rates, "none is appropriate", the raters' agreement on the
    preferred system and, per pairwise judge run, how often it prefers what the humans prefer."""
    rows = stats_preferences(dataset, scope)
    data = preference_data(rows.turn_ids, rows.candidates, rows.preferred, rows.none_appropriate)
    judges = {name: pair_outcomes(judgments) for name, judgments in pairwise_judgments(dataset).items()}
    votes = human_pair_votes(rows.turn_ids, rows.candidates, rows.preferred, rows.tie) if judges else None
    return preference_summary(data, judges, n_resamples=n_resamples, seed=seed, human_votes=votes)


@single_threaded_blas
def compute_agreement_report(
    dataset: Dataset,
    data: DatasetData | None = None,
    *,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, Any]:
    data = data or load_dataset_data(dataset)
    return {
        "dataset": dataset.name,
        "scope": exclusions_json(data.scope, data.ratings.excluded),
        "aspects": {
            aspect.name: agreement_summary(
                aspect_ratings(data, aspect), aspect.level, n_resamples=n_resamples, seed=seed
            )
            for aspect in data.aspects
        },
        "preferences": compute_preferences(dataset, data.scope, n_resamples=n_resamples, seed=seed),
    }


def agreement_report(dataset: Dataset, scope: RatingScope = ALL_RATINGS) -> dict[str, Any]:
    """``agreement N --json``: {"dataset": N, "scope": {...}, "aspects": {A: {...}}, "preferences": {...}}
    (see README)."""
    return cached_report(dataset, scope, ["agreement"], lambda data: compute_agreement_report(dataset, data))


def campaign_span_agreement(campaign: Campaign) -> dict[str, Any]:
    """The raters' span agreement on each span aspect of a campaign (see span_reports), cached like the reports:
    the key holds the campaign scope's stats_version, which moves with ratings, exclusions and gold, the
    campaign's error spans, which a correction may move without changing a rating's score, and what the gold items
    expect, which a researcher may edit without changing which items are gold."""
    if not campaign_has_span_aspects(campaign):
        # Most campaigns have none: answer before reading the dataset's version, which aggregates all its ratings.
        return {"aspects": [], "excluded": [], "bootstrap": {}}
    dataset = campaign.dataset
    scope = rating_scope(campaign=campaign)
    marks = campaign_spans_version(campaign)
    gold = campaign_gold_expectations(campaign)
    raw = json.dumps(
        [STATS_CODE_VERSION, "span-agreement", campaign.pk, _stats_version(dataset, scope), marks, gold], default=str
    )
    key = "evalsite:stats:" + hashlib.sha256(raw.encode()).hexdigest()
    found = cache.get(key)
    if found is not None:
        return found  # type: ignore[no-any-return]
    with threadpool_limits(limits=1, user_api="blas"):
        spans = campaign_spans(campaign)
        value = rater_span_agreement_report(spans, campaign_gold_spans(campaign, spans.aspects))
    cache.set(key, value, CACHE_SECONDS)
    return value


def system_mask(data: DatasetData, system_key: str | None) -> np.ndarray | None:
    if not system_key:
        return None
    return np.asarray([key == system_key for key in data.answers.system_keys], dtype=bool)


def pick_aspect(aspects: list[AspectInfo], name: str | None) -> AspectInfo | None:
    for aspect in aspects:
        if aspect.name == name:
            return aspect
    return aspects[0] if aspects else None


def judge_or_raise(dataset: Dataset, judge_name: str) -> Judge:
    """The dataset's judge of that name; JudgeNotFound, naming both, when there is none."""
    judge = judge_by_name(dataset, judge_name)
    if judge is None:
        raise JudgeNotFound(f"dataset {dataset.name!r} has no judge named {judge_name!r}")
    return judge


# ---------------------------------------------------------------- the judge and aspects a report asks for


class ReportError(ValueError):
    """A request the report cannot answer; the message names the problem."""


def aspects_or_error(aspects: list[AspectInfo], aspect_name: str | None) -> list[AspectInfo]:
    """Every aspect when none is named, else the one named; a ReportError listing the aspects when it is unknown."""
    if aspect_name is None:
        return aspects
    chosen = [aspect for aspect in aspects if aspect.name == aspect_name]
    if not chosen:
        names = ", ".join(aspect.name for aspect in aspects) or "none"
        raise ReportError(f"the dataset has no aspect named {aspect_name!r}; its aspects are: {names}")
    return chosen


def judged_aspects(
    judge: Judge, data: DatasetData, aspect_name: str | None, *, where: str = ""
) -> list[tuple[AspectInfo, np.ndarray]]:
    """The aspects asked for (every aspect of the rubric when `aspect_name` is None), each with the judge's scores
    on the answers. An aspect the judge never scored is left out, or is an error when it is the one asked for; a
    judge that scored none of them is an error."""
    scores = judge_scores(judge, data.answers)
    judged = []
    for aspect in aspects_or_error(data.aspects, aspect_name):
        values = scores.get(aspect.name)
        if values is None or not np.isfinite(values).any():
            if aspect_name is not None:
                raise ReportError(f"judge {judge.name!r} has no score on aspect {aspect.name!r}{where}")
            continue
        judged.append((aspect, values))
    if not judged:
        raise ReportError(f"judge {judge.name!r} scores no aspect of the dataset's rubric")
    return judged

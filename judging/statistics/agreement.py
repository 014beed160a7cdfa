"""Agreement between raters for one aspect, as pure numpy functions.

Input is long format: one entry per non-missing rating (unit, rater, value). Missing ratings
(null, "NA", declared codes) are simply absent, which is how every coefficient here treats them.

Conventions shared by every function:
- A unit (an answer) with fewer than two ratings carries no information about agreement; the
  coefficients that are averages over units skip it (alpha does so by its own definition).
- Undefined results are ``{"value": None, "undefined": reason}`` (see ``results``), never NaN.
- Rater identity matters only to the two-way ICCs and to the per-rater table; everything else is
  computed from the per-unit multiset of values, so positional rater ids ("#1", "#2") are harmless.

Why one module of this size: every coefficient here (Krippendorff's alpha, Fleiss' kappa, Gwet's AC1, percent
agreement, the ICCs) reads the same unit-by-value counts, built once per aspect, and the summary chooses among them
by measurement level; split, those counts would be built or passed in several places.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import numpy as np
import numpy.typing as npt

from judging.statistics.arrays import FloatArray, IntArray
from judging.statistics.results import Interval, Stat, defined, interval, undefined, undefined_interval

if TYPE_CHECKING:
    from scipy import sparse

Level = Literal["nominal", "ordinal", "interval"]
LEVELS: tuple[Level, ...] = ("nominal", "ordinal", "interval")

# Per-unit value counts (units x distinct values) up to this many cells are a dense array (at most 32 MB); larger
# tables, which only many distinct continuous values make, are sparse. scipy.sparse is imported only then: it costs a
# command about 0.3 s of CPU to import, more than the agreement statistics of a typical dataset take to compute.
_DENSE_COUNT_CELLS = 4_000_000
# Bounds the dense (resamples x units) blocks of the bootstrap to a few tens of MB.
_BOOTSTRAP_CELLS_PER_CHUNK = 4_000_000
# Two values closer than this are the same value (guards the +-1 boundary against float noise).
_VALUE_TOLERANCE = 1e-9

# Documented outlier rule for the per-rater table.
OUTLIER_MIN_OVERLAP = 10
OUTLIER_MIN_CORRELATION = 0.2
OUTLIER_MAX_MEAN_SHIFT_SD = 0.5
OUTLIER_RULE = (
    f"flagged when, on at least {OUTLIER_MIN_OVERLAP} answers shared with other raters, the Pearson "
    f"correlation with the mean of the other raters is below {OUTLIER_MIN_CORRELATION}, or the mean "
    f"difference from the other raters exceeds {OUTLIER_MAX_MEAN_SHIFT_SD} standard deviations of all "
    "ratings of the aspect"
)


@dataclass(frozen=True)
class Ratings:
    """Non-missing ratings of one aspect in long format."""

    unit: IntArray
    rater: IntArray
    value: FloatArray
    n_units: int
    rater_labels: tuple[str, ...]
    raters_consistent: bool

    @property
    def n_ratings(self) -> int:
        return int(self.value.size)


def _is_missing(value: Any) -> bool:
    if value is None:
        return True
    try:
        return bool(np.isnan(float(value)))
    except (TypeError, ValueError):
        return True


def ratings_from_long(
    units: Sequence[Hashable],
    raters: Sequence[Hashable],
    values: Sequence[float | None],
    *,
    raters_consistent: bool = True,
) -> Ratings:
    """Build ``Ratings`` from parallel sequences; None/NaN values count as missing and are dropped."""
    if not (len(units) == len(raters) == len(values)):
        raise ValueError("units, raters and values must have the same length")
    unit_index: dict[Hashable, int] = {}
    rater_index: dict[Hashable, int] = {}
    unit_codes: list[int] = []
    rater_codes: list[int] = []
    kept: list[float] = []
    for unit_key, rater_key, value in zip(units, raters, values, strict=True):
        unit_code = unit_index.setdefault(unit_key, len(unit_index))
        if _is_missing(value):
            continue
        unit_codes.append(unit_code)
        rater_codes.append(rater_index.setdefault(rater_key, len(rater_index)))
        kept.append(float(value))  # type: ignore[arg-type]
    return Ratings(
        unit=np.asarray(unit_codes, dtype=np.int64),
        rater=np.asarray(rater_codes, dtype=np.int64),
        value=np.asarray(kept, dtype=np.float64),
        n_units=len(unit_index),
        rater_labels=tuple(str(key) for key in rater_index),
        raters_consistent=raters_consistent,
    )


def ratings_from_matrix(
    matrix: npt.ArrayLike,
    *,
    rater_labels: Sequence[str] | None = None,
    raters_consistent: bool = True,
) -> Ratings:
    """Build ``Ratings`` from a units x raters matrix with NaN for missing."""
    data = np.asarray(matrix, dtype=np.float64)
    if data.ndim != 2:
        raise ValueError("matrix must be two-dimensional (units x raters)")
    present = ~np.isnan(data)
    unit, rater = np.nonzero(present)
    labels = tuple(rater_labels) if rater_labels is not None else tuple(f"#{i + 1}" for i in range(data.shape[1]))
    return Ratings(
        unit=unit.astype(np.int64),
        rater=rater.astype(np.int64),
        value=data[present],
        n_units=int(data.shape[0]),
        rater_labels=labels,
        raters_consistent=raters_consistent,
    )


CountTable: TypeAlias = "FloatArray | sparse.csr_matrix"


def _count_table(rows: IntArray, columns: IntArray, *, shape: tuple[int, int]) -> CountTable:
    """How many (row, column) pairs fall in each cell: dense when small (see _DENSE_COUNT_CELLS), else sparse."""
    n_rows, n_columns = shape
    if n_rows * n_columns <= _DENSE_COUNT_CELLS:
        cells = np.bincount(rows * n_columns + columns, minlength=n_rows * n_columns)
        return cells.reshape(shape).astype(np.float64)
    from scipy import sparse  # noqa: PLC0415 - see _DENSE_COUNT_CELLS

    table = sparse.csr_matrix((np.ones(rows.size), (rows, columns)), shape=shape)
    table.sum_duplicates()
    return table


def _row_sums_of_squares(table: CountTable) -> FloatArray:
    squares = table * table if isinstance(table, np.ndarray) else table.multiply(table)
    return np.asarray(squares.sum(axis=1), dtype=np.float64).ravel()


def _column_sums(table: CountTable) -> FloatArray:
    return np.asarray(table.sum(axis=0), dtype=np.float64).ravel()


@dataclass(frozen=True)
class _UnitCounts:
    """Per-unit value counts of the units with at least ``min_ratings`` ratings."""

    counts: CountTable  # units x distinct values
    domain: FloatArray  # sorted distinct values
    per_unit: FloatArray  # ratings per kept unit


def _unit_counts(ratings: Ratings, *, min_ratings: int) -> _UnitCounts:
    domain, value_class = np.unique(ratings.value, return_inverse=True)
    per_unit_all = np.bincount(ratings.unit, minlength=ratings.n_units)
    kept_units = np.flatnonzero(per_unit_all >= min_ratings)
    position = np.full(ratings.n_units, -1, dtype=np.int64)
    position[kept_units] = np.arange(kept_units.size)
    rows = position[ratings.unit]
    keep = rows >= 0
    counts = _count_table(rows[keep], value_class[keep], shape=(kept_units.size, domain.size))
    return _UnitCounts(
        counts=counts, domain=domain.astype(np.float64), per_unit=per_unit_all[kept_units].astype(np.float64)
    )


# Units with the same value counts (e.g. ratings {3, 3, 4}) contribute identically to every coefficient, so the
# bootstrap works on these patterns: with 3 raters on a 1-5 scale a few dozen instead of thousands of units.
_MAX_PATTERN_VALUES = 64


@dataclass(frozen=True)
class _Patterns:
    counts: _UnitCounts  # one row per distinct pattern
    multiplicity: FloatArray  # units having each pattern
    of_unit: IntArray  # pattern of each unit of the original counts


def _compress(unit_counts: _UnitCounts) -> _Patterns:
    n_units = unit_counts.per_unit.size
    if unit_counts.domain.size > _MAX_PATTERN_VALUES or n_units == 0:
        return _Patterns(unit_counts, np.ones(n_units), np.arange(n_units, dtype=np.int64))
    table = unit_counts.counts
    dense = (table if isinstance(table, np.ndarray) else table.toarray()).astype(np.int64)
    patterns, of_unit, multiplicity = np.unique(dense, axis=0, return_inverse=True, return_counts=True)
    compressed = _UnitCounts(
        counts=patterns.astype(np.float64),
        domain=unit_counts.domain,
        per_unit=patterns.sum(axis=1).astype(np.float64),
    )
    return _Patterns(compressed, multiplicity.astype(np.float64), of_unit.ravel().astype(np.int64))


def _bootstrap_weights(rng: np.random.Generator, n_resamples: int, patterns: _Patterns) -> FloatArray:
    """How many units of each pattern each resample draws: drawing units uniformly with replacement makes the
    pattern counts multinomial with the patterns' shares as probabilities."""
    n_units = int(patterns.multiplicity.sum())
    shares = patterns.multiplicity / n_units
    return rng.multinomial(n_units, shares, size=n_resamples).astype(np.float64)


def _alpha_batch(unit_counts: _UnitCounts, weights: FloatArray, level: Level) -> FloatArray:
    """Alpha for each row of unit weights (rows = resamples; a row of ones is the plain estimate).

    Works from the coincidence counts without building the V x V coincidence matrix: nominal uses
    counts of unequal pairs; interval uses squared differences; ordinal is interval on the
    resample's mid-ranks R_c = (values below c) + n_c / 2, because Krippendorff's ordinal metric
    equals (R_k - R_c)^2. NaN marks a resample without variation (caller reports undefined).
    """
    counts = unit_counts.counts
    m = unit_counts.per_unit
    n_total = weights @ m  # pairable values per resample
    class_totals = np.asarray((counts.T @ weights.T).T)  # resamples x values
    with np.errstate(divide="ignore", invalid="ignore"):
        if level == "nominal":
            same_pairs = _row_sums_of_squares(counts)
            observed = weights @ ((m * m - same_pairs) / (m - 1.0))
            expected = n_total * n_total - np.sum(class_totals * class_totals, axis=1)
        else:
            if level == "interval":
                centre = float(np.average(unit_counts.domain, weights=_column_sums(counts)))
                # Interval distances do not depend on the resample: one column serves every row.
                class_values = (unit_counts.domain - centre)[:, None]
            else:
                below = np.cumsum(class_totals, axis=1) - class_totals
                mid_ranks = below + class_totals / 2.0
                mean_rank = np.sum(mid_ranks * class_totals, axis=1) / n_total
                class_values = (mid_ranks - mean_rank[:, None]).T  # values x resamples
            unit_sum = np.asarray(counts @ class_values)  # units x resamples
            unit_square_sum = np.asarray(counts @ (class_values * class_values))
            per_unit = (2.0 * m[:, None] * unit_square_sum - 2.0 * unit_sum * unit_sum) / (m[:, None] - 1.0)
            observed = weights @ per_unit[:, 0] if per_unit.shape[1] == 1 else np.sum(weights.T * per_unit, axis=0)
            total_sum = np.sum(class_totals * class_values.T, axis=1)
            total_square_sum = np.sum(class_totals * class_values.T**2, axis=1)
            expected = 2.0 * n_total * total_square_sum - 2.0 * total_sum * total_sum
        alpha = 1.0 - (n_total - 1.0) * observed / expected
    alpha[~(expected > 0)] = np.nan
    return np.asarray(alpha, dtype=np.float64)


def _alpha_undefined_reason(unit_counts: _UnitCounts) -> str | None:
    if unit_counts.per_unit.size == 0:
        return "no answer has two or more ratings"
    if np.count_nonzero(_column_sums(unit_counts.counts)) < 2:
        return "every rating has the same value"
    return None


def krippendorff_alpha(ratings: Ratings, level: Level) -> Stat:
    """Krippendorff's alpha at ``level``; rater identity is ignored and missing values allowed."""
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}")
    unit_counts = _unit_counts(ratings, min_ratings=2)
    reason = _alpha_undefined_reason(unit_counts)
    if reason:
        return undefined(reason)
    patterns = _compress(unit_counts)
    value = _alpha_batch(patterns.counts, patterns.multiplicity[None, :], level)[0]
    return defined(value) if np.isfinite(value) else undefined("no variation between values")


def alpha_bootstrap_ci(
    ratings: Ratings,
    level: Level,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> Interval:
    """Percentile bootstrap CI of alpha, resampling units (answers) with replacement.

    Resamples that happen to contain a single value have no alpha and are left out; if none
    remains, the interval is undefined.
    """
    unit_counts = _unit_counts(ratings, min_ratings=2)
    reason = _alpha_undefined_reason(unit_counts)
    if reason:
        return undefined_interval(reason)
    patterns = _compress(unit_counts)
    rng = np.random.default_rng(seed)
    chunk = max(1, _BOOTSTRAP_CELLS_PER_CHUNK // max(patterns.multiplicity.size, 1))
    # The weights are drawn chunk by chunk, never all at once: successive draws from one generator give the same
    # rows as one large draw, and the full (resamples x patterns) table reaches gigabytes with many patterns.
    alphas = np.concatenate(
        [
            _alpha_batch(patterns.counts, _bootstrap_weights(rng, min(chunk, n_resamples - start), patterns), level)
            for start in range(0, n_resamples, chunk)
        ]
    )
    alphas = alphas[np.isfinite(alphas)]
    if alphas.size == 0:
        return undefined_interval("no bootstrap resample had variation")
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(alphas, [tail, 1.0 - tail])
    return interval(low, high)


def fleiss_kappa(ratings: Ratings) -> Stat:
    """Fleiss' kappa; defined only when every rated answer has the same number of ratings."""
    unit_counts = _unit_counts(ratings, min_ratings=1)
    m = unit_counts.per_unit
    if m.size == 0:
        return undefined("no ratings")
    if m.min() != m.max():
        return undefined(f"unequal numbers of ratings per answer ({int(m.min())} to {int(m.max())})")
    raters = float(m[0])
    if raters < 2:
        return undefined("one rating per answer")
    table = unit_counts.counts
    n_units = float(m.size)
    proportions = _column_sums(table) / (n_units * raters)
    agreement_per_unit = (_row_sums_of_squares(table) - raters) / (raters * (raters - 1.0))
    observed = float(agreement_per_unit.mean())
    expected = float(np.sum(proportions * proportions))
    if expected >= 1.0:
        return undefined("every rating has the same value")
    return defined((observed - expected) / (1.0 - expected))


def gwet_ac1(ratings: Ratings) -> Stat:
    """Gwet's AC1 (unweighted), irrCAC ``gwet.ac1.raw`` definitions, categories = values observed.

    pa averages, over answers with r_i >= 2 ratings, sum_k r_ik (r_ik - 1) / (r_i (r_i - 1));
    pi_k averages r_ik / r_i over answers with at least one rating; pe = sum_k pi_k (1 - pi_k) / (q - 1).
    With a single category observed irrCAC sets pe just below 1, which makes AC1 equal 1 (every pair agrees);
    this returns exactly 1 there.
    """
    unit_counts = _unit_counts(ratings, min_ratings=1)
    m = unit_counts.per_unit
    q = unit_counts.domain.size
    if m.size == 0:
        return undefined("no ratings")
    pairable = m >= 2
    if not pairable.any():
        return undefined("no answer has two or more ratings")
    if q < 2:
        return defined(1.0)
    table = unit_counts.counts
    same = _row_sums_of_squares(table) - m
    observed = float(np.mean(same[pairable] / (m[pairable] * (m[pairable] - 1.0))))
    shares = table * (1.0 / m)[:, None] if isinstance(table, np.ndarray) else table.multiply((1.0 / m)[:, None])
    prevalence = _column_sums(shares) / m.size
    expected = float(np.sum(prevalence * (1.0 - prevalence)) / (q - 1.0))
    if expected >= 1.0:
        return undefined("chance agreement is 1")
    return defined((observed - expected) / (1.0 - expected))


_NONE_PAIRABLE = "no answer has two or more ratings"


def _pairable(ratings: Ratings) -> tuple[IntArray, IntArray, FloatArray] | None:
    """Each answer's number of ratings, then the answer and value of every rating of an answer with two or more;
    None when no answer has two."""
    per_unit = np.bincount(ratings.unit, minlength=ratings.n_units)
    in_pairable = per_unit[ratings.unit] >= 2
    if not in_pairable.any():
        return None
    return per_unit, ratings.unit[in_pairable], ratings.value[in_pairable]


def percent_agreement(ratings: Ratings) -> dict[str, Stat]:
    """Pairwise percent agreement: per answer, the share of rater pairs whose values are equal
    (``exact``) or at most 1 apart (``within_1``), averaged over answers with two or more ratings.
    ``exact`` equals the observed agreement of Fleiss' kappa and AC1.
    """
    pairable = _pairable(ratings)
    if pairable is None:
        return {"exact": undefined(_NONE_PAIRABLE), "within_1": undefined(_NONE_PAIRABLE)}
    per_unit, unit, value = pairable
    spread = float(value.max() - value.min()) + 4.0
    # One sorted key per rating keeps units apart, so a window search counts neighbours in the same unit.
    key = unit.astype(np.float64) * spread + (value - value.min())
    order = np.sort(key)
    results: dict[str, Stat] = {}
    for name, width in (("exact", 0.0), ("within_1", 1.0)):
        low = np.searchsorted(order, key - width - _VALUE_TOLERANCE, side="left")
        high = np.searchsorted(order, key + width + _VALUE_TOLERANCE, side="right")
        partners = (high - low - 1).astype(np.float64)
        m = per_unit[unit].astype(np.float64)
        pair_share = np.bincount(unit, weights=partners / (m * (m - 1.0)), minlength=ratings.n_units)
        results[name] = defined(float(pair_share[per_unit >= 2].mean()))
    return results


def _one_way_icc(ratings: Ratings) -> dict[str, Stat]:
    pairable = _pairable(ratings)
    if pairable is None:
        return {"ICC1": undefined(_NONE_PAIRABLE), "ICC1k": undefined(_NONE_PAIRABLE)}
    per_unit_all, unit, value = pairable
    used_units = np.flatnonzero(per_unit_all >= 2)
    m = per_unit_all[used_units].astype(np.float64)
    n_units = float(used_units.size)
    n_total = float(m.sum())
    if n_units < 2:
        reason = "fewer than two answers with two or more ratings"
        return {"ICC1": undefined(reason), "ICC1k": undefined(reason)}
    unit_means_all = np.bincount(unit, weights=value, minlength=ratings.n_units) / np.maximum(per_unit_all, 1)
    grand = float(value.mean())
    between = float(np.sum(m * (unit_means_all[used_units] - grand) ** 2)) / (n_units - 1.0)
    within = float(np.sum((value - unit_means_all[unit]) ** 2)) / (n_total - n_units)
    # Average group size for unbalanced one-way designs (k0); equals k when every answer has k ratings.
    k0 = (n_total - float(np.sum(m * m)) / n_total) / (n_units - 1.0)
    if between <= 0.0:
        reason = "no variance between answers"
        return {"ICC1": undefined(reason), "ICC1k": undefined(reason)}
    return {
        "ICC1": defined((between - within) / (between + (k0 - 1.0) * within)),
        "ICC1k": defined((between - within) / between),
    }


def _two_way_icc(ratings: Ratings) -> dict[str, Stat]:
    names = ("ICC2", "ICC2k", "ICC3", "ICC3k")
    n_raters = len(np.unique(ratings.rater))
    if n_raters < 2:
        return {name: undefined("fewer than two raters") for name in names}
    table = np.full((ratings.n_units, int(ratings.rater.max()) + 1), np.nan)
    table[ratings.unit, ratings.rater] = ratings.value
    table = table[:, ~np.all(np.isnan(table), axis=0)]
    complete = table[~np.any(np.isnan(table), axis=1)]
    n, k = complete.shape
    if n < 2:
        return {name: undefined(f"fewer than two answers were rated by all {k} raters") for name in names}
    grand = complete.mean()
    ss_rows = k * float(np.sum((complete.mean(axis=1) - grand) ** 2))
    ss_cols = n * float(np.sum((complete.mean(axis=0) - grand) ** 2))
    ss_total = float(np.sum((complete - grand) ** 2))
    ms_rows = ss_rows / (n - 1)
    ms_cols = ss_cols / (k - 1)
    ms_error = (ss_total - ss_rows - ss_cols) / ((n - 1) * (k - 1))
    if ms_rows <= 0.0:
        return {name: undefined("no variance between answers") for name in names}
    return {
        "ICC2": defined((ms_rows - ms_error) / (ms_rows + (k - 1) * ms_error + k * (ms_cols - ms_error) / n)),
        "ICC2k": defined((ms_rows - ms_error) / (ms_rows + (ms_cols - ms_error) / n)),
        "ICC3": defined((ms_rows - ms_error) / (ms_rows + (k - 1) * ms_error)),
        "ICC3k": defined((ms_rows - ms_error) / ms_rows),
    }


def intraclass_correlations(ratings: Ratings) -> dict[str, Stat]:
    """ICC1/ICC1k (one-way random, unbalanced answers allowed) always; ICC2/2k/3/3k (two-way, on the
    answers rated by every rater) only when rater ids are the same people across answers."""
    result = _one_way_icc(ratings)
    if ratings.raters_consistent:
        result.update(_two_way_icc(ratings))
    return result


def _pearson(x: FloatArray, y: FloatArray) -> Stat:
    if x.size < 3:
        return undefined("fewer than 3 pairs")
    dx = x - x.mean()
    dy = y - y.mean()
    sxx = float(np.dot(dx, dx))
    syy = float(np.dot(dy, dy))
    if sxx == 0.0 or syy == 0.0:
        return undefined("constant input")
    return defined(max(-1.0, min(1.0, float(np.dot(dx, dy)) / np.sqrt(sxx * syy))))


def rater_statistics(ratings: Ratings) -> list[dict[str, Any]]:
    """Per rater: ratings count, mean, and agreement with the mean of the other raters on the same
    answers (Pearson and mean difference), plus an outlier flag following ``OUTLIER_RULE``."""
    per_unit = np.bincount(ratings.unit, minlength=ratings.n_units).astype(np.float64)
    unit_sum = np.bincount(ratings.unit, weights=ratings.value, minlength=ratings.n_units)
    shared = per_unit[ratings.unit] >= 2
    with np.errstate(divide="ignore", invalid="ignore"):
        others_mean = (unit_sum[ratings.unit] - ratings.value) / (per_unit[ratings.unit] - 1.0)
    spread = float(ratings.value.std()) if ratings.value.size else 0.0
    order = np.argsort(ratings.rater, kind="stable")
    boundaries = np.searchsorted(ratings.rater[order], np.arange(len(ratings.rater_labels) + 1))
    rows: list[dict[str, Any]] = []
    for rater_code, label in enumerate(ratings.rater_labels):
        members = order[boundaries[rater_code] : boundaries[rater_code + 1]]
        if members.size == 0:
            continue
        overlap = members[shared[members]]
        own = ratings.value[overlap]
        others = others_mean[overlap]
        correlation = _pearson(own, others)
        mean_difference = defined(float(np.mean(own - others))) if overlap.size else undefined("no shared answers")
        flags: list[str] = []
        if overlap.size >= OUTLIER_MIN_OVERLAP:
            if correlation["value"] is not None and correlation["value"] < OUTLIER_MIN_CORRELATION:
                flags.append("low_correlation")
            shift = mean_difference["value"]
            if shift is not None and spread > 0 and abs(shift) > OUTLIER_MAX_MEAN_SHIFT_SD * spread:
                flags.append("mean_shift")
        rows.append(
            {
                "rater": label,
                "count": int(members.size),
                "mean": float(ratings.value[members].mean()),
                "n_shared": int(overlap.size),
                "correlation_with_others": correlation,
                "mean_difference_from_others": mean_difference,
                "outlier": bool(flags),
                "flags": flags,
            }
        )
    return rows


def primary_level(measurement_level: str) -> Level:
    """The alpha level that fits a rubric level; ratio data use the interval metric."""
    if measurement_level in ("nominal", "ordinal", "interval"):
        return measurement_level  # type: ignore[return-value]
    if measurement_level == "ratio":
        return "interval"
    raise ValueError(f"unknown measurement level {measurement_level!r}")


def agreement_summary(
    ratings: Ratings,
    measurement_level: str,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """Everything the ``agreement`` report shows for one aspect, in its stable JSON shape."""
    level = primary_level(measurement_level)
    rated_units = int(np.unique(ratings.unit).size)
    return {
        "level": measurement_level,
        "n_items": rated_units,
        "n_ratings": ratings.n_ratings,
        "alpha": {name: krippendorff_alpha(ratings, name) for name in LEVELS},
        "alpha_ci95": alpha_bootstrap_ci(ratings, level, n_resamples=n_resamples, seed=seed),
        "fleiss_kappa": fleiss_kappa(ratings),
        "gwet_ac1": gwet_ac1(ratings),
        "icc": intraclass_correlations(ratings),
        "percent_agreement": percent_agreement(ratings),
    }

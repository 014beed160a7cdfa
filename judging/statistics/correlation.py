"""Judge versus humans for one aspect, as pure numpy/scipy functions.

Inputs are per-answer arrays: the human score (mean of the non-missing ratings), the judge score,
the prompt (turn) and the system of each answer. Missing scores are NaN and drop the answer.

Bootstrap CIs resample prompts (turns) with replacement, because prompts are the sampled units of
an evaluation while systems are chosen; all answers of a drawn prompt come along. Within a resample
every coefficient is computed exactly as on a materialised resample (duplicated answers are tied
in both scores), but from weights, so 1,000 resamples cost a few array passes instead of 1,000
scipy calls.

The levels share one set of coefficient kernels (the tie-aware ranks, Kendall's tau from a contingency table, the
weighted and padded forms that keep large groups fast), so they stay together. The human ceiling built on them is
judging.statistics.human_ceiling; the per-system table, confusion matrix and bias checks are
judging.statistics.judge_tables.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from judging.statistics.arrays import FloatArray, IntArray
from judging.statistics.intervals import analytic_intervals
from judging.statistics.results import Interval, Stat, defined, interval, undefined, undefined_interval

# scipy.stats takes ~1.8 s to import (nearly all of scipy); the functions that use it import it, so that loading
# the app and computing agreement do not pay for it.

COEFFICIENTS = ("pearson", "spearman", "kendall")
LEVELS = ("response", "per_prompt", "per_system", "system")
MIN_PAIRS = 3

_CELLS_PER_CHUNK = 4_000_000
# Above this many (x value, y value) cells the weighted Kendall falls back to materialised resamples.
_MAX_CONTINGENCY_CELLS = 100_000
_PAIRWISE_MAX_GROUP = 48


def _round_array(values: FloatArray, digits: int = 12) -> FloatArray:
    """Vectorised ``round_significant``: equal-in-exact-arithmetic means must compare equal."""
    out = np.array(values, dtype=np.float64, copy=True)
    finite = np.isfinite(out) & (out != 0)
    if finite.any():
        magnitude = np.floor(np.log10(np.abs(out[finite])))
        scale = 10.0 ** (digits - 1 - magnitude)
        out[finite] = np.round(out[finite] * scale) / scale
    return out


@dataclass(frozen=True)
class Paired:
    """Answers that have both a human and a judge score."""

    human: FloatArray
    judge: FloatArray
    prompt: IntArray
    system: IntArray
    system_labels: tuple[str, ...]

    @property
    def n(self) -> int:
        return int(self.human.size)


def paired_scores(
    human: Sequence[float] | FloatArray,
    judge: Sequence[float] | FloatArray,
    prompt: Sequence[Any],
    system: Sequence[Any],
) -> Paired:
    """Align per-answer scores, drop answers missing either score and round to 12 significant digits."""
    human_a = np.asarray(human, dtype=np.float64)
    judge_a = np.asarray(judge, dtype=np.float64)
    if not (human_a.shape == judge_a.shape == (len(prompt),) == (len(system),)):
        raise ValueError("human, judge, prompt and system must have the same length")
    keep = np.isfinite(human_a) & np.isfinite(judge_a)
    prompt_codes = _codes([p for p, k in zip(prompt, keep, strict=True) if k])
    system_keys = [s for s, k in zip(system, keep, strict=True) if k]
    labels = tuple(dict.fromkeys(str(s) for s in system_keys))
    index = {label: i for i, label in enumerate(labels)}
    return Paired(
        human=_round_array(human_a[keep]),
        judge=_round_array(judge_a[keep]),
        prompt=prompt_codes,
        system=np.asarray([index[str(s)] for s in system_keys], dtype=np.int64),
        system_labels=labels,
    )


def _codes(keys: Sequence[Any]) -> IntArray:
    index: dict[Any, int] = {}
    return np.asarray([index.setdefault(key, len(index)) for key in keys], dtype=np.int64)


# ---------------------------------------------------------------- point estimates


def coefficients(x: FloatArray, y: FloatArray) -> dict[str, Stat]:
    """Pearson, Spearman and Kendall tau-b (scipy), or the reason they are undefined."""
    from scipy import stats  # noqa: PLC0415 -- ~1.8 s to import, see the module's imports

    reason = _undefined_reason(x, y)
    if reason:
        return {name: undefined(reason) for name in COEFFICIENTS}
    return {
        "pearson": defined(stats.pearsonr(x, y).statistic),
        "spearman": defined(stats.spearmanr(x, y).statistic),
        "kendall": defined(stats.kendalltau(x, y, variant="b").statistic),
    }


def _undefined_reason(x: FloatArray, y: FloatArray) -> str | None:
    if x.size < MIN_PAIRS:
        return f"fewer than {MIN_PAIRS} pairs"
    if np.all(x == x[0]) or np.all(y == y[0]):
        return "constant input"
    return None


def _group_coefficients(x: FloatArray, y: FloatArray, group: IntArray) -> tuple[IntArray, FloatArray, IntArray]:
    """Per group: (group ids, coefficients [groups x 3] with NaN where undefined, sizes).

    Groups are padded into (groups x size) blocks and compared pairwise, which equals scipy's
    tie-corrected definitions (average ranks; tau-b) and avoids one scipy call per group.
    """
    groups, inverse, sizes = np.unique(group, return_inverse=True, return_counts=True)
    result = np.full((groups.size, 3), np.nan)
    order = np.argsort(inverse, kind="stable")
    starts = np.concatenate([[0], np.cumsum(sizes)])
    # Large groups (e.g. one system's answers) are cheaper through scipy than through pairwise blocks.
    large = np.flatnonzero(sizes > _PAIRWISE_MAX_GROUP)
    for g in large:
        members = order[starts[g] : starts[g + 1]]
        result[g] = _large_group_coefficients(x[members], y[members])
    by_size = np.argsort(sizes, kind="stable")
    by_size = by_size[sizes[by_size] <= _PAIRWISE_MAX_GROUP]
    position = 0
    while position < by_size.size:
        width = int(sizes[by_size[min(by_size.size - 1, position)]])
        chunk_limit = max(1, _CELLS_PER_CHUNK // max(width * width, 1))
        chunk = by_size[position : position + chunk_limit]
        width = int(sizes[chunk].max())
        xs = np.full((chunk.size, width), np.nan)
        ys = np.full((chunk.size, width), np.nan)
        for row, g in enumerate(chunk):
            members = order[starts[g] : starts[g + 1]]
            xs[row, : members.size] = x[members]
            ys[row, : members.size] = y[members]
        result[chunk] = _padded_coefficients(xs, ys)
        position += chunk.size
    return groups.astype(np.int64), result, sizes.astype(np.int64)


def _plain_pearson(x: FloatArray, y: FloatArray) -> float:
    dx = x - x.mean()
    dy = y - y.mean()
    denominator = np.sqrt(np.dot(dx, dx) * np.dot(dy, dy))
    return float(np.clip(np.dot(dx, dy) / denominator, -1.0, 1.0)) if denominator > 0 else math.nan


def _large_group_coefficients(x: FloatArray, y: FloatArray) -> list[float]:
    """Same values as ``coefficients`` without scipy's per-call overhead for Pearson and Spearman."""
    from scipy import stats  # noqa: PLC0415 -- ~1.8 s to import, see the module's imports

    if _undefined_reason(x, y):
        return [math.nan] * 3
    return [
        _plain_pearson(x, y),
        _plain_pearson(stats.rankdata(x), stats.rankdata(y)),
        float(stats.kendalltau(x, y, variant="b").statistic),
    ]


def _padded_pearson(xs: FloatArray, ys: FloatArray, mask: npt.NDArray[np.bool_]) -> FloatArray:
    count = mask.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx = np.where(mask, xs, 0.0).sum(axis=1) / count
        my = np.where(mask, ys, 0.0).sum(axis=1) / count
        dx = np.where(mask, xs - mx[:, None], 0.0)
        dy = np.where(mask, ys - my[:, None], 0.0)
        sxx = np.sum(dx * dx, axis=1)
        syy = np.sum(dy * dy, axis=1)
        r = np.sum(dx * dy, axis=1) / np.sqrt(sxx * syy)
    r[~((sxx > 0) & (syy > 0))] = np.nan
    return np.asarray(np.clip(r, -1.0, 1.0), dtype=np.float64)


def _padded_coefficients(xs: FloatArray, ys: FloatArray) -> FloatArray:
    mask = ~np.isnan(xs) & ~np.isnan(ys)
    xs = np.where(mask, xs, np.nan)
    ys = np.where(mask, ys, np.nan)
    count = mask.sum(axis=1)
    pair_mask = mask[:, :, None] & mask[:, None, :]
    diff_x = np.sign(xs[:, :, None] - xs[:, None, :])
    diff_y = np.sign(ys[:, :, None] - ys[:, None, :])
    diff_x[~pair_mask] = 0.0
    diff_y[~pair_mask] = 0.0
    equal_x = (diff_x == 0) & pair_mask
    equal_y = (diff_y == 0) & pair_mask
    # Average rank: values below plus the mean position among equal values (self included).
    rank_x = np.where(mask, (diff_x > 0).sum(axis=2) + (equal_x.sum(axis=2) + 1) / 2.0, np.nan)
    rank_y = np.where(mask, (diff_y > 0).sum(axis=2) + (equal_y.sum(axis=2) + 1) / 2.0, np.nan)
    all_pairs = count * (count - 1) / 2.0
    ties_x = (equal_x.sum(axis=(1, 2)) - count) / 2.0
    ties_y = (equal_y.sum(axis=(1, 2)) - count) / 2.0
    with np.errstate(invalid="ignore", divide="ignore"):
        kendall = (np.sum(diff_x * diff_y, axis=(1, 2)) / 2.0) / np.sqrt((all_pairs - ties_x) * (all_pairs - ties_y))
    out = np.column_stack(
        [_padded_pearson(xs, ys, mask), _padded_pearson(rank_x, rank_y, mask), np.clip(kendall, -1.0, 1.0)]
    )
    invalid = (count < MIN_PAIRS) | (ties_x >= all_pairs) | (ties_y >= all_pairs)
    out[invalid] = np.nan
    return out


# ---------------------------------------------------------------- weighted (bootstrap) estimates


def resampled_prompt_weights(rng: np.random.Generator, n_resamples: int, n_prompts: int) -> FloatArray:
    """For each bootstrap resample (row), how many times each prompt (column) was drawn, with replacement."""
    draws = rng.integers(0, n_prompts, size=(n_resamples, n_prompts))
    offsets = (np.arange(n_resamples, dtype=np.int64) * n_prompts)[:, None]
    flat = np.bincount((draws + offsets).ravel(), minlength=n_resamples * n_prompts)
    return flat.reshape(n_resamples, n_prompts).astype(np.float64)


def _sum_by_class(weights: FloatArray, classes: IntArray, n_classes: int) -> FloatArray:
    """(rows x classes) total weight of each class; one gather and one segmented sum."""
    order = np.argsort(classes, kind="stable")
    present, starts = np.unique(classes[order], return_index=True)
    out = np.zeros((weights.shape[0], n_classes))
    out[:, present] = np.add.reduceat(weights[:, order], starts, axis=1)
    return out


def _class_midranks(class_weight: FloatArray) -> FloatArray:
    """Average rank of each class (last axis) in each weighted resample, centred on the mean rank."""
    below = np.cumsum(class_weight, axis=-1) - class_weight
    total = class_weight.sum(axis=-1, keepdims=True)
    return np.asarray(below + (class_weight + 1.0) / 2.0 - (total + 1.0) / 2.0, dtype=np.float64)


def _spearman_from_classes(
    rank_x: FloatArray, rank_y: FloatArray, weight_x: FloatArray, weight_y: FloatArray, cross: FloatArray
) -> FloatArray:
    sxx = np.sum(weight_x * rank_x * rank_x, axis=-1)
    syy = np.sum(weight_y * rank_y * rank_y, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(np.clip(cross / np.sqrt(sxx * syy), -1.0, 1.0), dtype=np.float64)


def _kendall_from_table(table: FloatArray) -> FloatArray:
    """Kendall tau-b from weighted (x value, y value) contingency tables in the last two axes."""
    # score = sum over pairs of x classes i < i' of T[i] . sign(j' - j) . T[i']: rows below each row, once
    # accumulated, meet the y-order signs through one small matrix product.
    n_y = table.shape[-1]
    signs = np.sign(np.arange(n_y)[None, :] - np.arange(n_y)[:, None]).astype(np.float64)
    after_x = np.flip(np.cumsum(np.flip(table, axis=-2), axis=-2), axis=-2) - table
    score = np.sum((table @ signs) * after_x, axis=(-2, -1))
    total = table.sum(axis=(-2, -1))
    row = table.sum(axis=-1)
    col = table.sum(axis=-2)
    all_pairs = total * (total - 1.0) / 2.0
    ties_x = np.sum(row * (row - 1.0), axis=-1) / 2.0
    ties_y = np.sum(col * (col - 1.0), axis=-1) / 2.0
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(
            np.clip(score / np.sqrt((all_pairs - ties_x) * (all_pairs - ties_y)), -1.0, 1.0), dtype=np.float64
        )


def _materialised_kendall(x: FloatArray, y: FloatArray, weights: FloatArray) -> FloatArray:
    from scipy import stats  # noqa: PLC0415 -- ~1.8 s to import, see the module's imports

    out = np.full(weights.shape[0], np.nan)
    for row in range(weights.shape[0]):
        counts = weights[row].astype(np.int64)
        xs = np.repeat(x, counts)
        ys = np.repeat(y, counts)
        if _undefined_reason(xs, ys) is None:
            out[row] = stats.kendalltau(xs, ys, variant="b").statistic
    return out


def _weighted_coefficients(
    x: FloatArray, y: FloatArray, prompt: IntArray, prompt_weights: FloatArray, group: IntArray | None = None
) -> FloatArray:
    """(rows x groups x 3) Pearson, Spearman, Kendall within each group for each row of prompt weights; NaN
    where undefined. Without ``group`` every answer is in one group.

    Everything is aggregated per (prompt, group) first, so a resample costs (prompts x moments) for Pearson and
    (prompts -> value-pair cells) for the rank statistics, never (resamples x answers): Spearman and Kendall
    come from the per-resample contingency table of (x value, y value), which holds all that rank statistics
    need. When the scores take too many distinct values for a table, Spearman gathers per-answer ranks and
    Kendall falls back to materialised resamples.
    """
    group_codes = np.zeros(x.size, dtype=np.int64) if group is None else np.asarray(group, dtype=np.int64)
    n_groups = int(group_codes.max()) + 1 if x.size else 1
    n_rows = prompt_weights.shape[0]
    out = np.full((n_rows, n_groups, 3), np.nan)
    if x.size == 0:
        return out
    used, local = np.unique(prompt, return_inverse=True)
    weights = prompt_weights[:, used]
    n_prompts = used.size
    slot = local * n_groups + group_codes
    ux, cx = np.unique(x, return_inverse=True)
    uy, cy = np.unique(y, return_inverse=True)
    xc = x - x.mean()
    yc = y - y.mean()
    moments = np.stack(
        [
            np.bincount(slot, weights=column, minlength=n_prompts * n_groups).reshape(n_prompts, n_groups)
            for column in (np.ones_like(xc), xc, yc, xc * xc, yc * yc, xc * yc)
        ],
        axis=-1,
    )
    summed = (weights @ moments.reshape(n_prompts, n_groups * 6)).reshape(n_rows, n_groups, 6)
    total, sx, sy, sxx, syy, sxy = np.moveaxis(summed, -1, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        out[..., 0] = np.clip(
            (sxy - sx * sy / total) / np.sqrt((sxx - sx * sx / total) * (syy - sy * sy / total)), -1.0, 1.0
        )
    n_cells = ux.size * uy.size
    if n_groups * n_cells <= _MAX_CONTINGENCY_CELLS:
        from scipy import sparse  # noqa: PLC0415 -- ~0.3 s to import, which a command without correlations skips

        cell = (group_codes * ux.size + cx) * uy.size + cy
        cells = sparse.csr_matrix((np.ones(x.size), (local, cell)), shape=(n_prompts, n_groups * n_cells))
        chunk = max(1, _CELLS_PER_CHUNK // (n_groups * n_cells))
        for start in range(0, n_rows, chunk):
            block = weights[start : start + chunk]
            table = np.asarray((cells.T @ block.T).T).reshape(block.shape[0], n_groups, ux.size, uy.size)
            weight_x = table.sum(axis=-1)
            weight_y = table.sum(axis=-2)
            rank_x = _class_midranks(weight_x)
            rank_y = _class_midranks(weight_y)
            cross = np.sum(rank_x * (table @ rank_y[..., None])[..., 0], axis=-1)
            rows = out[start : start + chunk]
            rows[..., 1] = _spearman_from_classes(rank_x, rank_y, weight_x, weight_y, cross)
            rows[..., 2] = _kendall_from_table(table)
            constant = (
                ((weight_x > 0).sum(axis=-1) < 2)
                | ((weight_y > 0).sum(axis=-1) < 2)
                | (total[start : start + chunk] < MIN_PAIRS)
            )
            rows[constant] = np.nan
    else:
        for code in range(n_groups):
            members = group_codes == code
            out[:, code, 1:] = _answer_weighted_ranks(x[members], y[members], weights[:, local[members]])
            constant = (total[:, code] < MIN_PAIRS) | ~np.isfinite(out[:, code, 1])
            out[constant, code, :] = np.nan
    return out


def _answer_weighted_ranks(x: FloatArray, y: FloatArray, answer_weights: FloatArray) -> FloatArray:
    """(rows x 2) Spearman and Kendall from per-answer weights, for scores with too many distinct values."""
    out = np.full((answer_weights.shape[0], 2), np.nan)
    if x.size == 0:
        return out
    ux, cx = np.unique(x, return_inverse=True)
    uy, cy = np.unique(y, return_inverse=True)
    chunk = max(1, _CELLS_PER_CHUNK // x.size)
    for start in range(0, answer_weights.shape[0], chunk):
        block = answer_weights[start : start + chunk]
        weight_x = _sum_by_class(block, cx, ux.size)
        weight_y = _sum_by_class(block, cy, uy.size)
        rank_x = _class_midranks(weight_x)
        rank_y = _class_midranks(weight_y)
        cross = np.einsum("bi,bi,bi->b", block, rank_x[:, cx], rank_y[:, cy])
        rows = out[start : start + chunk]
        rows[:, 0] = _spearman_from_classes(rank_x, rank_y, weight_x, weight_y, cross)
        rows[:, 1] = _materialised_kendall(x, y, block)
        constant = ((weight_x > 0).sum(axis=1) < 2) | ((weight_y > 0).sum(axis=1) < 2)
        rows[constant] = np.nan
    return out


def _percentile_intervals(samples: FloatArray, confidence: float = 0.95) -> dict[str, Interval]:
    result: dict[str, Interval] = {}
    tail = (1.0 - confidence) / 2.0
    for column, name in enumerate(COEFFICIENTS):
        finite = samples[:, column][np.isfinite(samples[:, column])]
        if finite.size == 0:
            result[name] = undefined_interval("no bootstrap resample was defined")
        else:
            low, high = np.quantile(finite, [tail, 1.0 - tail])
            result[name] = interval(low, high)
    return result


# ---------------------------------------------------------------- the four levels


def _stats_from_row(values: FloatArray, reason: str) -> dict[str, Stat]:
    return {
        name: defined(values[i]) if np.isfinite(values[i]) else undefined(reason) for i, name in enumerate(COEFFICIENTS)
    }


def _response_level(paired: Paired, weights: FloatArray) -> dict[str, Any]:
    values = coefficients(paired.human, paired.judge)
    return {
        **values,
        "n": paired.n,
        "ci95": _percentile_intervals(
            _weighted_coefficients(paired.human, paired.judge, paired.prompt, weights)[:, 0, :]
        ),
        "ci95_analytic": analytic_intervals(values, paired.n),
    }


# An average of within-group coefficients is not one coefficient of n pairs: Fisher's z has no interval for it.
_AVERAGED_NO_ANALYTIC = "an average of within-group correlations has no analytic interval; see the bootstrap one"


def _grouped_level(paired: Paired, group: IntArray, weights: FloatArray, *, resample_groups: bool) -> dict[str, Any]:
    """Correlate within each group, then average the defined groups."""
    groups, per_group, sizes = _group_coefficients(paired.human, paired.judge, group)
    usable = np.all(np.isfinite(per_group), axis=1)
    n_groups = int(usable.sum())
    skipped = int(groups.size - n_groups)
    level: dict[str, Any]
    if n_groups == 0:
        reason = "no group has at least 3 answers with varying scores" if groups.size else "no answers"
        level = {name: undefined(reason) for name in COEFFICIENTS}
        level.update({"n": 0, "ci95": {name: undefined_interval(reason) for name in COEFFICIENTS}})
    else:
        level = dict(_stats_from_row(per_group[usable].mean(axis=0), "undefined"))
        level["n"] = int(sizes[usable].sum())
        if resample_groups:
            # Here groups are prompts: drawing prompts is drawing groups.
            group_weights = weights[:, groups[usable]]
            with np.errstate(invalid="ignore", divide="ignore"):
                samples = (group_weights @ per_group[usable]) / group_weights.sum(axis=1)[:, None]
        else:
            samples = _per_system_bootstrap(paired, groups[usable], weights)
        level["ci95"] = _percentile_intervals(samples)
    level["ci95_analytic"] = {
        name: undefined_interval(level["ci95"][name]["undefined"] or _AVERAGED_NO_ANALYTIC) for name in COEFFICIENTS
    }
    level["n_groups"] = n_groups
    level["groups_skipped"] = skipped
    return level


def _per_system_bootstrap(paired: Paired, systems: IntArray, weights: FloatArray) -> FloatArray:
    """Mean over systems of within-system coefficients, recomputed on each prompt resample."""
    code_of_system = np.full(len(paired.system_labels), -1, dtype=np.int64)
    code_of_system[systems] = np.arange(systems.size)
    members = np.flatnonzero(code_of_system[paired.system] >= 0)
    per_system = _weighted_coefficients(
        paired.human[members],
        paired.judge[members],
        paired.prompt[members],
        weights,
        code_of_system[paired.system[members]],
    )
    # A system undefined in a resample (e.g. all drawn answers tie) is left out of that resample's mean.
    finite = np.isfinite(per_system)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(np.where(finite, per_system, 0.0).sum(axis=1) / finite.sum(axis=1), dtype=np.float64)


def _system_means(paired: Paired, prompt_weights: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(rows x systems) human and judge means under prompt weights, rounded for tie safety."""
    n_prompts = int(paired.prompt.max()) + 1
    n_systems = len(paired.system_labels)
    cell = paired.prompt * n_systems + paired.system
    from scipy import sparse  # noqa: PLC0415 -- ~0.3 s to import, which a command without correlations skips

    indicator = sparse.csr_matrix(
        (np.ones(paired.n), (cell, np.arange(paired.n))), shape=(n_prompts * n_systems, paired.n)
    )
    count = np.asarray(indicator.sum(axis=1)).reshape(n_prompts, n_systems)
    human = np.asarray(indicator @ paired.human).reshape(n_prompts, n_systems)
    judge = np.asarray(indicator @ paired.judge).reshape(n_prompts, n_systems)
    with np.errstate(invalid="ignore", divide="ignore"):
        weighted_count = prompt_weights @ count
        return _round_array((prompt_weights @ human) / weighted_count), _round_array(
            (prompt_weights @ judge) / weighted_count
        )


def _rows_coefficients(xs: FloatArray, ys: FloatArray) -> FloatArray:
    """Coefficients for each row of (rows x items) matrices; a NaN in either drops that item."""
    chunk = max(1, _CELLS_PER_CHUNK // max(xs.shape[1] ** 2, 1))
    return np.vstack([_padded_coefficients(xs[i : i + chunk], ys[i : i + chunk]) for i in range(0, xs.shape[0], chunk)])


def _system_level(paired: Paired, weights: FloatArray) -> dict[str, Any]:
    n_prompts = int(paired.prompt.max()) + 1
    human, judge = _system_means(paired, np.ones((1, n_prompts)))
    values = coefficients(human[0], judge[0])
    level: dict[str, Any] = {**values, "n": int(human.shape[1])}
    boot_human, boot_judge = _system_means(paired, weights)
    level["ci95"] = _percentile_intervals(_rows_coefficients(boot_human, boot_judge))
    level["ci95_analytic"] = analytic_intervals(values, int(human.shape[1]))
    return level


def correlation_levels(paired: Paired, *, n_resamples: int = 1000, seed: int = 0) -> dict[str, dict[str, Any]]:
    """The four levels (response, per_prompt, per_system, system): Pearson, Spearman, Kendall tau-b, n, 95% CIs.

    Grouped levels also give ``n_groups`` (groups averaged) and ``groups_skipped`` (fewer than 3
    answers, or constant human or judge scores inside the group).
    """
    if paired.n == 0:
        reason = "no answer has both a human and a judge score"
        empty: dict[str, Any] = {name: undefined(reason) for name in COEFFICIENTS}
        empty.update(
            {
                "n": 0,
                "ci95": {name: undefined_interval(reason) for name in COEFFICIENTS},
                "ci95_analytic": {name: undefined_interval(reason) for name in COEFFICIENTS},
            }
        )
        return {
            "response": dict(empty),
            "per_prompt": {**empty, "n_groups": 0, "groups_skipped": 0},
            "per_system": {**empty, "n_groups": 0, "groups_skipped": 0},
            "system": dict(empty),
        }
    rng = np.random.default_rng(seed)
    weights = resampled_prompt_weights(rng, n_resamples, int(paired.prompt.max()) + 1)
    return {
        "response": _response_level(paired, weights),
        "per_prompt": _grouped_level(paired, paired.prompt, weights, resample_groups=True),
        "per_system": _grouped_level(paired, paired.system, weights, resample_groups=False),
        "system": _system_level(paired, weights),
    }


def correlation_point_estimates(paired: Paired) -> dict[str, dict[str, Any]]:
    """The four levels without CIs (for the human ceiling, where CIs are not reported)."""
    if paired.n == 0:
        reason = "no shared answers"
        return {level: {name: undefined(reason) for name in COEFFICIENTS} for level in LEVELS}
    result: dict[str, dict[str, Any]] = {"response": coefficients(paired.human, paired.judge)}
    for level, group in (("per_prompt", paired.prompt), ("per_system", paired.system)):
        _, per_group, _ = _group_coefficients(paired.human, paired.judge, group)
        usable = np.all(np.isfinite(per_group), axis=1)
        if usable.any():
            result[level] = _stats_from_row(per_group[usable].mean(axis=0), "undefined")
        else:
            result[level] = {
                name: undefined("no group has at least 3 answers with varying scores") for name in COEFFICIENTS
            }
    human, judge = _system_means(paired, np.ones((1, int(paired.prompt.max()) + 1)))
    result["system"] = coefficients(human[0], judge[0])
    return result

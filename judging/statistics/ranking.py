"""Rankings of systems with their uncertainty, as pure numpy/scipy functions.

Bradley–Terry (1952) by maximum likelihood: P(i beats j) = 1 / (1 + exp(λj − λi)), one log-strength λ per system,
the reference system's fixed at 0 (BradleyTerry2's ``refcat``). Each comparison is one Bernoulli outcome. Ties follow
one of three conventions (``TIE_CONVENTIONS``): ``half`` (the default, as Chatbot Arena) counts a tie as half a win to
each side; ``drop`` leaves ties out; ``davidson`` fits Davidson's (1970) tie model, P(i beats j) = πi / (πi + πj +
ν√(πiπj)) and P(tie) = ν√(πiπj) / (the same), with one tie parameter ν > 0 fitted with the strengths. The fit is
Newton's method on the log-likelihood aggregated to counts per pair, which gives the same estimates as a logistic
regression with one row per comparison (R's ``BTm``/``glm``).
Standard errors come from the observed information (for this canonical-link model, equal to the expected
information) with the reference's row and column removed; 95% intervals are λ ± 1.96·SE (Wald).

A maximum-likelihood strength is finite only when every system both wins and loses and the systems cannot be split
into two groups one of which never loses to the other (Zermelo 1929; Ford 1957). A system that never wins (never
loses) has strength −∞ (+∞): it is reported as such, left out, and the rest are fitted again; if the rest still split,
no strength is finite.

Rank intervals come from a bootstrap over prompts (prompts drawn with replacement, all comparisons of a drawn prompt
come along, as in the correlation intervals): each resample is fitted again (with a negligible ridge, so that a
resample in which a system never wins still orders it last) and the 2.5% and 97.5% quantiles of a system's rank
(1 = strongest) are its best and worst rank. The mean-rating ranking orders systems by the mean of their answers'
scores and takes its intervals from the same bootstrap.

Bradley-Terry, the mean-rating ranking and the agreement between two rankings stay together: they share the
bootstrap over prompts and one rank function, so every rank this module prints is computed the same way. The
comparisons they rank are built in judging.statistics.pairwise; Davidson's fit is judging.statistics.davidson.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from judging.statistics.arrays import FloatArray, IntArray
from judging.statistics.correlation import resampled_prompt_weights
from judging.statistics.davidson import davidson_bootstrap, davidson_defined, davidson_fit
from judging.statistics.pairwise import (
    BOOTSTRAP_RIDGE,
    DEFAULT_TIES,
    NEWTON_ITERATIONS,
    ROUNDS_PER_CHUNK,
    TIE_CONVENTIONS,
    TOLERANCE,
    Comparisons,
    RankingError,
    newton_step,
    outcome_counts,
    without_ties,
)
from judging.statistics.results import Interval, Stat, defined, interval, undefined, undefined_interval

Z95 = 1.959963984540054
MIN_BOOTSTRAP = 100
# Up to this many prompts x pairs cells (40 MB in float32 per table) the bootstrap multiplies dense tables.
_DENSE_CELLS = 10_000_000
# ---------------------------------------------------------------- fitting


def _pair_totals(comparisons: Comparisons) -> tuple[FloatArray, FloatArray]:
    """(S x S) wins of i over j (ties half) and comparisons between i and j."""
    size = len(comparisons.system_labels)
    wins = np.zeros((size, size))
    np.add.at(wins, (comparisons.first, comparisons.second), comparisons.score)
    np.add.at(wins, (comparisons.second, comparisons.first), 1.0 - comparisons.score)
    return wins, wins + wins.T


def _newton(
    first: IntArray,
    second: IntArray,
    pair_wins: FloatArray,
    pair_totals: FloatArray,
    size: int,
    reference: int,
    *,
    ridge: float = 0.0,
    start: FloatArray | None = None,
) -> FloatArray:
    """Log-strengths of a batch of rounds by Newton's method, reference fixed at 0. Pairs (first < second) carry,
    per round (rounds x pairs), first's wins over second and their comparisons."""
    rounds = pair_wins.shape[0]
    first_of = np.zeros((first.size, size))
    first_of[np.arange(first.size), first] = 1.0
    second_of = np.zeros((second.size, size))
    second_of[np.arange(second.size), second] = 1.0
    difference = first_of - second_of
    either = first_of + second_of
    row_wins = pair_wins @ first_of + (pair_totals - pair_wins) @ second_of
    strength = np.zeros((rounds, size)) if start is None else np.tile(start, (rounds, 1))
    strength[:, reference] = 0.0
    diagonal = np.arange(size)
    for _ in range(NEWTON_ITERATIONS):
        probability = 1.0 / (1.0 + np.exp(-(strength @ difference.T)))
        expected = pair_totals * probability
        gradient = row_wins - expected @ first_of - (pair_totals - expected) @ second_of - ridge * strength
        information = expected * (1.0 - probability)
        hessian = np.zeros((rounds, size, size))
        hessian[:, first, second] = -information
        hessian[:, second, first] = -information
        hessian[:, diagonal, diagonal] = information @ either + ridge
        step = newton_step(hessian, gradient, reference)
        strength += step
        if np.max(np.abs(step)) < TOLERANCE:
            break
    return strength


def _pairs_of(wins: FloatArray, totals: FloatArray) -> tuple[IntArray, IntArray, FloatArray, FloatArray]:
    first, second = np.nonzero(np.triu(totals, k=1))
    return first.astype(np.int64), second.astype(np.int64), wins[first, second][None], totals[first, second][None]


def _observed_information(strength: FloatArray, totals: FloatArray) -> FloatArray:
    gap = strength[:, None] - strength[None, :]
    probability = 1.0 / (1.0 + np.exp(-gap))
    information = totals * probability * probability.T
    hessian = -information
    hessian[np.diag_indices_from(hessian)] = information.sum(axis=1)
    return hessian


def _finite_set(wins: FloatArray) -> tuple[list[int], dict[int, str]]:
    """The systems whose strengths are finite, and why each other one is not."""
    from scipy.sparse.csgraph import connected_components  # noqa: PLC0415 -- scipy.sparse.csgraph loads lazily

    remaining = list(range(wins.shape[0]))
    reasons: dict[int, str] = {}
    while True:
        sub = wins[np.ix_(remaining, remaining)]
        won, lost = sub.sum(axis=1), sub.sum(axis=0)
        out = {}
        for position, system in enumerate(remaining):
            if won[position] == 0 and lost[position] == 0:
                out[system] = "never compared with a system that has a finite strength"
            elif won[position] == 0:
                out[system] = "never wins: its strength is not finite (minus infinity)"
            elif lost[position] == 0:
                out[system] = "never loses: its strength is not finite (plus infinity)"
        if not out:
            break
        reasons.update(out)
        remaining = [system for system in remaining if system not in out]
    if len(remaining) >= 2:
        from scipy import sparse  # noqa: PLC0415 -- ~0.3 s to import, which a command without rankings skips

        graph = sparse.csr_matrix(wins[np.ix_(remaining, remaining)] > 0)
        count, _ = connected_components(graph, directed=True, connection="strong")
        if count > 1:
            for system in remaining:
                reasons[system] = (
                    "the systems split into groups one of which never loses to the other: no strength is finite"
                )
            remaining = []
    elif len(remaining) == 1:
        reasons[remaining[0]] = "no other system has a finite strength to compare with"
        remaining = []
    return remaining, reasons


def competition_ranks_of(values: FloatArray) -> IntArray:
    """Per row, 1 + the number of entries strictly higher (equal values share the best rank)."""
    higher: IntArray = (values[..., None, :] > values[..., :, None]).sum(axis=-1)
    return higher + 1


def _rank_intervals(boot_ranks: IntArray) -> list[dict[str, int]]:
    best = np.quantile(boot_ranks, 0.025, axis=0, method="inverted_cdf")
    worst = np.quantile(boot_ranks, 0.975, axis=0, method="inverted_cdf")
    return [{"best": int(b), "worst": int(w)} for b, w in zip(best, worst, strict=True)]


def _pair_counts_by_prompt(comparisons: Comparisons) -> tuple[Any, Any, IntArray, IntArray]:
    """Per prompt and unordered pair i < j present: twice i's wins (ties count 1, so whole numbers) and the
    comparisons. Dense float32 (exact for whole numbers below 2**24, and a fast matrix product) when the prompts x
    pairs table is small enough, sparse otherwise."""
    low = np.minimum(comparisons.first, comparisons.second)
    high = np.maximum(comparisons.first, comparisons.second)
    doubled_wins = np.where(comparisons.first == low, 2.0 * comparisons.score, 2.0 * (1.0 - comparisons.score))
    size = len(comparisons.system_labels)
    pair_keys, pair_code = np.unique(low * size + high, return_inverse=True)
    shape = (comparisons.n_prompts, pair_keys.size)
    if shape[0] * shape[1] <= _DENSE_CELLS:
        cell = comparisons.prompt * shape[1] + pair_code
        cells = shape[0] * shape[1]
        dense_wins = np.bincount(cell, weights=doubled_wins, minlength=cells).reshape(shape).astype(np.float32)
        dense_totals = np.bincount(cell, minlength=cells).reshape(shape).astype(np.float32)
        return dense_wins, dense_totals, pair_keys // size, pair_keys % size
    from scipy import sparse  # noqa: PLC0415 -- ~0.3 s to import, which a command without rankings skips

    wins = sparse.csr_matrix((doubled_wins, (comparisons.prompt, pair_code)), shape=shape)
    totals = sparse.csr_matrix((np.ones(comparisons.n), (comparisons.prompt, pair_code)), shape=shape)
    wins.sum_duplicates()
    totals.sum_duplicates()
    return wins, totals, pair_keys // size, pair_keys % size


def bootstrap_strengths(
    comparisons: Comparisons, reference: int, weights: FloatArray, initial: FloatArray | None = None
) -> FloatArray:
    """(rounds x S) Bradley–Terry log-strengths of each prompt resample (``weights``: rounds x prompts draws),
    Newton starting from ``initial`` (the full sample's fit, close to every resample's)."""
    size = len(comparisons.system_labels)
    doubled_wins, totals_by_prompt, first, second = _pair_counts_by_prompt(comparisons)
    dense = isinstance(doubled_wins, np.ndarray)
    out = np.empty((weights.shape[0], size))
    for start in range(0, weights.shape[0], ROUNDS_PER_CHUNK):
        chunk = weights[start : start + ROUNDS_PER_CHUNK]
        if dense:
            chunk32 = chunk.astype(np.float32)
            pair_wins = (chunk32 @ doubled_wins).astype(np.float64) / 2.0
            pair_totals = (chunk32 @ totals_by_prompt).astype(np.float64)
        else:
            pair_wins = np.asarray((doubled_wins.T @ chunk.T).T) / 2.0
            pair_totals = np.asarray((totals_by_prompt.T @ chunk.T).T)
        ridge = BOOTSTRAP_RIDGE * max(1.0, float(pair_totals.sum(axis=1).mean()) / size)
        out[start : start + chunk.shape[0]] = _newton(
            first, second, pair_wins, pair_totals, size, reference, ridge=ridge, start=initial
        )
    return out


def _resolve_reference(labels: tuple[str, ...], finite: list[int], reference: str | None) -> int:
    if reference is not None:
        if reference not in labels:
            raise RankingError(
                f"reference system {reference!r} does not exist; the systems are: {', '.join(labels) or 'none'}"
            )
        code = labels.index(reference)
        if code not in finite:
            raise RankingError(f"reference system {reference!r} has no finite strength; choose another reference")
        return code
    # As BradleyTerry2: the first system in sorted order, here the first with a finite strength.
    return finite[0] if finite else 0


def _strength_rows(
    comparisons: Comparisons,
    reasons: dict[int, str],
    reference_code: int,
    strength: FloatArray,
    se: FloatArray,
    ranks: IntArray,
    ranked: npt.NDArray[np.bool_],
    rank_intervals: list[dict[str, int]] | None,
) -> list[dict[str, Any]]:
    """One row per system: its strength, SE, interval, rank and outcome counts (undefined with the reason where the
    strength is not finite)."""
    won, lost, tied = outcome_counts(comparisons)
    systems: list[dict[str, Any]] = []
    for code, label in enumerate(comparisons.system_labels):
        strength_stat: Stat
        se_stat: Stat
        ci: Interval
        if code in reasons:
            strength_stat, se_stat, ci = (
                undefined(reasons[code]),
                undefined(reasons[code]),
                undefined_interval(reasons[code]),
            )
        elif code == reference_code:
            strength_stat, se_stat, ci = defined(0.0), undefined("reference"), undefined_interval("reference")
        else:
            strength_stat = defined(float(strength[code]))
            se_stat = defined(float(se[code]))
            ci = interval(strength[code] - Z95 * se[code], strength[code] + Z95 * se[code])
        systems.append(
            {
                "system": label,
                "strength": strength_stat,
                "se": se_stat,
                "ci95": ci,
                "rank": int(ranks[code]) if ranked[code] else None,
                "rank_ci95": rank_intervals[code] if rank_intervals is not None else None,
                "wins": int(won[code]),
                "losses": int(lost[code]),
                "ties": int(tied[code]),
            }
        )
    return systems


def bradley_terry(
    comparisons: Comparisons,
    *,
    reference: str | None = None,
    weights: FloatArray | None = None,
    ties: str = DEFAULT_TIES,
) -> tuple[dict[str, Any], FloatArray | None]:
    """The fitted ranking, and the bootstrap strengths (rounds x S; None without ``weights``). ``ties`` is one of
    ``TIE_CONVENTIONS``; the result's "ties" names it, counts the ties and, for Davidson's model, gives ν."""
    if ties not in TIE_CONVENTIONS:
        raise RankingError(f"unknown tie convention {ties!r}; choose one of {', '.join(TIE_CONVENTIONS)}")
    n_ties = int(np.count_nonzero((comparisons.score > 0.0) & (comparisons.score < 1.0)))
    tie_report: dict[str, Any] = {"convention": ties, "description": TIE_CONVENTIONS[ties], "n_ties": n_ties}
    if ties == "drop":
        comparisons = without_ties(comparisons)
        tie_report["n_dropped"] = n_ties
    labels = comparisons.system_labels
    if comparisons.n == 0:
        if reference is not None:
            raise RankingError(f"reference system {reference!r} does not exist; there are no comparisons")
        if ties == "davidson":
            tie_report["tie_parameter"] = undefined("no comparisons")
        return {
            "model": "bradley_terry",
            "ties": tie_report,
            "reference": None,
            "n_comparisons": 0,
            "n_prompts": 0,
            "undefined": "no comparisons",
            "systems": [],
        }, None
    wins, totals = _pair_totals(comparisons)
    finite, reasons = _finite_set(wins)
    reference_code = _resolve_reference(labels, finite, reference)
    strength = np.full(len(labels), np.nan)
    se = np.full(len(labels), np.nan)
    davidson = ties == "davidson" and davidson_defined(comparisons, finite, tie_report)
    log_nu = 0.0
    if davidson:
        strength, se, log_nu, log_nu_se = davidson_fit(comparisons, finite, reference_code)
        tie_report["tie_parameter"] = defined(float(np.exp(log_nu)))
        tie_report["tie_parameter_ci95"] = interval(np.exp(log_nu - Z95 * log_nu_se), np.exp(log_nu + Z95 * log_nu_se))
    elif finite:
        sub_wins, sub_totals = wins[np.ix_(finite, finite)], totals[np.ix_(finite, finite)]
        local_reference = finite.index(reference_code)
        fitted = _newton(*_pairs_of(sub_wins, sub_totals), len(finite), local_reference)[0]
        strength[finite] = fitted
        free = [index for index in range(len(finite)) if index != local_reference]
        covariance = np.linalg.inv(_observed_information(fitted, sub_totals)[np.ix_(free, free)])
        se[[finite[index] for index in free]] = np.sqrt(np.diag(covariance))
    order_value = strength.copy()
    for system, reason in reasons.items():
        if reason.startswith("never wins"):
            order_value[system] = -np.inf
        elif reason.startswith("never loses"):
            order_value[system] = np.inf
    ranked = ~np.isnan(order_value)
    ranks = competition_ranks_of(np.where(ranked, order_value, -np.inf))
    boot: FloatArray | None = None
    rank_intervals: list[dict[str, int]] | None = None
    if weights is not None:
        initial = np.nan_to_num(strength, nan=0.0)
        boot = (
            davidson_bootstrap(comparisons, reference_code, weights, initial, log_nu)
            if davidson
            else bootstrap_strengths(comparisons, reference_code, weights, initial)
        )
        rank_intervals = _rank_intervals(competition_ranks_of(boot))
    systems = _strength_rows(comparisons, reasons, reference_code, strength, se, ranks, ranked, rank_intervals)
    systems.sort(key=lambda row: (row["rank"] if row["rank"] is not None else len(labels) + 1, row["system"]))
    return {
        "model": "bradley_terry",
        "ties": tie_report,
        "reference": labels[reference_code],
        "n_comparisons": comparisons.n,
        "n_prompts": int(np.unique(comparisons.prompt).size),
        "undefined": None,
        "systems": systems,
    }, boot


# ---------------------------------------------------------------- mean rating


@dataclass(frozen=True)
class SystemScores:
    """One score per answer (NaN: none), with the answer's prompt code (shared index) and system."""

    score: FloatArray
    prompt: IntArray
    system: IntArray
    system_labels: tuple[str, ...]
    n_prompts: int


def system_scores(
    score: Sequence[float] | FloatArray,
    prompt: Sequence[Hashable],
    system: Sequence[str],
    prompt_index: dict[Hashable, int] | None = None,
) -> SystemScores:
    prompts = prompt_index if prompt_index is not None else {}
    values = np.asarray(score, dtype=np.float64)
    keep = np.flatnonzero(np.isfinite(values))
    labels = tuple(sorted({system[int(i)] for i in keep}))
    code = {label: index for index, label in enumerate(labels)}
    return SystemScores(
        score=values[keep],
        prompt=np.asarray([prompts.setdefault(prompt[int(i)], len(prompts)) for i in keep], dtype=np.int64),
        system=np.asarray([code[system[int(i)]] for i in keep], dtype=np.int64),
        system_labels=labels,
        n_prompts=len(prompts),
    )


def _weighted_means(scores: SystemScores, weights: FloatArray) -> FloatArray:
    """(rounds x S) mean score per system with each answer weighted by its prompt's draws."""
    from scipy import sparse  # noqa: PLC0415 -- ~0.3 s to import, which a command without rankings skips

    size = len(scores.system_labels)
    indicator = sparse.csr_matrix(
        (np.ones(scores.score.size), (scores.prompt, scores.system)), shape=(weights.shape[1], size)
    )
    valued = sparse.csr_matrix((scores.score, (scores.prompt, scores.system)), shape=(weights.shape[1], size))
    counts = np.asarray((indicator.T @ weights.T).T)
    totals = np.asarray((valued.T @ weights.T).T)
    with np.errstate(invalid="ignore", divide="ignore"):
        means: FloatArray = totals / counts
    return means


def mean_rating(scores: SystemScores, *, weights: FloatArray | None = None) -> tuple[dict[str, Any], FloatArray | None]:
    """Systems ranked by the mean of their answers' scores; SE is the bootstrap standard deviation of the mean and
    the interval its percentile interval."""
    labels = scores.system_labels
    if scores.score.size == 0:
        return {
            "model": "mean_rating",
            "reference": None,
            "n_answers": 0,
            "n_prompts": 0,
            "undefined": "no answer has a score",
            "systems": [],
        }, None
    means = np.bincount(scores.system, weights=scores.score, minlength=len(labels)) / np.bincount(
        scores.system, minlength=len(labels)
    )
    ranks = competition_ranks_of(means)
    counts = np.bincount(scores.system, minlength=len(labels))
    boot: FloatArray | None = None
    boot_ranks: IntArray | None = None
    if weights is not None:
        boot = _weighted_means(scores, weights)
        # A system absent from a resample has no mean there; it is ranked last in that resample.
        boot_ranks = competition_ranks_of(np.where(np.isfinite(boot), boot, -np.inf))
    intervals = _rank_intervals(boot_ranks) if boot_ranks is not None else None
    systems = []
    for code, label in enumerate(labels):
        se_stat: Stat = undefined("no bootstrap")
        ci: Interval = undefined_interval("no bootstrap")
        if boot is not None:
            column = boot[:, code][np.isfinite(boot[:, code])]
            if column.size >= 2:
                se_stat = defined(float(column.std(ddof=1)))
                low, high = np.quantile(column, [0.025, 0.975])
                ci = interval(low, high)
        systems.append(
            {
                "system": label,
                "strength": defined(float(means[code])),
                "se": se_stat,
                "ci95": ci,
                "rank": int(ranks[code]),
                "rank_ci95": intervals[code] if intervals is not None else None,
                "n": int(counts[code]),
                "wins": None,
                "losses": None,
                "ties": None,
            }
        )
    systems.sort(key=lambda row: (row["rank"], row["system"]))
    return {
        "model": "mean_rating",
        "reference": None,
        "n_answers": int(scores.score.size),
        "n_prompts": int(np.unique(scores.prompt).size),
        "undefined": None,
        "systems": systems,
    }, boot


# ---------------------------------------------------------------- two rankings side by side


def _tau_b_rows(first: FloatArray, second: FloatArray) -> FloatArray:
    """Kendall's τ-b between the columns of each row pair (rounds x S); NaN when either row is constant."""
    upper = np.triu_indices(first.shape[1], k=1)
    a = np.sign(first[:, :, None] - first[:, None, :])[:, upper[0], upper[1]]
    b = np.sign(second[:, :, None] - second[:, None, :])[:, upper[0], upper[1]]
    concordance = (a * b).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        tau: FloatArray = concordance / np.sqrt((a != 0).sum(axis=1) * (b != 0).sum(axis=1))
    return tau


def ranking_agreement(
    first: dict[str, Any],
    first_boot: FloatArray | None,
    first_labels: tuple[str, ...],
    second: dict[str, Any],
    second_boot: FloatArray | None,
    second_labels: tuple[str, ...],
) -> dict[str, Any]:
    """Kendall's τ-b between two rankings' strengths on the systems both rank with a finite strength, and its
    percentile interval from the shared prompt bootstrap (both rankings fitted on the same resamples)."""
    first_values = {row["system"]: row["strength"]["value"] for row in first["systems"]}
    second_values = {row["system"]: row["strength"]["value"] for row in second["systems"]}
    common = sorted(
        name for name in first_values if first_values[name] is not None and second_values.get(name) is not None
    )
    result: dict[str, Any] = {"n_systems": len(common), "systems": common}
    if len(common) < 3:
        reason = f"only {len(common)} systems are ranked by both with a finite strength; at least 3 are needed"
        result.update({"kendall_tau": undefined(reason), "ci95": undefined_interval(reason)})
        return result
    point = _tau_b_rows(
        np.asarray([[first_values[name] for name in common]]), np.asarray([[second_values[name] for name in common]])
    )[0]
    result["kendall_tau"] = defined(float(point)) if np.isfinite(point) else undefined("constant input")
    if first_boot is None or second_boot is None:
        result["ci95"] = undefined_interval("no bootstrap")
        return result
    first_columns = [first_labels.index(name) for name in common]
    second_columns = [second_labels.index(name) for name in common]
    taus = _tau_b_rows(first_boot[:, first_columns], second_boot[:, second_columns])
    taus = taus[np.isfinite(taus)]
    if taus.size == 0:
        result["ci95"] = undefined_interval("no bootstrap resample was defined")
    else:
        low, high = np.quantile(taus, [0.025, 0.975])
        result["ci95"] = interval(low, high)
    return result


def prompt_weights(n_prompts: int, n_resamples: int, seed: int) -> FloatArray:
    """(rounds x prompts) draws of a prompt bootstrap with ``seed``: numpy's default generator (PCG64)."""
    if n_resamples < MIN_BOOTSTRAP:
        raise RankingError(f"the bootstrap needs at least {MIN_BOOTSTRAP} resamples, not {n_resamples}")
    return resampled_prompt_weights(np.random.default_rng(seed), n_resamples, max(n_prompts, 1))

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

Why one module of this size: Bradley-Terry, the mean-rating ranking and the agreement between two rankings share the
comparison tables, the bootstrap over prompts and one rank function, so every rank this module prints is computed
the same way.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from judging.statistics.correlation import _prompt_weights
from judging.statistics.results import Interval, Stat, defined, interval, undefined, undefined_interval

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

Z95 = 1.959963984540054
MIN_BOOTSTRAP = 100
_NEWTON_ITERATIONS = 100
_TOLERANCE = 1e-10
# Added to the bootstrap fits' Hessian diagonal, scaled to the comparisons per system: a finite strength moves by a
# relative 1e-6 or less, while a system that never wins in a resample gets a large negative strength, not −∞.
_BOOTSTRAP_RIDGE = 1e-7
_ROUNDS_PER_CHUNK = 64
# Up to this many prompts x pairs cells (40 MB in float32 per table) the bootstrap multiplies dense tables.
_DENSE_CELLS = 10_000_000


TIE_CONVENTIONS = {
    "half": "a tie counts as half a win to each side (Chatbot Arena)",
    "drop": "ties are left out",
    "davidson": "Davidson (1970) tie model, one tie parameter fitted with the strengths",
}
DEFAULT_TIES = "half"


class RankingError(ValueError):
    """Input that cannot be ranked; the message names the problem."""


@dataclass(frozen=True)
class Comparisons:
    """One entry per comparison: ``score`` is 1 when ``first`` won, 0 when ``second`` won, 0.5 for a tie."""

    prompt: IntArray
    first: IntArray
    second: IntArray
    score: FloatArray
    system_labels: tuple[str, ...]
    n_prompts: int

    @property
    def n(self) -> int:
        return int(self.score.size)


def comparisons_from(
    rows: Sequence[tuple[Hashable, str, str, float]], prompt_index: dict[Hashable, int] | None = None
) -> Comparisons:
    """(prompt, system, other system, score for system) rows; ``prompt_index`` shares prompt codes between sources
    (it is extended in place) so that two rankings can be bootstrapped over the same draws."""
    prompts = prompt_index if prompt_index is not None else {}
    labels = tuple(sorted({row[1] for row in rows} | {row[2] for row in rows}))
    code = {label: index for index, label in enumerate(labels)}
    kept = [row for row in rows if row[1] != row[2]]
    score = np.asarray([row[3] for row in kept], dtype=np.float64)
    outside = score[~((score >= 0.0) & (score <= 1.0))]
    if outside.size:
        raise RankingError(f"a comparison's score must lie between 0 and 1, not {outside[0]}")
    return Comparisons(
        prompt=np.asarray([prompts.setdefault(row[0], len(prompts)) for row in kept], dtype=np.int64),
        first=np.asarray([code[row[1]] for row in kept], dtype=np.int64),
        second=np.asarray([code[row[2]] for row in kept], dtype=np.int64),
        score=score,
        system_labels=labels,
        n_prompts=len(prompts),
    )


def choice_comparisons_from(
    prompts: IntArray,
    chosen: Sequence[str],
    other: Sequence[str],
    prompt_index: dict[Hashable, int] | None = None,
    *,
    tied: tuple[IntArray, Sequence[str], Sequence[str]] | None = None,
) -> Comparisons:
    """``comparisons_from`` of rows (prompt, chosen, other, 1.0), then the ``tied`` pairs (prompt, one, other, 0.5),
    given as columns, coded without a tuple per row: the same codes, labels and prompt order."""
    prompts_seen = prompt_index if prompt_index is not None else {}
    tied_prompts, tied_first, tied_second = tied if tied is not None else (np.zeros(0, dtype=np.int64), [], [])
    firsts, seconds = [*chosen, *tied_first], [*other, *tied_second]
    labels = tuple(sorted(set(firsts) | set(seconds)))
    code = {label: index for index, label in enumerate(labels)}
    first = np.fromiter((code[label] for label in firsts), dtype=np.int64, count=len(firsts))
    second = np.fromiter((code[label] for label in seconds), dtype=np.int64, count=len(seconds))
    score = np.concatenate([np.ones(len(chosen)), np.full(len(tied_first), 0.5)])
    kept = first != second
    all_prompts = np.concatenate([np.asarray(prompts, dtype=np.int64), np.asarray(tied_prompts, dtype=np.int64)])
    kept_prompts = all_prompts[kept]
    unique, first_seen, inverse = np.unique(kept_prompts, return_index=True, return_inverse=True)
    prompt_code = np.empty(unique.size, dtype=np.int64)
    for position in np.argsort(first_seen, kind="stable"):
        prompt_code[position] = prompts_seen.setdefault(int(unique[position]), len(prompts_seen))
    return Comparisons(
        prompt=prompt_code[inverse.reshape(-1)],
        first=first[kept],
        second=second[kept],
        score=score[kept],
        system_labels=labels,
        n_prompts=len(prompts_seen),
    )


def preference_comparisons(
    prompts: Sequence[Hashable], candidates: Sequence[Sequence[str]], chosen: Sequence[str | None]
) -> list[tuple[Hashable, str, str, float]]:
    """A best-of-K choice is a win of the chosen system over each other system shown; no choice is no comparison."""
    rows: list[tuple[Hashable, str, str, float]] = []
    for prompt, shown, pick in zip(prompts, candidates, chosen, strict=True):
        if pick is None or pick not in shown:
            continue
        rows.extend((prompt, pick, other, 1.0) for other in dict.fromkeys(shown) if other != pick)
    return rows


def tie_comparisons(
    prompts: Sequence[Hashable], candidates: Sequence[Sequence[str]]
) -> tuple[list[Hashable], list[str], list[str]]:
    """A tie among K systems shown is a tie between each pair of them (each pair once, in the order shown), as
    columns (prompt, one system, the other)."""
    tied_prompts: list[Hashable] = []
    first: list[str] = []
    second: list[str] = []
    for prompt, shown in zip(prompts, candidates, strict=True):
        distinct = list(dict.fromkeys(shown))
        for position, one in enumerate(distinct):
            for other in distinct[position + 1 :]:
                tied_prompts.append(prompt)
                first.append(one)
                second.append(other)
    return tied_prompts, first, second


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
    for _ in range(_NEWTON_ITERATIONS):
        probability = 1.0 / (1.0 + np.exp(-(strength @ difference.T)))
        expected = pair_totals * probability
        gradient = row_wins - expected @ first_of - (pair_totals - expected) @ second_of - ridge * strength
        information = expected * (1.0 - probability)
        hessian = np.zeros((rounds, size, size))
        hessian[:, first, second] = -information
        hessian[:, second, first] = -information
        hessian[:, diagonal, diagonal] = information @ either + ridge
        # The reference's row and column become the identity and its gradient 0: its strength stays 0.
        hessian[:, reference, :] = 0.0
        hessian[:, :, reference] = 0.0
        hessian[:, reference, reference] = 1.0
        gradient[:, reference] = 0.0
        step = np.linalg.solve(hessian, gradient[:, :, None])[:, :, 0]
        strength += step
        if np.max(np.abs(step)) < _TOLERANCE:
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
    for start in range(0, weights.shape[0], _ROUNDS_PER_CHUNK):
        chunk = weights[start : start + _ROUNDS_PER_CHUNK]
        if dense:
            chunk32 = chunk.astype(np.float32)
            pair_wins = (chunk32 @ doubled_wins).astype(np.float64) / 2.0
            pair_totals = (chunk32 @ totals_by_prompt).astype(np.float64)
        else:
            pair_wins = np.asarray((doubled_wins.T @ chunk.T).T) / 2.0
            pair_totals = np.asarray((totals_by_prompt.T @ chunk.T).T)
        ridge = _BOOTSTRAP_RIDGE * max(1.0, float(pair_totals.sum(axis=1).mean()) / size)
        out[start : start + chunk.shape[0]] = _newton(
            first, second, pair_wins, pair_totals, size, reference, ridge=ridge, start=initial
        )
    return out


def _without_ties(comparisons: Comparisons) -> Comparisons:
    """The comparisons that have a winner, with the same system and prompt codes (the bootstrap draws stay valid)."""
    decided = (comparisons.score == 0.0) | (comparisons.score == 1.0)
    return Comparisons(
        prompt=comparisons.prompt[decided],
        first=comparisons.first[decided],
        second=comparisons.second[decided],
        score=comparisons.score[decided],
        system_labels=comparisons.system_labels,
        n_prompts=comparisons.n_prompts,
    )


def _davidson_tables(
    comparisons: Comparisons, rows: IntArray, n_rows: int, size: int
) -> tuple[Any, Any, Any, IntArray, IntArray]:
    """Per row of ``rows`` (a prompt code per comparison, or one row for all) and unordered pair low < high present:
    low's outright wins, high's outright wins and ties, as sparse (n_rows x pairs) tables."""
    from scipy import sparse  # noqa: PLC0415 -- ~0.3 s to import, which a command without rankings skips

    low = np.minimum(comparisons.first, comparisons.second)
    high = np.maximum(comparisons.first, comparisons.second)
    low_score = np.where(comparisons.first == low, comparisons.score, 1.0 - comparisons.score)
    pair_keys, pair_code = np.unique(low * size + high, return_inverse=True)
    pair_code = pair_code.reshape(-1)
    shape = (n_rows, pair_keys.size)

    def table(mask: npt.NDArray[np.bool_]) -> Any:
        built = sparse.csr_matrix((mask.astype(np.float64), (rows, pair_code)), shape=shape)
        built.sum_duplicates()
        return built

    tie = (low_score > 0.0) & (low_score < 1.0)
    return table(low_score == 1.0), table(low_score == 0.0), table(tie), pair_keys // size, pair_keys % size


def _davidson_log_likelihood(
    params: FloatArray, first: IntArray, second: IntArray, won: FloatArray, lost: FloatArray, tied: FloatArray
) -> FloatArray:
    size = params.shape[1] - 1
    half_gap = (params[:, first] - params[:, second]) / 2.0
    log_nu = params[:, size : size + 1]
    log_denominator = np.logaddexp(np.logaddexp(half_gap, -half_gap), log_nu)
    total = won + lost + tied
    value: FloatArray = (won * half_gap - lost * half_gap + tied * log_nu - total * log_denominator).sum(axis=1)
    return value


def _davidson_derivatives(
    params: FloatArray,
    first: IntArray,
    second: IntArray,
    won: FloatArray,
    lost: FloatArray,
    tied: FloatArray,
    ridge: float,
) -> tuple[FloatArray, FloatArray]:
    """Gradient and observed information (minus the Hessian) of the ridged Davidson log-likelihood, per round. With
    d = λi − λj and D = exp(d/2) + exp(−d/2) + ν, a pair's share of ∂ℓ/∂d is (wins − losses)/2 − n(pi − pj)/2 and of
    ∂ℓ/∂log ν is ties − n·pt, where pi, pj and pt are the model's probabilities of a win, a loss and a tie."""
    rounds, size = params.shape[0], params.shape[1] - 1
    theta = size
    rows = np.arange(rounds)[:, None]
    total = won + lost + tied
    half_gap = (params[:, first] - params[:, second]) / 2.0
    log_nu = params[:, theta : theta + 1]
    log_denominator = np.logaddexp(np.logaddexp(half_gap, -half_gap), log_nu)
    p_first = np.exp(half_gap - log_denominator)
    p_second = np.exp(-half_gap - log_denominator)
    p_tie = np.exp(log_nu - log_denominator)
    gap_gradient = (won - lost) / 2.0 - total * (p_first - p_second) / 2.0
    gap_information = total / 4.0 * ((p_first + p_second) - (p_first - p_second) ** 2)
    cross_information = -total / 2.0 * (p_first - p_second) * p_tie
    gradient = np.zeros((rounds, size + 1))
    np.add.at(gradient, (rows, first[None, :]), gap_gradient)
    np.add.at(gradient, (rows, second[None, :]), -gap_gradient)
    gradient[:, theta] = (tied - total * p_tie).sum(axis=1)
    gradient -= ridge * params
    information = np.zeros((rounds, size + 1, size + 1))
    np.add.at(information, (rows, first[None, :], first[None, :]), gap_information)
    np.add.at(information, (rows, second[None, :], second[None, :]), gap_information)
    np.add.at(information, (rows, first[None, :], second[None, :]), -gap_information)
    np.add.at(information, (rows, second[None, :], first[None, :]), -gap_information)
    np.add.at(information, (rows, first[None, :], theta), cross_information)
    np.add.at(information, (rows, second[None, :], theta), -cross_information)
    information[:, theta, :size] = information[:, :size, theta]
    information[:, theta, theta] = (total * p_tie * (1.0 - p_tie)).sum(axis=1)
    diagonal = np.arange(size + 1)
    information[:, diagonal, diagonal] += ridge
    return gradient, information


def _davidson_newton(
    first: IntArray,
    second: IntArray,
    won: FloatArray,
    lost: FloatArray,
    tied: FloatArray,
    size: int,
    reference: int,
    *,
    ridge: float = 0.0,
    start: FloatArray | None = None,
) -> tuple[FloatArray, FloatArray]:
    """Davidson (1970) log-strengths and log ν of a batch of rounds by Newton's method with step halving (the
    log-likelihood is concave: a log-sum-exp of linear functions subtracted from a linear one), reference fixed at
    0. Pairs (first < second) carry, per round (rounds x pairs), first's outright wins, its losses and the ties.
    Returns (rounds x (S + 1)) parameters, log ν last, and the (rounds x (S + 1) x (S + 1)) observed information."""
    rounds = won.shape[0]
    total = won + lost + tied
    params = np.zeros((rounds, size + 1))
    if start is not None:
        params[:] = start
    else:
        # At equal strengths P(tie) = ν / (2 + ν): start ν at the share of ties.
        share = np.clip(tied.sum(axis=1) / np.maximum(total.sum(axis=1), 1.0), 1e-3, 0.999)
        params[:, size] = np.log(2.0 * share / (1.0 - share))
    params[:, reference] = 0.0

    def objective(values: FloatArray, which: Any = slice(None)) -> FloatArray:
        penalty: FloatArray = 0.5 * ridge * (values**2).sum(axis=1)
        return _davidson_log_likelihood(values, first, second, won[which], lost[which], tied[which]) - penalty

    information = np.zeros((rounds, size + 1, size + 1))
    current = objective(params)
    for _ in range(_NEWTON_ITERATIONS):
        gradient, information = _davidson_derivatives(params, first, second, won, lost, tied, ridge)
        solved = information.copy()
        solved[:, reference, :] = 0.0
        solved[:, :, reference] = 0.0
        solved[:, reference, reference] = 1.0
        gradient[:, reference] = 0.0
        step = np.linalg.solve(solved, gradient[:, :, None])[:, :, 0]
        scale = np.ones(rounds)
        candidate = params + step
        improved = objective(candidate)
        for _halving in range(40):
            worse = ~(improved >= current - 1e-12 * np.abs(current))
            if not worse.any():
                break
            scale[worse] /= 2.0
            candidate[worse] = params[worse] + scale[worse, None] * step[worse]
            improved[worse] = objective(candidate[worse], worse)
        params, current = candidate, improved
        if np.max(np.abs(scale[:, None] * step)) < _TOLERANCE:
            break
    return params, information


def _davidson_fit(
    comparisons: Comparisons, finite: list[int], reference_code: int
) -> tuple[FloatArray, FloatArray, float, float]:
    """Strengths (NaN outside ``finite``), their SEs, log ν and its SE, from the full sample."""
    size = len(comparisons.system_labels)
    code = {system: position for position, system in enumerate(finite)}
    keep = np.isin(comparisons.first, finite) & np.isin(comparisons.second, finite)
    local = Comparisons(
        prompt=np.zeros(int(keep.sum()), dtype=np.int64),
        first=np.asarray([code[int(c)] for c in comparisons.first[keep]], dtype=np.int64),
        second=np.asarray([code[int(c)] for c in comparisons.second[keep]], dtype=np.int64),
        score=comparisons.score[keep],
        system_labels=tuple(comparisons.system_labels[c] for c in finite),
        n_prompts=1,
    )
    won, lost, tied, first, second = _davidson_tables(local, local.prompt, 1, len(finite))
    local_reference = finite.index(reference_code)
    params, information = _davidson_newton(
        first, second, won.toarray(), lost.toarray(), tied.toarray(), len(finite), local_reference
    )
    free = [index for index in range(len(finite) + 1) if index != local_reference]
    covariance = np.linalg.inv(information[0][np.ix_(free, free)])
    errors = np.full(len(finite) + 1, np.nan)
    errors[free] = np.sqrt(np.diag(covariance))
    strength, se = np.full(size, np.nan), np.full(size, np.nan)
    strength[finite] = params[0, : len(finite)]
    se[finite] = errors[: len(finite)]
    return strength, se, float(params[0, -1]), float(errors[-1])


def _davidson_bootstrap(
    comparisons: Comparisons, reference: int, weights: FloatArray, initial: FloatArray, log_nu: float
) -> FloatArray:
    """(rounds x S) Davidson log-strengths of each prompt resample, as ``bootstrap_strengths`` does for
    Bradley–Terry (a negligible ridge keeps a resample's non-finite strengths, and log ν in a resample without ties,
    large but finite)."""
    size = len(comparisons.system_labels)
    won, lost, tied, first, second = _davidson_tables(comparisons, comparisons.prompt, weights.shape[1], size)
    start = np.append(initial, log_nu)
    out = np.empty((weights.shape[0], size))
    for begin in range(0, weights.shape[0], _ROUNDS_PER_CHUNK):
        chunk = weights[begin : begin + _ROUNDS_PER_CHUNK]
        counts = [np.asarray((table.T @ chunk.T).T) for table in (won, lost, tied)]
        ridge = _BOOTSTRAP_RIDGE * max(1.0, float(sum(c.sum(axis=1).mean() for c in counts)) / size)
        params, _information = _davidson_newton(
            first, second, counts[0], counts[1], counts[2], size, reference, ridge=ridge, start=start
        )
        out[begin : begin + chunk.shape[0]] = params[:, :size]
    return out


def _davidson_defined(comparisons: Comparisons, finite: list[int], tie_report: dict[str, Any]) -> bool:
    """Whether Davidson's ν is finite and positive on the systems with finite strengths; if not, says why in the
    report (with no tie ν's estimate is 0 and the strengths are Bradley–Terry's, which are then fitted)."""
    among = np.isin(comparisons.first, finite) & np.isin(comparisons.second, finite)
    tied = among & (comparisons.score > 0.0) & (comparisons.score < 1.0)
    if not finite:
        tie_report["tie_parameter"] = undefined("no strength is finite")
    elif not tied.any():
        tie_report["tie_parameter"] = undefined("no ties: the estimate of nu is 0 and the fit is Bradley-Terry's")
    elif tied.sum() == among.sum():
        tie_report["tie_parameter"] = undefined("every comparison is a tie: nu is not finite")
    else:
        return True
    return False


def _outcome_counts(comparisons: Comparisons) -> tuple[IntArray, IntArray, IntArray]:
    """Per system: comparisons won outright, lost outright and tied (any score strictly between 0 and 1)."""
    size = len(comparisons.system_labels)
    first_won = comparisons.score == 1.0
    second_won = comparisons.score == 0.0
    tie = ~(first_won | second_won)

    def count(first_mask: npt.NDArray[np.bool_], second_mask: npt.NDArray[np.bool_]) -> IntArray:
        return np.bincount(comparisons.first[first_mask], minlength=size) + np.bincount(
            comparisons.second[second_mask], minlength=size
        )

    return count(first_won, second_won), count(second_won, first_won), count(tie, tie)


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
    won, lost, tied = _outcome_counts(comparisons)
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
        comparisons = _without_ties(comparisons)
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
    davidson = ties == "davidson" and _davidson_defined(comparisons, finite, tie_report)
    log_nu = 0.0
    if davidson:
        strength, se, log_nu, log_nu_se = _davidson_fit(comparisons, finite, reference_code)
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
            _davidson_bootstrap(comparisons, reference_code, weights, initial, log_nu)
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
    return _prompt_weights(np.random.default_rng(seed), n_resamples, max(n_prompts, 1))

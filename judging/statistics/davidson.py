"""Davidson's (1970) tie model fitted by Newton's method: P(i beats j) = πi / (πi + πj + ν√(πiπj)) and
P(tie) = ν√(πiπj) / (the same), one tie parameter ν > 0 fitted with the strengths, on the full sample and on each
prompt resample of the bootstrap (the conventions are in judging.statistics.ranking)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from judging.statistics.arrays import FloatArray, IntArray
from judging.statistics.pairwise import (
    BOOTSTRAP_RIDGE,
    NEWTON_ITERATIONS,
    ROUNDS_PER_CHUNK,
    TOLERANCE,
    Comparisons,
    newton_step,
)
from judging.statistics.results import undefined


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
    for _ in range(NEWTON_ITERATIONS):
        gradient, information = _davidson_derivatives(params, first, second, won, lost, tied, ridge)
        step = newton_step(information.copy(), gradient, reference)
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
        if np.max(np.abs(scale[:, None] * step)) < TOLERANCE:
            break
    return params, information


def davidson_fit(
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


def davidson_bootstrap(
    comparisons: Comparisons, reference: int, weights: FloatArray, initial: FloatArray, log_nu: float
) -> FloatArray:
    """(rounds x S) Davidson log-strengths of each prompt resample, as ``bootstrap_strengths`` does for
    Bradley–Terry (a negligible ridge keeps a resample's non-finite strengths, and log ν in a resample without ties,
    large but finite)."""
    size = len(comparisons.system_labels)
    won, lost, tied, first, second = _davidson_tables(comparisons, comparisons.prompt, weights.shape[1], size)
    start = np.append(initial, log_nu)
    out = np.empty((weights.shape[0], size))
    for begin in range(0, weights.shape[0], ROUNDS_PER_CHUNK):
        chunk = weights[begin : begin + ROUNDS_PER_CHUNK]
        counts = [np.asarray((table.T @ chunk.T).T) for table in (won, lost, tied)]
        ridge = BOOTSTRAP_RIDGE * max(1.0, float(sum(c.sum(axis=1).mean() for c in counts)) / size)
        params, _information = _davidson_newton(
            first, second, counts[0], counts[1], counts[2], size, reference, ridge=ridge, start=start
        )
        out[begin : begin + chunk.shape[0]] = params[:, :size]
    return out


def davidson_defined(comparisons: Comparisons, finite: list[int], tie_report: dict[str, Any]) -> bool:
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

"""Pairwise comparisons between systems, the input of every ranking, and the settings of the Newton fits that
Bradley–Terry (judging.statistics.ranking) and Davidson's tie model (judging.statistics.davidson) share."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from judging.statistics.arrays import FloatArray, IntArray

NEWTON_ITERATIONS = 100
TOLERANCE = 1e-10
# Added to the bootstrap fits' Hessian diagonal, scaled to the comparisons per system: a finite strength moves by a
# relative 1e-6 or less, while a system that never wins in a resample gets a large negative strength, not −∞.
BOOTSTRAP_RIDGE = 1e-7
ROUNDS_PER_CHUNK = 64


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


def newton_step(information: FloatArray, gradient: FloatArray, reference: int) -> FloatArray:
    """The Newton step of every round of a batch (rounds x k x k information, rounds x k gradient) that holds the
    reference's parameter at 0: its row and column of the information become the identity and its gradient 0. Both
    arrays are overwritten."""
    information[:, reference, :] = 0.0
    information[:, :, reference] = 0.0
    information[:, reference, reference] = 1.0
    gradient[:, reference] = 0.0
    return np.asarray(np.linalg.solve(information, gradient[:, :, None])[:, :, 0], dtype=np.float64)


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


def without_ties(comparisons: Comparisons) -> Comparisons:
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


def outcome_counts(comparisons: Comparisons) -> tuple[IntArray, IntArray, IntArray]:
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

"""The preference question (which candidate is best), as pure numpy functions.

Input is one entry per answered preference: the prompt (turn) it was asked on, the systems shown as candidates,
the system chosen and whether the rater judged no candidate appropriate (and chose the least bad). An entry
without a choice, or whose choice is not among its candidates, is no preference and is left out by
``preference_data``, which counts it.

Win rates resample prompts (turns) with replacement, as the correlation intervals do: prompts are the sampled
units of an evaluation, systems are chosen, and every preference given on a drawn prompt comes along.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from judging.statistics.agreement import alpha_bootstrap_ci, krippendorff_alpha, ratings_from_long
from judging.statistics.correlation import _prompt_weights
from judging.statistics.results import Interval, Stat, defined, interval, undefined, undefined_interval

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class PreferenceData:
    """Answered preferences; ``shown[i, s]`` says whether system ``s`` was a candidate of preference ``i``."""

    prompt: IntArray
    question: IntArray  # same prompt and same candidates: the same question, the unit of agreement
    shown: BoolArray
    chosen: IntArray
    none_appropriate: BoolArray
    system_labels: tuple[str, ...]
    prompt_keys: tuple[Hashable, ...]
    n_skipped: int

    @property
    def n(self) -> int:
        return int(self.chosen.size)


def preference_data(
    prompts: Sequence[Hashable],
    candidates: Sequence[Sequence[str]],
    chosen: Sequence[str | None],
    none_appropriate: Sequence[bool],
) -> PreferenceData:
    """Build ``PreferenceData`` from parallel sequences, one entry per preference given."""
    if not (len(prompts) == len(candidates) == len(chosen) == len(none_appropriate)):
        raise ValueError("prompts, candidates, chosen and none_appropriate must have the same length")
    keep = [i for i in range(len(prompts)) if chosen[i] is not None and chosen[i] in candidates[i]]
    labels = tuple(sorted({key for i in keep for key in candidates[i]}))
    code = {label: index for index, label in enumerate(labels)}
    prompt_index: dict[Hashable, int] = {}
    question_index: dict[tuple[int, frozenset[str]], int] = {}
    prompt_codes: list[int] = []
    question_codes: list[int] = []
    shown = np.zeros((len(keep), len(labels)), dtype=bool)
    for row, i in enumerate(keep):
        prompt_code = prompt_index.setdefault(prompts[i], len(prompt_index))
        prompt_codes.append(prompt_code)
        question = (prompt_code, frozenset(candidates[i]))
        question_codes.append(question_index.setdefault(question, len(question_index)))
        shown[row, [code[key] for key in candidates[i]]] = True
    return PreferenceData(
        prompt=np.asarray(prompt_codes, dtype=np.int64),
        question=np.asarray(question_codes, dtype=np.int64),
        shown=shown,
        chosen=np.asarray([code[str(chosen[i])] for i in keep], dtype=np.int64),
        none_appropriate=np.asarray([bool(none_appropriate[i]) for i in keep], dtype=bool),
        system_labels=labels,
        prompt_keys=tuple(prompt_index),
        n_skipped=len(prompts) - len(keep),
    )


def _share(part: float, whole: float, reason: str) -> Stat:
    return defined(part / whole) if whole > 0 else undefined(reason)


def _ratio_intervals(
    numerator: FloatArray, denominator: FloatArray, weights: FloatArray, confidence: float
) -> list[Interval]:
    """Percentile interval of sum(numerator) / sum(denominator) for each row, the sums weighted by prompt draws;
    a resample where the denominator is zero has no ratio and is left out."""
    nums = weights @ numerator.T  # resamples x rows
    dens = weights @ denominator.T
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = nums / dens
    tail = (1.0 - confidence) / 2.0
    result: list[Interval] = []
    for column in range(ratios.shape[1]):
        finite = ratios[:, column][np.isfinite(ratios[:, column])]
        if finite.size == 0:
            result.append(undefined_interval("no bootstrap resample was defined"))
        else:
            low, high = np.quantile(finite, [tail, 1.0 - tail])
            result.append(interval(low, high))
    return result


def _by_prompt(values: FloatArray, prompt: IntArray, n_prompts: int) -> FloatArray:
    """Columns of ``values`` (preferences x k) summed per prompt, as k x prompts."""
    out = np.zeros((values.shape[1], n_prompts))
    for column in range(values.shape[1]):
        out[column] = np.bincount(prompt, weights=values[:, column], minlength=n_prompts)
    return out


def win_rates(
    data: PreferenceData, *, n_resamples: int = 1000, seed: int = 0, confidence: float = 0.95
) -> list[dict[str, Any]]:
    """Per system: how often it was shown, how often chosen, the win rate (chosen / shown) with a percentile
    bootstrap CI over prompts, and the share of its wins where the rater found no candidate appropriate."""
    n_systems = len(data.system_labels)
    if n_systems == 0:
        return []
    chosen = np.zeros((data.n, n_systems))
    chosen[np.arange(data.n), data.chosen] = 1.0
    shown = data.shown.astype(np.float64)
    n_prompts = len(data.prompt_keys)
    weights = _prompt_weights(np.random.default_rng(seed), n_resamples, n_prompts)
    intervals = _ratio_intervals(
        _by_prompt(chosen, data.prompt, n_prompts), _by_prompt(shown, data.prompt, n_prompts), weights, confidence
    )
    rows = []
    for code, label in enumerate(data.system_labels):
        wins = chosen[:, code] > 0
        rows.append(
            {
                "system": label,
                "shown": int(data.shown[:, code].sum()),
                "chosen": int(wins.sum()),
                "win_rate": _share(float(wins.sum()), float(shown[:, code].sum()), "never shown"),
                "win_rate_ci95": intervals[code],
                "none_appropriate": _share(
                    float((wins & data.none_appropriate).sum()), float(wins.sum()), "never chosen"
                ),
            }
        )
    return rows


def none_appropriate_share(data: PreferenceData) -> Stat:
    """Share of all preferences given with "none is appropriate"."""
    return _share(float(data.none_appropriate.sum()), float(data.n), "no preference given")


def preference_alpha(
    data: PreferenceData, *, n_resamples: int = 1000, seed: int = 0, confidence: float = 0.95
) -> dict[str, Any]:
    """Nominal Krippendorff's alpha on the chosen system, one unit per question (a prompt and its candidates:
    raters shown different candidates were not asked the same thing), with its bootstrap CI over units."""
    ratings = ratings_from_long(
        [int(q) for q in data.question],
        list(range(data.n)),  # alpha ignores rater identity
        [float(c) for c in data.chosen],
        raters_consistent=False,
    )
    per_unit = np.bincount(ratings.unit, minlength=ratings.n_units)
    return {
        "alpha": krippendorff_alpha(ratings, "nominal"),
        "alpha_ci95": alpha_bootstrap_ci(ratings, "nominal", n_resamples=n_resamples, seed=seed, confidence=confidence),
        "n_units": int(np.count_nonzero(per_unit >= 2)),
    }


# ---------------------------------------------------------------- pairwise judge versus the humans


def pair_outcomes(rows: Iterable[tuple[Hashable, str, str, str, int, int, float]]) -> dict[str, dict[Any, float]]:
    """Pairwise judgments to one outcome per aspect, prompt and pair of systems, the way the run's scores are
    made: a pair judged in both orders counts when both agree and as a tie when they do not; samples are averaged.

    Rows: (prompt, system, other system, aspect, sample, pair order, score for system: 1 win, 0.5 tie, 0 loss).
    The result maps each aspect to {(prompt, a, b): outcome for a} with a < b.
    """
    orders: dict[tuple[str, Hashable, str, str, int], dict[int, float]] = defaultdict(dict)
    for prompt, system, other, aspect, sample, order, score in rows:
        if system == other:
            continue
        if system < other:
            orders[(aspect, prompt, system, other, sample)][order] = float(score)
        else:
            orders[(aspect, prompt, other, system, sample)][order] = 1.0 - float(score)
    samples: dict[str, dict[Any, list[float]]] = defaultdict(lambda: defaultdict(list))
    for (aspect, prompt, first, second, _sample), found in orders.items():
        outcome = (found[0] if found[0] == found[1] else 0.5) if len(found) == 2 else next(iter(found.values()))
        samples[aspect][(prompt, first, second)].append(outcome)
    return {
        aspect: {pair: sum(values) / len(values) for pair, values in pairs.items()} for aspect, pairs in samples.items()
    }


def _sign(value: float) -> int:
    return 0 if value == 0 else (1 if value > 0 else -1)


def human_pair_margins(data: PreferenceData) -> dict[tuple[Hashable, str, str], int]:
    """Per prompt and pair of systems a < b shown together: preferences for a minus preferences for b, counting
    only the preferences that chose one of the two."""
    margins: dict[tuple[Hashable, str, str], int] = defaultdict(int)
    labels = data.system_labels
    for row in range(data.n):
        prompt = data.prompt_keys[int(data.prompt[row])]
        chosen = int(data.chosen[row])
        for other in np.flatnonzero(data.shown[row]):
            if int(other) == chosen:
                continue
            first, second = sorted((labels[chosen], labels[int(other)]))
            margins[(prompt, first, second)] += 1 if labels[chosen] == first else -1
    return margins


def judge_human_agreement(
    data: PreferenceData,
    judge: dict[Any, float],
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """How often the judge prefers the system the humans prefer, over the (prompt, pair of systems) that both
    compared: the humans' side is the majority of the preferences that chose one of the two, the judge's its
    outcome for the pair. Pairs tied on either side are counted and left out; the CI resamples prompts."""
    margins = human_pair_margins(data)
    shared = [pair for pair in judge if pair in margins]
    human_ties = sum(1 for pair in shared if margins[pair] == 0)
    judge_ties = sum(1 for pair in shared if margins[pair] != 0 and judge[pair] == 0.5)
    decided = [pair for pair in shared if margins[pair] != 0 and judge[pair] != 0.5]
    base: dict[str, Any] = {
        "n_pairs": len(shared),
        "n_decided": len(decided),
        "n_agree": 0,
        "human_ties": human_ties,
        "judge_ties": judge_ties,
    }
    if not shared:
        reason = "no prompt and pair of systems compared by both the judge and the humans"
        return {**base, "agreement": undefined(reason), "agreement_ci95": undefined_interval(reason)}
    if not decided:
        reason = "every shared pair is a tie for the humans or the judge"
        return {**base, "agreement": undefined(reason), "agreement_ci95": undefined_interval(reason)}
    prompt_index = {key: index for index, key in enumerate(sorted({pair[0] for pair in decided}, key=str))}
    prompts = np.asarray([prompt_index[pair[0]] for pair in decided], dtype=np.int64)
    agree = np.asarray([float(_sign(margins[pair]) == _sign(judge[pair] - 0.5)) for pair in decided], dtype=np.float64)
    n_prompts = len(prompt_index)
    weights = _prompt_weights(np.random.default_rng(seed), n_resamples, n_prompts)
    ci = _ratio_intervals(
        _by_prompt(agree[:, None], prompts, n_prompts),
        _by_prompt(np.ones((agree.size, 1)), prompts, n_prompts),
        weights,
        confidence,
    )[0]
    return {**base, "n_agree": int(agree.sum()), "agreement": defined(float(agree.mean())), "agreement_ci95": ci}


def preference_summary(
    data: PreferenceData,
    judges: dict[str, dict[str, dict[Any, float]]] | None = None,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """Everything the preference panel and the ``preferences`` section of the agreement report show.

    ``judges`` maps each pairwise judge to ``pair_outcomes`` of its judgments."""
    return {
        "n_preferences": data.n,
        "n_prompts": len(data.prompt_keys),
        "n_skipped": data.n_skipped,
        "none_appropriate": none_appropriate_share(data),
        "systems": win_rates(data, n_resamples=n_resamples, seed=seed),
        "agreement": preference_alpha(data, n_resamples=n_resamples, seed=seed),
        "judges": {
            name: {
                aspect: judge_human_agreement(data, pairs, n_resamples=n_resamples, seed=seed)
                for aspect, pairs in sorted(by_aspect.items())
            }
            for name, by_aspect in sorted((judges or {}).items())
        },
    }

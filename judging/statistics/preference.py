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
from judging.statistics.arrays import FloatArray, IntArray
from judging.statistics.correlation import resampled_prompt_weights
from judging.statistics.results import Interval, Stat, defined, interval, undefined, undefined_interval

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
    n_prompts = len(data.prompt_keys)
    # Counts per prompt and system straight from the codes: a dense (preferences x systems) float table would take
    # 800 MB at a million votes among 100 systems.
    cell = n_prompts * n_systems
    chosen_by_prompt = np.bincount(data.prompt * n_systems + data.chosen, minlength=cell).astype(np.float64)
    shown_rows, shown_systems = np.nonzero(data.shown)
    shown_by_prompt = np.bincount(data.prompt[shown_rows] * n_systems + shown_systems, minlength=cell).astype(
        np.float64
    )
    weights = resampled_prompt_weights(np.random.default_rng(seed), n_resamples, n_prompts)
    intervals = _ratio_intervals(
        chosen_by_prompt.reshape(n_prompts, n_systems).T,
        shown_by_prompt.reshape(n_prompts, n_systems).T,
        weights,
        confidence,
    )
    chosen_count = np.bincount(data.chosen, minlength=n_systems)
    shown_count = np.bincount(shown_systems, minlength=n_systems)
    none_wins = np.bincount(data.chosen[data.none_appropriate], minlength=n_systems)
    rows = []
    for code, label in enumerate(data.system_labels):
        rows.append(
            {
                "system": label,
                "shown": int(shown_count[code]),
                "chosen": int(chosen_count[code]),
                "win_rate": _share(float(chosen_count[code]), float(shown_count[code]), "never shown"),
                "win_rate_ci95": intervals[code],
                "none_appropriate": _share(float(none_wins[code]), float(chosen_count[code]), "never chosen"),
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
    weights = resampled_prompt_weights(np.random.default_rng(seed), n_resamples, n_prompts)
    ci = _ratio_intervals(
        _by_prompt(agree[:, None], prompts, n_prompts),
        _by_prompt(np.ones((agree.size, 1)), prompts, n_prompts),
        weights,
        confidence,
    )[0]
    return {**base, "n_agree": int(agree.sum()), "agreement": defined(float(agree.mean())), "agreement_ci95": ci}


def human_pair_votes(
    prompts: Sequence[Hashable],
    candidates: Sequence[Sequence[str]],
    chosen: Sequence[str | None],
    tie: Sequence[bool],
) -> dict[tuple[Hashable, str, str], list[float]]:
    """Every human vote on a pair of systems shown together, one per preference: per (prompt, a, b) with a < b, the
    outcome for a (1 a chosen, 0 b chosen, 0.5 a tie). A choice of a third candidate says nothing about the pair."""
    votes: dict[tuple[Hashable, str, str], list[float]] = defaultdict(list)
    for prompt, shown, choice, is_tie in zip(prompts, candidates, chosen, tie, strict=True):
        systems = sorted(set(shown))
        for position, first in enumerate(systems):
            for second in systems[position + 1 :]:
                if choice == first:
                    votes[(prompt, first, second)].append(1.0)
                elif choice == second:
                    votes[(prompt, first, second)].append(0.0)
                elif choice is None and is_tie:
                    votes[(prompt, first, second)].append(0.5)
    return votes


def _verdict(outcome: float) -> int:
    """A pair's outcome as a verdict: 1 the first system, −1 the second, 0 a tie (a judge's samples averaged to
    exactly one half, or disagreeing orders, are a tie)."""
    return _sign(outcome - 0.5)


def vote_agreement(judge: dict[Any, float], human_votes: dict[Any, list[float]]) -> dict[str, Any]:
    """Zheng et al. (2023, "Judging LLM-as-a-judge with MT-Bench and Chatbot Arena", section 4.2) agreement between a
    judge and the humans: the probability that the judge's verdict and a randomly drawn human vote on the same
    question (prompt and pair of systems) agree, counted over every (judge verdict, human vote) pair. With ties a tie
    is a third verdict that agrees only with a tie; without ties every pair in which either side is a tie is left
    out."""
    out: dict[str, Any] = {}
    for setting, keep_ties in (("with_ties", True), ("without_ties", False)):
        n = agree = 0
        for pair, outcome in judge.items():
            verdict = _verdict(outcome)
            for vote in human_votes.get(pair, ()):
                human = _verdict(vote)
                if not keep_ties and (verdict == 0 or human == 0):
                    continue
                n += 1
                agree += int(verdict == human)
        value = defined(agree / n) if n else undefined("no vote pair of the judge and a human on the same question")
        out[setting] = {"n_vote_pairs": n, "n_agree": agree, "agreement": value}
    return out


def preference_summary(
    data: PreferenceData,
    judges: dict[str, dict[str, dict[Any, float]]] | None = None,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    human_votes: dict[Any, list[float]] | None = None,
) -> dict[str, Any]:
    """Everything the preference panel and the ``preferences`` section of the agreement report show.

    ``judges`` maps each pairwise judge to ``pair_outcomes`` of its judgments; with ``human_votes``
    (``human_pair_votes``) each judge also gets Zheng et al.'s vote agreement with and without ties."""
    return {
        "n_preferences": data.n,
        "n_prompts": len(data.prompt_keys),
        "n_skipped": data.n_skipped,
        "none_appropriate": none_appropriate_share(data),
        "systems": win_rates(data, n_resamples=n_resamples, seed=seed),
        "agreement": preference_alpha(data, n_resamples=n_resamples, seed=seed),
        "judges": {
            name: {
                aspect: {
                    **judge_human_agreement(data, pairs, n_resamples=n_resamples, seed=seed),
                    **({"vote_agreement": vote_agreement(pairs, human_votes)} if human_votes is not None else {}),
                }
                for aspect, pairs in sorted(by_aspect.items())
            }
            for name, by_aspect in sorted((judges or {}).items())
        },
    }


# ---------------------------------------------------------------- one system against a baseline

WIN_RATE_METHODS = ("bootstrap", "wilson")


def head_to_head_scores(
    prompts: Sequence[Hashable],
    candidates: Sequence[Sequence[str]],
    chosen: Sequence[str | None],
    tie: Sequence[bool],
    system: str,
    baseline: str,
) -> tuple[list[Hashable], list[float]]:
    """The votes that compared ``system`` with ``baseline``: both among the candidates, and the choice one of the
    two (1 for the system, 0 for the baseline) or a tie (0.5). A choice of a third candidate says nothing about
    these two and is left out, as is an entry without a choice that is not a tie."""
    kept_prompts: list[Hashable] = []
    scores: list[float] = []
    for prompt, shown, choice, is_tie in zip(prompts, candidates, chosen, tie, strict=True):
        if system not in shown or baseline not in shown:
            continue
        if choice == system:
            scores.append(1.0)
        elif choice == baseline:
            scores.append(0.0)
        elif choice is None and is_tie:
            scores.append(0.5)
        else:
            continue
        kept_prompts.append(prompt)
    return kept_prompts, scores


def wilson_interval(share: float, n: int, confidence: float = 0.95) -> Interval:
    """Wilson's score interval (Wilson 1927) for a proportion ``share`` of ``n`` independent trials; with ties
    counted as half a win the share need not be a whole number of trials over n. Equals statsmodels'
    ``proportion_confint(count, n, method="wilson")``."""
    if n <= 0:
        return undefined_interval("no votes")
    from scipy.stats import norm  # noqa: PLC0415 - scipy.stats takes about 0.5 s; only this interval needs it

    z = float(norm.ppf(1.0 - (1.0 - confidence) / 2.0))
    denominator = 1.0 + z * z / n
    centre = (share + z * z / (2 * n)) / denominator
    half = z * np.sqrt(share * (1.0 - share) / n + z * z / (4 * n * n)) / denominator
    return interval(centre - half, centre + half)


def win_rate_against(
    prompts: Sequence[Hashable],
    scores: Sequence[float],
    *,
    method: str = "bootstrap",
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """The system's win rate against the baseline, ties counting half: mean score over the votes, with either a
    percentile bootstrap interval resampling prompts (votes on one prompt come along together, as in ``win_rates``)
    or Wilson's interval, which treats every vote as independent."""
    if method not in WIN_RATE_METHODS:
        raise ValueError(f"method must be one of {', '.join(WIN_RATE_METHODS)}")
    n = len(scores)
    prompt_index: dict[Hashable, int] = {}
    codes = np.asarray([prompt_index.setdefault(p, len(prompt_index)) for p in prompts], dtype=np.int64)
    values = np.asarray(scores, dtype=np.float64)
    base = {
        "n_votes": n,
        "n_prompts": len(prompt_index),
        "wins": int(np.count_nonzero(values == 1.0)),
        "ties": int(np.count_nonzero(values == 0.5)),
        "losses": int(np.count_nonzero(values == 0.0)),
        "method": method,
        "confidence": confidence,
    }
    if n == 0:
        reason = "no vote compared the system with the baseline"
        return {**base, "win_rate": undefined(reason), "interval": undefined_interval(reason)}
    share = float(values.mean())
    if method == "wilson":
        return {**base, "win_rate": defined(share), "interval": wilson_interval(share, n, confidence)}
    n_prompts = len(prompt_index)
    weights = resampled_prompt_weights(np.random.default_rng(seed), n_resamples, n_prompts)
    ci = _ratio_intervals(
        _by_prompt(values[:, None], codes, n_prompts),
        _by_prompt(np.ones((n, 1)), codes, n_prompts),
        weights,
        confidence,
    )[0]
    return {**base, "win_rate": defined(share), "interval": ci}

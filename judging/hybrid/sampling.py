"""Active human sampling in hybrid campaigns: after the judge has rated every answer, each task is sent to the human
raters with a known probability chosen by the researcher's policy, and the others are handed to the judge. The
probabilities are stored on the tasks, so the estimates can weight each human rating by its inverse (active
inference, Zrnic and Candès 2024) and the exports show them.

Policies (``Campaign.human_sampling``), each with the expected share s of tasks sent to humans:

- uniform: every task with probability s;
- uncertainty: π ∝ the judge's uncertainty on the task (the spread of its score distribution, else the disagreement
  of its samples; the largest over the campaign's aspects), mixed with the uniform rule and scaled to s·N
  (``active_ppi.sampling_probabilities``);
- stratified: strata by the campaign's ``sampling_stratum``, the round(s·N) ratings allocated by Neyman's rule
  n_k ∝ N_k σ_k with σ_k the mean judge uncertainty of the stratum (``stratified_ppi.optimal_allocation``), and
  exactly n_k tasks drawn in each, so π = n_k / N_k. The strata:
  - system: the system of the task's answer;
  - aspect: a task is rated on every aspect of the campaign, so it belongs to the aspect on which the judge is least
    certain (its largest uncertainty; a tie goes to the first in the campaign's aspect order);
  - confidence: the quartile bin of the task's uncertainty (see ``confidence_bins``).
  Each task stores its stratum, so the estimate combines the same strata.

The draw uses a random generator seeded from the campaign's recorded seed, so the same campaign draws the same tasks.
"""

from __future__ import annotations

import hashlib
import random
import secrets
from dataclasses import dataclass, field

from annotations.models import Campaign, HumanSampling, SamplingStratum, Task
from judging.models import JudgeRun, Judgment, JudgmentStatus

STRATUM_MINIMUM = 1


@dataclass(frozen=True)
class SamplingPlan:
    probability: dict[int, float]  # task id → probability of going to the humans
    to_humans: set[int]  # the task ids drawn for the humans
    stratum: dict[int, str] = field(default_factory=dict)  # task id → its stratum, under the stratified policy


def judge_uncertainty(run: JudgeRun, response_ids: list[int], aspect_names: list[str]) -> dict[int, float]:
    """Per answer, the judge's largest uncertainty over the aspects (``judge_uncertainty_by_aspect``)."""
    by_aspect = judge_uncertainty_by_aspect(run, response_ids, aspect_names)
    return {response_id: max(spread.values(), default=0.0) for response_id, spread in by_aspect.items()}


def judge_uncertainty_by_aspect(
    run: JudgeRun, response_ids: list[int], aspect_names: list[str]
) -> dict[int, dict[str, float]]:
    """Per answer and aspect (in the order of ``aspect_names``), the judge's uncertainty: the standard deviation of
    its score distribution when every judgment has one (averaged over samples), else of its sampled scores; 0 when
    the judge gave one bare score or none."""
    from judging.statistics.active_ppi import (  # noqa: PLC0415 - numpy; only sampling needs it
        uncertainty_from_distribution,
        uncertainty_from_samples,
    )

    found: dict[tuple[int, str], list[tuple[float, dict[str, float] | None]]] = {}
    rows = Judgment.objects.filter(
        run=run,
        response_id__in=response_ids,
        aspect_name__in=aspect_names,
        other_response__isnull=True,
        status=JudgmentStatus.DONE,
        score__isnull=False,
    ).values_list("response_id", "aspect_name", "score", "distribution")
    for response_id, aspect, score, distribution in rows:
        found.setdefault((response_id, aspect), []).append(
            (float(score or 0.0), distribution if isinstance(distribution, dict) and distribution else None)
        )
    spread = {response_id: dict.fromkeys(aspect_names, 0.0) for response_id in response_ids}
    for (response_id, aspect), judgments in found.items():
        distributions = [d for _, d in judgments if d is not None]
        if len(distributions) == len(judgments):
            averaged: dict[str, float] = {}
            for distribution in distributions:
                for key, mass in distribution.items():
                    averaged[key] = averaged.get(key, 0.0) + float(mass) / len(distributions)
            value = uncertainty_from_distribution(averaged)
        else:
            value = uncertainty_from_samples([score for score, _ in judgments])
        spread[response_id][aspect] = value
    return spread


CONFIDENCE_BINS = 4


def confidence_bins(uncertainty: dict[int, float]) -> dict[int, str]:
    """Each task's quartile bin of the judge's uncertainty, "q1" (most certain) to "q4": the cut points are the
    lower empirical quartiles c_j, the ⌈j·N/4⌉-th smallest uncertainty (j = 1, 2, 3), and a task's bin is 1 plus the
    number of cut points strictly below its uncertainty. Equal uncertainties always share a bin, so ties can leave
    fewer than four (a judge with two levels of certainty gives two)."""
    ordered = sorted(uncertainty.values())
    count = len(ordered)
    cuts = [ordered[-(-j * count // CONFIDENCE_BINS) - 1] for j in range(1, CONFIDENCE_BINS)] if count else []
    return {task_id: f"q{1 + sum(cut < value for cut in cuts)}" for task_id, value in uncertainty.items()}


def least_certain_aspect(spread: dict[str, float]) -> str:
    """The aspect with the judge's largest uncertainty; a tie goes to the first in the given (campaign) order."""
    return max(spread, key=lambda aspect: spread[aspect], default="")


def task_strata(
    kind: str,
    ids: list[int],
    *,
    uncertainty: dict[int, float],
    systems: dict[int, str],
    aspect_uncertainty: dict[int, dict[str, float]],
) -> dict[int, str]:
    """Each task's stratum under the campaign's stratum choice (see the module's docstring)."""
    if kind == SamplingStratum.ASPECT:
        return {task_id: least_certain_aspect(aspect_uncertainty.get(task_id, {})) for task_id in ids}
    if kind == SamplingStratum.CONFIDENCE:
        return confidence_bins({task_id: uncertainty.get(task_id, 0.0) for task_id in ids})
    return {task_id: systems.get(task_id, "") for task_id in ids}


def campaign_seed(campaign: Campaign) -> str:
    """The campaign's sampling seed, drawn and stored on first use so that a later look can replay the draw."""
    if not campaign.sampling_seed:
        Campaign.objects.filter(pk=campaign.pk, sampling_seed="").update(sampling_seed=secrets.token_hex(16))
        campaign.refresh_from_db(fields=["sampling_seed"])
    return campaign.sampling_seed


def _rng(seed: str) -> random.Random:
    return random.Random(int.from_bytes(hashlib.sha256(f"human-sampling:{seed}".encode()).digest()[:8], "big"))  # nosec B311 - a reproducible sampling draw, not a secret


def sampling_plan(
    *,
    campaign: Campaign,
    tasks: list[Task],
    uncertainty: dict[int, float],
    systems: dict[int, str],
    aspect_uncertainty: dict[int, dict[str, float]] | None = None,
) -> SamplingPlan:
    """Each task's probability under the campaign's policy and the seeded draw. ``uncertainty`` (the largest over the
    aspects), ``systems`` and ``aspect_uncertainty`` (per aspect, in the campaign's order) are per task id."""
    from judging.statistics.active_ppi import sampling_probabilities  # noqa: PLC0415 - numpy
    from judging.statistics.stratified_ppi import optimal_allocation  # noqa: PLC0415 - numpy

    if not tasks:
        return SamplingPlan({}, set())
    ids = [task.pk for task in tasks]
    rng = _rng(campaign_seed(campaign))
    budget = campaign.human_share * len(ids)
    policy = campaign.human_sampling
    if policy == HumanSampling.STRATIFIED:
        stratum = task_strata(
            campaign.sampling_stratum,
            ids,
            uncertainty=uncertainty,
            systems=systems,
            aspect_uncertainty=aspect_uncertainty or {},
        )
        strata: dict[str, list[int]] = {}
        for task_id in ids:
            strata.setdefault(stratum[task_id], []).append(task_id)
        keys = sorted(strata)
        sizes = [len(strata[key]) for key in keys]
        deviations = [sum(uncertainty.get(t, 0.0) for t in strata[key]) / len(strata[key]) for key in keys]
        floor = sum(min(size, STRATUM_MINIMUM) for size in sizes)
        counts = optimal_allocation(
            sizes, deviations, max(floor, min(len(ids), round(budget))), minimum=STRATUM_MINIMUM
        )
        probability, chosen = {}, set()
        for key, count in zip(keys, counts, strict=True):
            members = strata[key]
            for task_id in members:
                probability[task_id] = count / len(members)
            chosen.update(rng.sample(members, count))
        return SamplingPlan(probability, chosen, stratum)
    if policy == HumanSampling.UNCERTAINTY:
        pis = sampling_probabilities([uncertainty.get(t, 0.0) for t in ids], budget)
    else:
        pis = [campaign.human_share] * len(ids)
    probability = {task_id: min(1.0, pi) for task_id, pi in zip(ids, pis, strict=True)}
    return SamplingPlan(probability, {task_id for task_id in ids if rng.random() < probability[task_id]})

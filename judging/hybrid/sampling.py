"""Active human sampling in hybrid campaigns: after the judge has rated every answer, each task is sent to the human
raters with a known probability chosen by the researcher's policy, and the others are handed to the judge. The
probabilities are stored on the tasks, so the estimates can weight each human rating by its inverse (active
inference, Zrnic and Candès 2024) and the exports show them.

Policies (``Campaign.human_sampling``), each with the expected share s of tasks sent to humans:

- uniform: every task with probability s;
- uncertainty: π ∝ the judge's uncertainty on the task (the spread of its score distribution, else the disagreement
  of its samples; the largest over the campaign's aspects), mixed with the uniform rule and scaled to s·N
  (``active_ppi.sampling_probabilities``);
- stratified: strata by system, the round(s·N) ratings allocated by Neyman's rule n_k ∝ N_k σ_k with σ_k the mean
  judge uncertainty of the stratum (``stratified_ppi.optimal_allocation``), and exactly n_k tasks drawn in each, so
  π = n_k / N_k.

The draw uses a random generator seeded from the campaign's recorded seed, so the same campaign draws the same tasks.
"""

from __future__ import annotations

import hashlib
import random
import secrets
from dataclasses import dataclass

from annotations.models import Campaign, HumanSampling, Task
from judging.models import JudgeRun, Judgment, JudgmentStatus

STRATUM_MINIMUM = 1


@dataclass(frozen=True)
class SamplingPlan:
    probability: dict[int, float]  # task id → probability of going to the humans
    to_humans: set[int]  # the task ids drawn for the humans


def judge_uncertainty(run: JudgeRun, response_ids: list[int], aspect_names: list[str]) -> dict[int, float]:
    """Per answer, the judge's largest uncertainty over the aspects: the standard deviation of its score
    distribution when every judgment has one (averaged over samples), else of its sampled scores; 0 when the judge
    gave one bare score."""
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
    spread: dict[int, float] = {response_id: 0.0 for response_id in response_ids}
    for (response_id, _aspect), judgments in found.items():
        distributions = [d for _, d in judgments if d is not None]
        if len(distributions) == len(judgments):
            averaged: dict[str, float] = {}
            for distribution in distributions:
                for key, mass in distribution.items():
                    averaged[key] = averaged.get(key, 0.0) + float(mass) / len(distributions)
            value = uncertainty_from_distribution(averaged)
        else:
            value = uncertainty_from_samples([score for score, _ in judgments])
        spread[response_id] = max(spread[response_id], value)
    return spread


def campaign_seed(campaign: Campaign) -> str:
    """The campaign's sampling seed, drawn and stored on first use so that a later look can replay the draw."""
    if not campaign.sampling_seed:
        Campaign.objects.filter(pk=campaign.pk, sampling_seed="").update(sampling_seed=secrets.token_hex(16))
        campaign.refresh_from_db(fields=["sampling_seed"])
    return campaign.sampling_seed


def _rng(seed: str) -> random.Random:
    return random.Random(int.from_bytes(hashlib.sha256(f"human-sampling:{seed}".encode()).digest()[:8], "big"))  # nosec B311 - a reproducible sampling draw, not a secret


def sampling_plan(
    *, campaign: Campaign, tasks: list[Task], uncertainty: dict[int, float], systems: dict[int, str]
) -> SamplingPlan:
    """Each task's probability under the campaign's policy and the seeded draw. ``uncertainty`` and ``systems`` are
    per task id."""
    from judging.statistics.active_ppi import sampling_probabilities  # noqa: PLC0415 - numpy
    from judging.statistics.stratified_ppi import optimal_allocation  # noqa: PLC0415 - numpy

    if not tasks:
        return SamplingPlan({}, set())
    ids = [task.pk for task in tasks]
    rng = _rng(campaign_seed(campaign))
    budget = campaign.human_share * len(ids)
    policy = campaign.human_sampling
    if policy == HumanSampling.STRATIFIED:
        strata: dict[str, list[int]] = {}
        for task_id in ids:
            strata.setdefault(systems.get(task_id, ""), []).append(task_id)
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
        return SamplingPlan(probability, chosen)
    if policy == HumanSampling.UNCERTAINTY:
        pis = sampling_probabilities([uncertainty.get(t, 0.0) for t in ids], budget)
    else:
        pis = [campaign.human_share] * len(ids)
    probability = {task_id: min(1.0, pi) for task_id, pi in zip(ids, pis, strict=True)}
    return SamplingPlan(probability, {task_id for task_id in ids if rng.random() < probability[task_id]})

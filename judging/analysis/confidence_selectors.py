"""Reads of a judge's confidence in its own scores, for the Trust or Escalate threshold of hybrid campaigns."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from judging.analysis.selectors import Answers, FloatArray
from judging.models import Judge, Judgment, JudgmentStatus


@dataclass(frozen=True)
class JudgeConfidences:
    """Per answer row, the judge's chosen score and its confidence in it (NaN where it recorded none), and how many
    answers each source gave a confidence for."""

    chosen: FloatArray
    confidence: FloatArray
    sources: dict[str, int]


def judge_confidences(judge: Judge, answers: Answers, aspect_name: str) -> JudgeConfidences:
    """The judge's confidence on each answer for one aspect, from its run's finished single-answer judgments.

    One judgment with a score distribution (log-probabilities at the score token, or the shares of replies sampled
    when the provider gave none): the chosen score is the most probable one, the confidence its probability.
    Several samples of one answer: their distributions averaged when every one has a distribution, else the
    chosen score is the most frequent score and the confidence the share of samples that gave it.
    """
    from judging.statistics.trust_escalate import (  # noqa: PLC0415 - keeps scipy-using statistics off the import path of every read
        confidence_from_probabilities,
        confidence_from_samples,
    )

    size = answers.response_ids.size
    chosen, confidence = np.full(size, np.nan), np.full(size, np.nan)
    sources = {"score_distribution": 0, "samples": 0}
    rows = (
        Judgment.objects.filter(
            run__judge=judge,
            aspect_name=aspect_name,
            other_response__isnull=True,
            status=JudgmentStatus.DONE,
            score__isnull=False,
        )
        .order_by("response_id", "sample", "pair_order")
        .values_list("response_id", "score", "distribution")
    )
    by_response: dict[int, list[tuple[float, dict[str, float] | None]]] = {}
    for response_id, score, distribution in rows:
        by_response.setdefault(response_id, []).append(
            (float(score or 0.0), distribution if isinstance(distribution, dict) else None)
        )
    if not by_response:
        return JudgeConfidences(chosen, confidence, sources)
    response_ids = np.asarray(sorted(by_response), dtype=np.int64)
    known = np.isin(response_ids, answers.response_ids)
    for response_id, row in zip(
        response_ids[known].tolist(), answers.rows_of(response_ids[known]).tolist(), strict=True
    ):
        judgments = by_response[response_id]
        distributions = [distribution for _, distribution in judgments if distribution]
        if len(distributions) == len(judgments):
            averaged: dict[str, float] = {}
            for distribution in distributions:
                for key, mass in distribution.items():
                    averaged[key] = averaged.get(key, 0.0) + float(mass) / len(distributions)
            top = max(averaged, key=lambda key: (averaged[key], -float(key)))
            chosen[row], confidence[row] = float(top), confidence_from_probabilities(averaged, top)
            sources["score_distribution"] += 1
        elif len(judgments) > 1:
            chosen[row], confidence[row] = confidence_from_samples([score for score, _ in judgments])
            sources["samples"] += 1
    return JudgeConfidences(chosen, confidence, sources)

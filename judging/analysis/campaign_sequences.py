"""A campaign's confidence sequences over time, for its progress page: per aspect, each system's mean, and for each
pair of systems the paired difference and the win rate, and the judge's agreement with the humans where a judge
run scored the campaign's dataset. Every figure is the betting confidence sequence of ``judging.statistics.sequences``
(Waudby-Smith and Ramdas 2024) read look by look as the ratings arrived, beside the fixed-sample interval at the
latest look (valid only at a sample size planned in advance). docs/statistics.md defines each figure.

The sequences are recomputed only when the campaign's data change: the result is cached under the dataset's
statistics version (every rating, judge score, exclusion and gold mark moves it), as the other reports are."""

from __future__ import annotations

from typing import Any

import numpy as np

from annotations.models import AspectKind, Campaign
from judging.analysis.reports import DatasetData, cached_report
from judging.analysis.selectors import AspectInfo, judge_scores, rating_scope, stats_ratings_in_order
from judging.models import Judge, JudgeKind

# At most this many looks are drawn (evenly spaced, the last always kept); the sequence itself uses every look.
MAX_POINTS = 60
# Pairs of systems beyond this many (in key order) are left out: their number grows with the square of the systems.
MAX_PAIRS = 6
# Judge and human agree on a rating when they differ by at most this share of the aspect's range (one point on a
# 1-5 scale).
AGREEMENT_TOLERANCE = 0.25
CONFIDENCE = 0.95


def _thin(looks: list[dict[str, Any]]) -> list[int]:
    step = max(1, -(-len(looks) // MAX_POINTS))
    return [i for i in range(len(looks)) if i % step == 0 or i == len(looks) - 1]


def figure(
    kind: str,
    label: str,
    values: list[float],
    *,
    lower: float,
    upper: float,
    scale: tuple[float, float],
    empty: str,
    tolerance: float | None = None,
) -> dict[str, Any]:
    """One figure: the betting sequence of ``values`` on [lower, upper] (shown on ``scale``), its latest look, the
    fixed-sample interval at that look, and the looks to draw as [n, low, high, estimate]."""
    from judging.statistics.sequences import confidence_sequence, fixed_sample_intervals  # noqa: PLC0415 - numpy

    base: dict[str, Any] = {
        "kind": kind,
        "label": label,
        "scale": list(scale),
        "tolerance": tolerance,
        "n": len(values),
        "looks": len(values),
        "estimate": None,
        "low": None,
        "high": None,
        "fixed_low": None,
        "fixed_high": None,
        "fixed_undefined": None,
        "points": [],
        "undefined": None,
    }
    if not values:
        return base | {"undefined": empty, "fixed_undefined": empty}
    looks = confidence_sequence(values, lower=lower, upper=upper, confidence=CONFIDENCE)
    fixed = fixed_sample_intervals(values, confidence=CONFIDENCE)[-1]
    last = looks[-1]
    points = [
        [looks[i]["n"], looks[i]["interval"]["low"], looks[i]["interval"]["high"], looks[i]["estimate"]["value"]]
        for i in _thin([dict(look) for look in looks])
        if looks[i]["interval"]["low"] is not None
    ]
    return base | {
        "estimate": last["estimate"]["value"],
        "low": last["interval"]["low"],
        "high": last["interval"]["high"],
        "undefined": last["interval"]["undefined"],
        "fixed_low": fixed["interval"]["low"],
        "fixed_high": fixed["interval"]["high"],
        "fixed_undefined": fixed["interval"]["undefined"],
        "points": points,
    }


def win_value(a: float, b: float) -> float:
    """A prompt's outcome for the first system: 1 when it scored higher, 1/2 on a tie, 0 when lower."""
    return 1.0 if a > b else 0.5 if a == b else 0.0


def _aspect_figures(aspect: AspectInfo, rows: list[tuple[int, str, float]]) -> dict[str, Any]:
    """Rows are (prompt, system key, value) in the order the ratings were given."""
    from judging.statistics.sequences import first_ratings_paired  # noqa: PLC0415 - numpy

    lower, upper = aspect.min_value, aspect.max_value
    span = upper - lower
    systems = sorted({key for _turn, key, _value in rows})
    means = [
        figure(
            "mean",
            system,
            [value for _turn, key, value in rows if key == system],
            lower=lower,
            upper=upper,
            scale=(lower, upper),
            empty="no ratings yet",
        )
        for system in systems
    ]
    pairs = [(a, b) for i, a in enumerate(systems) for b in systems[i + 1 :]]
    differences, wins = [], []
    for first, second in pairs[:MAX_PAIRS]:
        scored = first_ratings_paired(rows, first, second)
        empty = "no prompt has ratings of both systems yet"
        differences.append(
            figure(
                "difference",
                f"{first} − {second}",
                [a - b for a, b in scored],
                lower=-span,
                upper=span,
                scale=(-span, span),
                empty=empty,
            )
        )
        wins.append(
            figure(
                "win",
                f"{first} > {second}",
                [win_value(a, b) for a, b in scored],
                lower=0.0,
                upper=1.0,
                scale=(0.0, 1.0),
                empty=empty,
            )
        )
    return {
        "aspect": aspect.label or aspect.name,
        "lower": lower,
        "upper": upper,
        "means": means,
        "differences": differences,
        "wins": wins,
        "pairs_left_out": max(0, len(pairs) - MAX_PAIRS),
        "agreement": None,
    }


def _compute(campaign: Campaign, data: DatasetData, judge_id: int | None) -> dict[str, Any]:
    scale_ids = set(campaign.aspects.filter(kind=AspectKind.SCALE).values_list("pk", flat=True))
    ordered = stats_ratings_in_order(campaign.dataset, rating_scope(campaign=campaign))
    answers = data.answers
    row_of = {int(response): i for i, response in enumerate(answers.response_ids)}
    judge_columns: dict[str, Any] = {}
    judge_name = None
    if judge_id is not None:
        judge = Judge.objects.get(pk=judge_id)
        judge_name = judge.name
        judge_columns = judge_scores(judge, answers)
    aspects = []
    for aspect in (aspect for aspect in data.aspects if aspect.id in scale_ids):
        # (prompt, system, value, answer) per rating: systems pair up on a prompt, the judge scored an answer.
        rows = [
            (int(answers.turn_ids[row_of[response]]), answers.system_keys[row_of[response]], value, response)
            for aspect_id, response, value in ordered
            if aspect_id == aspect.id and response in row_of
        ]
        result = _aspect_figures(aspect, [(turn, key, value) for turn, key, value, _response in rows])
        if judge_id is not None:
            column = judge_columns.get(aspect.name, np.full(answers.response_ids.size, np.nan))
            judge_of = {int(answers.response_ids[i]): float(column[i]) for i in np.flatnonzero(~np.isnan(column))}
            by_response = [(response, key, value) for _turn, key, value, response in rows]
            result["agreement"] = agreement_figure(aspect, by_response, judge_of)
        aspects.append(result)
    return {"judge": judge_name, "aspects": aspects}


def agreement_figure(aspect: AspectInfo, rows: list[tuple[int, str, float]], judge: dict[int, float]) -> dict[str, Any]:
    """The share of human ratings within the tolerance of the judge's score for the same answer and aspect, one look
    per human rating of an answer the judge scored."""
    span = aspect.max_value - aspect.min_value
    tolerance = AGREEMENT_TOLERANCE * span
    return figure(
        "agreement",
        f"|judge − human| ≤ {tolerance:g}",
        [float(abs(judge[response] - value) <= tolerance) for response, _key, value in rows if response in judge],
        lower=0.0,
        upper=1.0,
        scale=(0.0, 1.0),
        empty="no human rating of an answer the judge scored yet",
        tolerance=tolerance,
    )


def campaign_judge(campaign: Campaign) -> Judge | None:
    """The newest judge run made here on the campaign's dataset that has scores; None when there is none."""
    return (
        Judge.objects.filter(dataset_id=campaign.dataset_id, kind=JudgeKind.RUN, scores__isnull=False)
        .order_by("-created_at", "-pk")
        .first()
    )


def campaign_sequences(campaign: Campaign) -> dict[str, Any]:
    """{"judge" (its name, or None without a judge run), "aspects": [{"aspect", "lower", "upper", "means",
    "differences", "wins", "pairs_left_out", "agreement"}]}, each figure as ``figure`` gives it; cached until the
    dataset's statistics version moves."""
    judge = campaign_judge(campaign)
    judge_id = None if judge is None else judge.pk
    scope = rating_scope(campaign=campaign)
    return cached_report(
        campaign.dataset,
        scope,
        ["campaign-sequences", campaign.pk, judge_id],
        lambda data: _compute(campaign, data, judge_id),
    )

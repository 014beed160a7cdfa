"""The progress page's confidence sequences over time: every figure is the one judging.statistics.sequences gives on
the same ratings (the betting confidence sequence of Waudby-Smith and Ramdas 2024, and the fixed-sample CLT
interval), rebuilt here from the test's own plan of who gave which value in which order; too little data says
"undefined" with the reason; the figures are cached until a rating arrives, and their reads are a bounded number of
queries."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.core.cache import cache
from django.urls import reverse

from annotations.models import Campaign, Response
from judging.analysis import campaign_sequences as sequences_module
from judging.analysis.campaign_sequences import AGREEMENT_TOLERANCE, campaign_sequences
from judging.models import Judge, JudgeKind, JudgeScore
from judging.statistics.sequences import confidence_sequence, fixed_sample_intervals
from tests.annotate.quality_world import rate, study
from tests.annotate.test_exclusion_views import client_for

pytestmark = pytest.mark.django_db

ITEMS = 8
RANGES = {"factuality": (0.0, 3.0), "amount_info": (-1.0, 1.0)}


def plan(rater: int) -> Callable[[int, str, str], float]:
    def scores(position: int, system: str, aspect: str) -> float:
        if aspect == "factuality":
            return float((position * (rater + 2) + (2 if system == "sys_alpha" else 1)) % 4)
        return float((position + rater + (system == "sys_beta")) % 3 - 1)

    return scores


def judge_score(position: int) -> float:
    return float(position % 4)


@pytest.fixture
def rated(researcher, annotators) -> Campaign:  # type: ignore[no-untyped-def]
    cache.clear()
    campaign = study(researcher, annotators, items=ITEMS, raters_per_item=3)
    for position in range(ITEMS):
        for index, user in enumerate(annotators):
            rate(campaign, position, user, plan(index))
    return campaign


def with_judge(campaign: Campaign) -> None:
    """A judge run that scored factuality on sys_alpha's answers only: one judged rating per submission, so the
    order of the agreement's looks is the order of the submissions."""
    judge = Judge.objects.create(dataset=campaign.dataset, name="run-judge", kind=JudgeKind.RUN)
    for response in Response.objects.filter(turn__item__dataset=campaign.dataset, system__key="sys_alpha"):
        JudgeScore.objects.create(
            judge=judge, response=response, aspect_name="factuality", value=judge_score(response.turn.item.position)
        )


def expected(values: list[float], lower: float, upper: float) -> dict[str, Any]:
    last = confidence_sequence(values, lower=lower, upper=upper)[-1]
    fixed = fixed_sample_intervals(values)[-1]
    return {
        "n": len(values),
        "looks": len(values),
        "estimate": last["estimate"]["value"],
        "low": last["interval"]["low"],
        "high": last["interval"]["high"],
        "fixed_low": fixed["interval"]["low"],
        "fixed_high": fixed["interval"]["high"],
    }


def figures_by_plan(raters: int) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Every figure from the plan: ratings arrive item by item, rater by rater."""
    want = {}
    for aspect, (lower, upper) in RANGES.items():
        span = upper - lower
        for system in ("sys_alpha", "sys_beta"):
            values = [plan(r)(p, system, aspect) for p in range(ITEMS) for r in range(raters)]
            want[(aspect, "mean", system)] = expected(values, lower, upper)
        # A prompt pairs the first rating of each system: the first rater's, who rated both in one task.
        pairs = [(plan(0)(p, "sys_alpha", aspect), plan(0)(p, "sys_beta", aspect)) for p in range(ITEMS)]
        differences = [a - b for a, b in pairs]
        want[(aspect, "difference", "sys_alpha − sys_beta")] = expected(differences, -span, span)
        wins = [1.0 if a > b else 0.5 if a == b else 0.0 for a, b in pairs]
        want[(aspect, "win", "sys_alpha > sys_beta")] = expected(wins, 0.0, 1.0)
    return want


def figures_shown(result: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    names = {"Factuality": "factuality", "Amount Info": "amount_info"}
    found = {}
    for aspect in result["aspects"]:
        rows = [*aspect["means"], *aspect["differences"], *aspect["wins"]]
        rows += [aspect["agreement"]] if aspect["agreement"] else []
        for row in rows:
            found[(names[aspect["aspect"]], row["kind"], row["label"])] = {key: row[key] for key in EXPECTED_KEYS}
    return found


EXPECTED_KEYS = ("n", "looks", "estimate", "low", "high", "fixed_low", "fixed_high")


def test_every_figure_is_the_sequence_module_on_the_plan(rated, researcher):
    with_judge(rated)
    result = campaign_sequences(rated)
    assert result["judge"] == "run-judge"
    want = figures_by_plan(3)
    tolerance = AGREEMENT_TOLERANCE * 3.0
    agreement = [
        float(abs(judge_score(p) - plan(r)(p, "sys_alpha", "factuality")) <= tolerance)
        for p in range(ITEMS)
        for r in range(3)
    ]
    want[("factuality", "agreement", f"|judge − human| ≤ {tolerance:g}")] = expected(agreement, 0.0, 1.0)
    shown = figures_shown(result)
    # The judge scored no answer on amount_info: its agreement is undefined with the reason.
    amount = next(aspect for aspect in result["aspects"] if aspect["aspect"] == "Amount Info")
    assert amount["agreement"]["undefined"] == "no human rating of an answer the judge scored yet"
    del shown[("amount_info", "agreement", f"|judge − human| ≤ {AGREEMENT_TOLERANCE * 2.0:g}")]
    assert shown.keys() == want.keys()
    for key, figure in want.items():
        assert shown[key] == pytest.approx(figure, abs=1e-12), key
    # The looks drawn are the sequence's own, ending at the latest one.
    first = result["aspects"][0]["means"][0]
    values = [plan(r)(p, "sys_alpha", "factuality") for p in range(ITEMS) for r in range(3)]
    looks = confidence_sequence(values, lower=0.0, upper=3.0)
    assert first["points"] == [
        [look["n"], look["interval"]["low"], look["interval"]["high"], look["estimate"]["value"]] for look in looks
    ]

    response = client_for(researcher).get(reverse("campaign-progress", args=[rated.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert "Confidence sequences over time" in html and 'id="sequences-no-judge"' not in html
    assert "valid only at the planned size" in html
    row = html[html.index('data-kind="mean" data-label="sys_alpha"') :]
    row = row[: row.index("</tr>")]
    mean = want[("factuality", "mean", "sys_alpha")]
    assert f'<td class="sequence">[{mean["low"]:.3f}, {mean["high"]:.3f}]</td>' in row
    assert f'<td class="fixed">[{mean["fixed_low"]:.3f}, {mean["fixed_high"]:.3f}]</td>' in row
    assert f'<td class="n">{mean["n"]}</td><td class="looks">{mean["looks"]}</td>' in row
    assert '<svg class="sequence-chart"' in row


def test_no_ratings_is_undefined_with_the_reason(researcher, annotators):
    cache.clear()
    campaign = study(researcher, annotators, items=2)
    with_judge(campaign)
    result = campaign_sequences(campaign)
    factuality = result["aspects"][0]
    assert factuality["means"] == [] and factuality["differences"] == []
    assert factuality["agreement"]["undefined"] == "no human rating of an answer the judge scored yet"
    html = client_for(researcher).get(reverse("campaign-progress", args=[campaign.pk])).content.decode()
    assert "undefined: no human rating of an answer the judge scored yet" in html


def test_one_rating_each_leaves_the_fixed_interval_undefined(researcher, annotators):
    cache.clear()
    campaign = study(researcher, annotators, items=2)
    rate(campaign, 0, annotators[0], plan(0))
    result = campaign_sequences(campaign)
    mean = result["aspects"][0]["means"][0]
    assert mean["n"] == 1 and mean["undefined"] is None
    assert mean["fixed_undefined"] == "one value"
    html = client_for(researcher).get(reverse("campaign-progress", args=[campaign.pk])).content.decode()
    assert 'id="sequences-no-judge"' in html
    assert "undefined: one value" in html


def test_cached_until_a_rating_arrives_and_reads_are_bounded(
    researcher, annotators, django_assert_max_num_queries, monkeypatch
):
    cache.clear()
    campaign = study(researcher, annotators, items=3)
    rate(campaign, 0, annotators[0], plan(0))
    rate(campaign, 1, annotators[1], plan(1))
    with django_assert_max_num_queries(25):
        first = campaign_sequences(campaign)
    # Cached: only the statistics version and the judge are read again, and nothing is recomputed.
    real = sequences_module._compute

    def refuse(*args: object) -> None:
        raise AssertionError("recomputed although no rating changed")

    monkeypatch.setattr(sequences_module, "_compute", refuse)
    with django_assert_max_num_queries(14):
        assert campaign_sequences(campaign) == first
    monkeypatch.setattr(sequences_module, "_compute", real)
    assert first["aspects"][0]["means"][0]["n"] == 2
    rate(campaign, 2, annotators[2], plan(2))
    assert campaign_sequences(campaign)["aspects"][0]["means"][0]["n"] == 3

"""The pure quality rules, driven with numbers: gold scoring, Spearman against scipy, agreement, straight-lining,
flags at their thresholds, and the accuracy buckets."""

import random
from datetime import UTC, datetime, timedelta

import pytest
from scipy.stats import rankdata, spearmanr

from annotations.quality import metrics
from annotations.quality.metrics import Agreement, Measures, StraightLining


def test_a_rating_passes_within_tolerance_and_na_fails() -> None:
    assert metrics.rating_passes(value=2.0, expected=3.0, tolerance=1.0)
    assert metrics.rating_passes(value=3.0, expected=3.0, tolerance=0.0)
    assert not metrics.rating_passes(value=2.0, expected=3.0, tolerance=0.5)
    assert not metrics.rating_passes(value=None, expected=3.0, tolerance=3.0)
    assert not metrics.rating_passes(value=float("nan"), expected=3.0, tolerance=3.0)
    assert metrics.rating_passes(value=0.3, expected=0.1 + 0.2, tolerance=0.0)  # float noise is no failure


def test_a_gold_task_passes_only_when_every_expected_pair_passes() -> None:
    expected = {("a", "x"): 3.0, ("b", "x"): 0.0}
    assert metrics.gold_task_passes(expected=expected, given={("a", "x"): 3, ("b", "x"): 0}, tolerance=0)
    assert not metrics.gold_task_passes(expected=expected, given={("a", "x"): 3, ("b", "x"): 1}, tolerance=0)
    assert not metrics.gold_task_passes(expected=expected, given={("a", "x"): 3}, tolerance=0)  # unrated fails
    assert not metrics.gold_task_passes(expected=expected, given={("a", "x"): 3, ("b", "x"): None}, tolerance=0)
    assert metrics.gold_task_passes(expected={}, given={("a", "x"): 3}, tolerance=0) is None


def test_only_shown_numeric_expectations_are_scored() -> None:
    expected = {"a": {"x": 3, "y": "NA", "z": 1}, "b": {"x": True}, "c": {"x": 0}, "d": "junk"}
    pairs = metrics.expected_pairs(expected, systems=["a", "b", "d"], aspects=["x", "y"])
    assert pairs == {("a", "x"): 3.0}


@pytest.mark.parametrize("seed", range(20))
def test_spearman_equals_scipy_with_ties(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(3, 40)
    x = [float(rng.randint(0, 3)) for _ in range(n)]
    y = [rng.choice([-1.0, 0.0, 1.0]) + rng.random() * (seed % 2) for _ in range(n)]
    assert metrics.average_ranks(x) == list(rankdata(x))
    ours = metrics.spearman(x, y)
    theirs = spearmanr(x, y).statistic
    if ours is None:
        assert len(set(x)) == 1 or len(set(y)) == 1
    else:
        assert ours == pytest.approx(theirs, abs=1e-12)


def test_spearman_is_undefined_without_variation() -> None:
    assert metrics.spearman([1, 1, 1], [1, 2, 3]) is None
    assert metrics.spearman([1], [1]) is None


def test_agreement_weights_aspects_by_their_shared_answers() -> None:
    rng = random.Random(7)
    own, others = {}, {}
    expected_parts = []
    for aspect, n in (("x", 12), ("y", 6)):
        xs, means = [], []
        for answer in range(n):
            value = float(rng.randint(0, 3))
            theirs = [float(rng.randint(0, 3)), float(rng.randint(0, 3))]
            own[(answer, aspect)] = value
            others[(answer, aspect)] = theirs
            xs.append(value)
            means.append(sum(theirs) / 2)
        expected_parts.append((spearmanr(xs, means).statistic, n))
    own[(99, "y")] = 2.0  # nobody else rated it: not shared
    result = metrics.rater_agreement(own, others)
    assert result.shared == 18
    assert result.value == pytest.approx(sum(r * n for r, n in expected_parts) / 18, abs=1e-12)


def test_agreement_is_undefined_with_too_few_shared_answers_or_no_variation() -> None:
    few = {(i, "x"): float(i % 3) for i in range(metrics.AGREEMENT_MIN_SHARED - 1)}
    assert metrics.rater_agreement(few, {key: [1.0] for key in few}) == Agreement(None, 9, "too_few")
    flat = {(i, "x"): 1.0 for i in range(12)}
    assert metrics.rater_agreement(flat, {key: [float(key[0] % 3)] for key in flat}).reason == "no_variation"
    # An aspect with fewer than 5 shared answers is left out of the average.
    mixed = {**{(i, "x"): float(i % 4) for i in range(10)}, **{(i, "y"): float(i % 2) for i in range(4)}}
    theirs = {key: [value] if key[1] == "x" else [1 - value] for key, value in mixed.items()}
    assert metrics.rater_agreement(mixed, theirs).value == pytest.approx(1.0)


def test_straight_lining_counts_submissions_of_two_ratings_or_more() -> None:
    assert metrics.is_straight_lined([2.0]) is None
    assert metrics.is_straight_lined([]) is None
    assert metrics.is_straight_lined([2.0, 2.0, 2.0]) is True
    assert metrics.is_straight_lined([None, None]) is True
    assert metrics.is_straight_lined([2.0, None]) is False
    result = metrics.straight_lining([[1, 1], [1, 2], [3], [0, 0, 0]])
    assert (result.straight, result.counted, result.share) == (2, 3, pytest.approx(2 / 3))
    assert StraightLining(0, 0).share is None


def measures(**changes) -> Measures:  # type: ignore[no-untyped-def]
    values = {
        "gold_passed": 3,
        "gold_answered": 3,
        "attention_passed": 1,
        "attention_answered": 1,
        "agreement": Agreement(0.6, 20),
        "median_seconds": 30.0,
        "timed_submissions": 10,
        "straight": StraightLining(0, 10),
    }
    values.update(changes)
    return Measures(**values)


@pytest.mark.parametrize(
    ("changes", "codes"),
    [
        ({}, []),
        ({"gold_passed": 2}, ["gold"]),  # 0.67 < 0.7
        ({"gold_passed": 7, "gold_answered": 10}, []),  # exactly 0.7
        ({"gold_passed": 0, "gold_answered": 2}, []),  # too few gold answers to judge
        ({"attention_passed": 2, "attention_answered": 3}, ["attention"]),
        ({"straight": StraightLining(8, 10)}, ["straight_lining"]),
        ({"straight": StraightLining(7, 10)}, []),
        ({"straight": StraightLining(4, 4)}, []),  # fewer than 5 submissions
        ({"median_seconds": 9.9}, ["speed"]),  # a third of 30 is 10
        ({"median_seconds": 10.0}, []),
        ({"median_seconds": 1.0, "timed_submissions": 2}, []),
        ({"agreement": Agreement(0.1, 20)}, ["agreement"]),
        ({"agreement": Agreement(None, 3, "too_few")}, []),
        (
            {"gold_passed": 0, "attention_passed": 0, "agreement": Agreement(-0.3, 20)},
            ["gold", "attention", "agreement"],
        ),
    ],
)
def test_flags_at_their_thresholds(changes, codes) -> None:  # type: ignore[no-untyped-def]
    assert [flag.code for flag in metrics.flags(measures(**changes), campaign_median_seconds=30.0)] == codes


def test_no_speed_flag_without_a_campaign_median() -> None:
    assert metrics.flags(measures(median_seconds=0.5), campaign_median_seconds=None) == []


def test_accuracy_buckets_by_hour_within_two_days_and_by_day_beyond() -> None:
    start = datetime(2026, 5, 1, 10, 30, tzinfo=UTC)
    width, buckets = metrics.accuracy_over_time(
        [(start, True), (start + timedelta(minutes=10), False), (start + timedelta(hours=5), True)]
    )
    assert width == metrics.HOUR
    assert [(b.start.hour, b.passed, b.answered) for b in buckets] == [(10, 1, 2), (15, 1, 1)]
    width, buckets = metrics.accuracy_over_time([(start, True), (start + timedelta(days=3), False)])
    assert width == metrics.DAY
    assert [(b.start.day, b.accuracy) for b in buckets] == [(1, 1.0), (4, 0.0)]
    assert metrics.accuracy_over_time([]) == (metrics.HOUR, [])


def test_accuracy_chart_places_bars_on_a_zero_to_one_axis() -> None:
    start = datetime(2026, 5, 1, tzinfo=UTC)
    buckets = [metrics.AccuracyBucket(start, 1, 1), metrics.AccuracyBucket(start, 1, 2)]
    chart = metrics.accuracy_chart(buckets, labels=["a", "b"], width=200, height=100)
    full, half = chart.bars
    assert full.y == chart.top and full.height == chart.baseline - chart.top
    assert half.height == pytest.approx(full.height / 2, abs=0.01)
    assert full.x + full.width < half.x <= chart.width
    assert full.x >= chart.left
    assert [(tick.y, tick.label) for tick in chart.ticks] == [
        (chart.baseline, "0"),
        (chart.baseline - half.height, "0.5"),
        (chart.top, "1"),
    ]


def test_agreement_counts_only_the_shared_answers_its_value_is_computed_from() -> None:
    # Two aspects of 18 shared answers each; the other raters gave one value everywhere on "flat", so its correlation
    # is undefined and only the 18 answers of "varied" make the figure.
    own = {**{(i, "varied"): float(i % 4) for i in range(18)}, **{(i, "flat"): float(i % 3) for i in range(18)}}
    others = {key: [value] if key[1] == "varied" else [2.0] for key, value in own.items()}
    result = metrics.rater_agreement(own, others)
    assert result.value == pytest.approx(1.0)
    assert (result.shared, result.counted) == (36, 18)


def test_the_speed_flag_carries_the_campaign_median_it_compares_with() -> None:
    from annotations.quality.selectors import flag_text

    (flag,) = metrics.flags(measures(median_seconds=1.0), campaign_median_seconds=7.5)
    assert flag.code == "speed"
    assert flag.bound == pytest.approx(2.5)
    text = flag_text(flag)
    assert "(7.5 s)" in text, text
    assert "2.5 s" not in text.split("(7.5 s)")[0]

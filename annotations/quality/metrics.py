"""Rater quality measures as pure functions: gold scoring, agreement with the other raters, straight-lining, speed,
and the flags raised from them. No ORM and no web here: annotations/quality/selectors.py reads the rows and hands
plain values in, so every rule has one implementation that tests can drive with numbers."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

# A rating within this much of the tolerance still passes: values arrive as floats from JSON and forms.
TOLERANCE_SLACK = 1e-9

# Thresholds of the flags (docs/quality.md explains each one).
GOLD_ACCURACY_BELOW = 0.7
GOLD_MIN_ANSWERED = 3
STRAIGHT_LINING_AT_LEAST = 0.8
STRAIGHT_LINING_MIN_SUBMISSIONS = 5
SPEED_FRACTION_OF_CAMPAIGN_MEDIAN = 1 / 3
SPEED_MIN_SUBMISSIONS = 3
AGREEMENT_BELOW = 0.2
AGREEMENT_MIN_SHARED = 10
# Fewer shared answers of one aspect than this and that aspect's correlation is not computed.
AGREEMENT_MIN_PER_ASPECT = 5

NA = "n/a"  # how an N/A rating counts towards straight-lining: as one more value


# --- gold items and attention checks ----------------------------------------------------------------------------


def rating_passes(*, value: float | None, expected: float, tolerance: float) -> bool:
    """A missing (N/A) rating fails: a gold item asks for a score."""
    if value is None or math.isnan(value):
        return False
    return abs(value - expected) <= tolerance + TOLERANCE_SLACK


def expected_pairs(
    expected: Mapping[str, Mapping[str, object]], *, systems: Iterable[str], aspects: Iterable[str]
) -> dict[tuple[str, str], float]:
    """The (system, aspect) values a task can be scored on: those the task showed. A number is expected; anything
    else (a malformed entry) is not scored rather than failing every rater."""
    shown_systems, shown_aspects = set(systems), set(aspects)
    pairs = {}
    for system, by_aspect in expected.items():
        if system not in shown_systems or not isinstance(by_aspect, Mapping):
            continue
        for aspect, value in by_aspect.items():
            if aspect in shown_aspects and isinstance(value, int | float) and not isinstance(value, bool):
                pairs[(system, aspect)] = float(value)
    return pairs


def gold_task_passes(
    *, expected: Mapping[tuple[str, str], float], given: Mapping[tuple[str, str], float | None], tolerance: float
) -> bool | None:
    """True when every expected (system, aspect) was rated within tolerance; an expected pair left unrated fails.
    None when nothing shown was expected, so the task measures nothing."""
    if not expected:
        return None
    return all(
        rating_passes(value=given.get(pair), expected=value, tolerance=tolerance) for pair, value in expected.items()
    )


# --- agreement --------------------------------------------------------------------------------------------------


def average_ranks(values: Sequence[float]) -> list[float]:
    """Ranks from 1, ties sharing the mean of the ranks they span."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        shared = (start + end) / 2 + 1
        for position in range(start, end + 1):
            ranks[order[position]] = shared
        start = end + 1
    return ranks


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """None when either side does not vary (the coefficient is undefined)."""
    n = len(x)
    if n < 2 or n != len(y):
        return None
    mean_x, mean_y = sum(x) / n, sum(y) / n
    sxx = sum((a - mean_x) ** 2 for a in x)
    syy = sum((b - mean_y) ** 2 for b in y)
    if sxx == 0 or syy == 0:
        return None
    sxy = sum((a - mean_x) * (b - mean_y) for a, b in zip(x, y, strict=True))
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    return pearson(average_ranks(x), average_ranks(y))


@dataclass(frozen=True)
class Agreement:
    """Spearman's rho of a rater's values against the mean of the other raters on the same answers, per aspect,
    averaged over the aspects weighted by their number of shared answers. `reason` says why it is undefined."""

    value: float | None
    shared: int
    reason: str = ""  # "too_few" | "no_variation" when value is None
    # The shared answers of the aspects whose correlation entered the average: an aspect with too few of them, or
    # without variation on one side, is shared but not counted.
    counted: int = 0


def rater_agreement(
    own: Mapping[tuple[int, str], float], others: Mapping[tuple[int, str], Sequence[float]]
) -> Agreement:
    """`own` maps (answer, aspect) to this rater's value, `others` to the other raters' values on the same answer
    and aspect (N/A ratings left out of both). An answer is shared when both sides have a value."""
    by_aspect: dict[str, tuple[list[float], list[float]]] = {}
    for (answer, aspect), value in own.items():
        theirs = others.get((answer, aspect))
        if theirs:
            xs, ys = by_aspect.setdefault(aspect, ([], []))
            xs.append(value)
            ys.append(sum(theirs) / len(theirs))
    shared = sum(len(xs) for xs, _ in by_aspect.values())
    if shared < AGREEMENT_MIN_SHARED:
        return Agreement(value=None, shared=shared, reason="too_few")
    weighted, weight = 0.0, 0
    for xs, ys in by_aspect.values():
        if len(xs) < AGREEMENT_MIN_PER_ASPECT:
            continue
        rho = spearman(xs, ys)
        if rho is not None:
            weighted += rho * len(xs)
            weight += len(xs)
    if weight == 0:
        return Agreement(value=None, shared=shared, reason="no_variation")
    return Agreement(value=weighted / weight, shared=shared, counted=weight)


# --- straight-lining and speed ----------------------------------------------------------------------------------


def is_straight_lined(values: Sequence[float | None]) -> bool | None:
    """One value everywhere in a submission (N/A counting as a value); None when it holds fewer than 2 ratings,
    which say nothing either way."""
    if len(values) < 2:
        return None
    return len({NA if value is None else value for value in values}) == 1


@dataclass(frozen=True)
class StraightLining:
    straight: int
    counted: int

    @property
    def share(self) -> float | None:
        return self.straight / self.counted if self.counted else None


def straight_lining(submissions: Iterable[Sequence[float | None]]) -> StraightLining:
    verdicts = [v for v in (is_straight_lined(values) for values in submissions) if v is not None]
    return StraightLining(straight=sum(verdicts), counted=len(verdicts))


def median_or_none(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


# --- flags ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Flag:
    """Why a rater is flagged: `code` names the rule; `value` is what the rater showed, `bound` the threshold."""

    code: str  # "gold" | "attention" | "straight_lining" | "speed" | "agreement"
    value: float
    bound: float
    # What the bound derives from, when it is not a fixed threshold: the campaign median of a speed flag.
    reference: float | None = None


@dataclass(frozen=True)
class Measures:
    gold_passed: int
    gold_answered: int
    attention_passed: int
    attention_answered: int
    agreement: Agreement
    median_seconds: float | None
    timed_submissions: int
    straight: StraightLining


def flags(measures: Measures, *, campaign_median_seconds: float | None) -> list[Flag]:
    found = []
    if measures.gold_answered >= GOLD_MIN_ANSWERED:
        accuracy = measures.gold_passed / measures.gold_answered
        if accuracy < GOLD_ACCURACY_BELOW:
            found.append(Flag("gold", accuracy, GOLD_ACCURACY_BELOW))
    failed_checks = measures.attention_answered - measures.attention_passed
    if failed_checks > 0:
        found.append(Flag("attention", failed_checks, 0))
    share = measures.straight.share
    if (
        share is not None
        and measures.straight.counted >= STRAIGHT_LINING_MIN_SUBMISSIONS
        and share >= STRAIGHT_LINING_AT_LEAST
    ):
        found.append(Flag("straight_lining", share, STRAIGHT_LINING_AT_LEAST))
    if (
        measures.median_seconds is not None
        and campaign_median_seconds
        and measures.timed_submissions >= SPEED_MIN_SUBMISSIONS
    ):
        bound = campaign_median_seconds * SPEED_FRACTION_OF_CAMPAIGN_MEDIAN
        if measures.median_seconds < bound:
            found.append(Flag("speed", measures.median_seconds, bound, reference=campaign_median_seconds))
    if measures.agreement.value is not None and measures.agreement.value < AGREEMENT_BELOW:
        found.append(Flag("agreement", measures.agreement.value, AGREEMENT_BELOW))
    return found


# --- gold accuracy over time ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AccuracyBucket:
    start: datetime
    passed: int
    answered: int

    @property
    def accuracy(self) -> float:
        return self.passed / self.answered


TICKS = ((0.0, "0"), (0.5, "0.5"), (1.0, "1"))
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)


def bucket_width(moments: Sequence[datetime]) -> timedelta:
    """Hours for a study that ran within two days, days for a longer one."""
    if not moments or max(moments) - min(moments) <= 2 * DAY:
        return HOUR
    return DAY


def _bucket_start(moment: datetime, width: timedelta) -> datetime:
    start = moment.replace(minute=0, second=0, microsecond=0)
    return start.replace(hour=0) if width == DAY else start


def accuracy_over_time(answers: Iterable[tuple[datetime, bool]]) -> tuple[timedelta, list[AccuracyBucket]]:
    """Gold answers (submitted at, passed) grouped by hour or day of submission, in time order; empty buckets
    are left out."""
    answers = list(answers)
    width = bucket_width([moment for moment, _ in answers])
    counts: dict[datetime, list[int]] = {}
    for moment, passed in answers:
        bucket = counts.setdefault(_bucket_start(moment, width), [0, 0])
        bucket[0] += int(passed)
        bucket[1] += 1
    return width, [AccuracyBucket(start, passed, answered) for start, (passed, answered) in sorted(counts.items())]


@dataclass(frozen=True)
class ChartBar:
    x: float
    y: float
    width: float
    height: float
    label: str
    accuracy: float
    answered: int
    label_x: float
    label_y: float
    value_y: float


@dataclass(frozen=True)
class ChartTick:
    y: float
    label: str


@dataclass(frozen=True)
class AccuracyChart:
    width: int
    height: int
    left: float
    top: float
    baseline: float
    threshold_y: float
    bars: list[ChartBar]
    ticks: list[ChartTick]


def accuracy_chart(
    buckets: Sequence[AccuracyBucket], *, labels: Sequence[str], width: int = 480, height: int = 180
) -> AccuracyChart:
    """Bar geometry for an SVG: one bar per bucket, height = accuracy on a fixed 0 to 1 axis, with a line at the
    flag threshold. The template only places the shapes."""
    left, right, top, bottom = 32.0, 8.0, 14.0, 22.0
    plot_height = height - top - bottom
    slot = (width - left - right) / max(len(buckets), 1)
    baseline = top + plot_height
    bars = []
    for index, (bucket, label) in enumerate(zip(buckets, labels, strict=True)):
        bar_height = plot_height * bucket.accuracy
        x = left + index * slot + slot * 0.1
        bars.append(
            ChartBar(
                x=round(x, 2),
                y=round(baseline - bar_height, 2),
                width=round(slot * 0.8, 2),
                height=round(bar_height, 2),
                label=label,
                accuracy=bucket.accuracy,
                answered=bucket.answered,
                label_x=round(x + slot * 0.4, 2),
                label_y=height - 6,
                value_y=round(baseline - bar_height - 3, 2),
            )
        )
    threshold_y = round(baseline - plot_height * GOLD_ACCURACY_BELOW, 2)
    ticks = [ChartTick(y=round(baseline - plot_height * share, 2), label=label) for share, label in TICKS]
    return AccuracyChart(
        width=width,
        height=height,
        left=left,
        top=top,
        baseline=baseline,
        threshold_y=threshold_y,
        bars=bars,
        ticks=ticks,
    )

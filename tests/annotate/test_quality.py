"""Rater quality on a real campaign: gold accuracy and attention checks, agreement (against scipy), speed,
straight-lining, flags, exclusions, and the accuracy over time."""

from datetime import UTC, datetime, timedelta

import pytest
from scipy.stats import spearmanr

from annotations.models import Rater, Rating
from annotations.quality import metrics
from annotations.quality.models import RaterExclusion
from annotations.quality.selectors import quality_panel, rater_quality
from tests.annotate.quality_world import NA, careful, careful_but_noisy, one_value, rate, study

pytestmark = pytest.mark.django_db

GOLD = {"sys_alpha": {"factuality": 3}, "sys_beta": {"factuality": 0}}
CHECK = {"sys_alpha": {"amount_info": 1}, "sys_beta": {"amount_info": 1}}


def by_user(campaign):  # type: ignore[no-untyped-def]
    return {row.user_id: row for row in rater_quality(campaign)}


def test_a_straight_liner_is_flagged_and_a_careful_rater_is_not(researcher, annotator1, annotator2, annotator3):
    campaign = study(researcher, [annotator1, annotator2, annotator3], items=6)
    for position in range(6):
        rate(campaign, position, annotator1, one_value(1))
        rate(campaign, position, annotator2, careful)
        rate(campaign, position, annotator3, careful_but_noisy(1))
    rows = by_user(campaign)
    liner, good = rows[annotator1.pk], rows[annotator2.pk]
    assert liner.straight.straight == liner.straight.counted == 6
    assert [flag.code for flag in liner.flags] == ["straight_lining"]
    assert liner.flag_reasons == ["one value everywhere in 100% of submissions (flag at 80%)"]
    assert liner.agreement.value is None and liner.agreement.reason == "no_variation"
    assert good.flags == [] and good.flag_reasons == [] and good.straight.straight == 0
    assert rows[annotator3.pk].flags == []
    # Flagged rows come first.
    assert rater_quality(campaign)[0].user_id == annotator1.pk


def test_straight_lining_needs_five_submissions(researcher, annotator1, annotator2):
    campaign = study(researcher, [annotator1, annotator2], items=6, raters_per_item=2)
    for position in range(4):
        rate(campaign, position, annotator1, one_value(0))
    assert by_user(campaign)[annotator1.pk].flags == []
    rate(campaign, 4, annotator1, one_value(0))
    assert [flag.code for flag in by_user(campaign)[annotator1.pk].flags] == ["straight_lining"]


def test_na_everywhere_counts_as_one_value(researcher, annotator1):
    campaign = study(researcher, [annotator1], items=5, raters_per_item=1)

    def only_na_where_allowed(position: int, system: str, aspect: str) -> float | str:
        return NA if aspect == "amount_info" else 2

    for position in range(5):
        rate(campaign, position, annotator1, only_na_where_allowed)
    row = by_user(campaign)[annotator1.pk]
    assert row.straight.counted == 5 and row.straight.straight == 0  # 2 and N/A are two values
    rate_all_na = study(researcher, [annotator1], items=1, raters_per_item=1)
    rate(rate_all_na, 0, annotator1, lambda p, s, a: NA if a == "amount_info" else 2)
    assert by_user(rate_all_na)[annotator1.pk].straight.straight == 0


def test_gold_accuracy_attention_checks_and_their_flags(researcher, annotator1, annotator2):
    gold = {6: GOLD, 7: GOLD, 8: GOLD}
    campaign = study(researcher, [annotator1, annotator2], items=6, gold=gold, attention={9: CHECK})

    def right(position: int, system: str, aspect: str) -> float:
        if position in gold and aspect == "factuality":
            return 3 if system == "sys_alpha" else 0
        return 1 if position == 9 and aspect == "amount_info" else careful(position, system, aspect)

    def wrong_on_two(position: int, system: str, aspect: str) -> float | str:
        if position in (6, 7) and aspect == "factuality":
            return 2 if system == "sys_alpha" else 0  # 2 is outside 3 +- 0.5
        if position == 9 and aspect == "amount_info":
            return NA  # an N/A rating fails the check
        return right(position, system, aspect)

    for position in range(10):
        rate(campaign, position, annotator1, right)
        rate(campaign, position, annotator2, wrong_on_two)
    rows = by_user(campaign)
    good, bad = rows[annotator1.pk], rows[annotator2.pk]
    assert (good.gold_passed, good.gold_answered, good.attention_passed, good.attention_answered) == (3, 3, 1, 1)
    assert good.gold_accuracy == 1 and good.flags == []
    assert (bad.gold_passed, bad.gold_answered, bad.attention_passed, bad.attention_answered) == (1, 3, 0, 1)
    assert (good.gold_in_order, bad.gold_in_order) == ("PPP", "FFP")
    assert [flag.code for flag in bad.flags] == ["gold", "attention"]
    assert bad.flag_reasons == ["gold accuracy 33% is below 70%", "failed 1 attention check"]
    # Gold tasks are not counted as submissions, nor in straight-lining or agreement.
    assert good.submissions == bad.submissions == 6


def test_within_tolerance_passes_and_an_unshown_expectation_is_not_scored(researcher, annotator1, annotator2):
    expected = {"sys_alpha": {"factuality": 3}, "sys_gamma": {"factuality": 0}}  # sys_gamma is not in the study
    campaign = study(researcher, [annotator1, annotator2], items=0, gold={0: expected}, raters_per_item=2, tolerance=1)
    rate(campaign, 0, annotator1, lambda p, s, a: 2 if a == "factuality" else 0)
    rate(campaign, 0, annotator2, lambda p, s, a: 1 if a == "factuality" else 0)
    rows = by_user(campaign)
    assert (rows[annotator1.pk].gold_passed, rows[annotator1.pk].gold_answered) == (1, 1)
    assert (rows[annotator2.pk].gold_passed, rows[annotator2.pk].gold_answered) == (0, 1)


def test_agreement_equals_scipy_spearman_on_the_same_answers(researcher, annotator1, annotator2, annotator3):
    campaign = study(researcher, [annotator1, annotator2, annotator3], items=8)
    for position in range(8):
        rate(campaign, position, annotator1, careful_but_noisy(0))
        rate(campaign, position, annotator2, careful_but_noisy(1))
        rate(campaign, position, annotator3, careful_but_noisy(2))
    rows = by_user(campaign)
    for user in (annotator1, annotator2, annotator3):
        rater = Rater.objects.get(user=user)
        weighted, weight = 0.0, 0
        for aspect in ("factuality", "amount_info"):
            own, theirs = [], []
            for rating in Rating.objects.filter(rater=rater, aspect__name=aspect, is_missing=False):
                others = Rating.objects.filter(response=rating.response, aspect=rating.aspect, is_missing=False)
                values = [r.value for r in others.exclude(rater=rater)]
                own.append(rating.value)
                theirs.append(sum(values) / len(values))
            rho = spearmanr(own, theirs).statistic
            weighted += rho * len(own)
            weight += len(own)
        row = rows[user.pk]
        assert row.agreement.shared == 8 * 2 * 2
        assert row.agreement.value == pytest.approx(weighted / weight, abs=1e-12)


def test_too_fast_against_the_campaign_median(researcher, annotator1, annotator2, annotator3):
    campaign = study(researcher, [annotator1, annotator2, annotator3], items=4)
    for position in range(4):
        rate(campaign, position, annotator1, careful, seconds=5)
        rate(campaign, position, annotator2, careful, seconds=60)
        rate(campaign, position, annotator3, careful, seconds=40)
    rows = by_user(campaign)
    assert rows[annotator1.pk].median_seconds == pytest.approx(5)
    assert [flag.code for flag in rows[annotator1.pk].flags] == ["speed"]
    assert "under a third of the campaign median (40.0 s)" in rows[annotator1.pk].flag_reasons[0]
    assert rows[annotator2.pk].flags == rows[annotator3.pk].flags == []


def test_current_exclusion_and_its_reason(researcher, annotator1, annotator2):
    campaign = study(researcher, [annotator1, annotator2], items=2, raters_per_item=2)
    rate(campaign, 0, annotator1, careful)
    rate(campaign, 0, annotator2, careful)
    rater = Rater.objects.get(user=annotator1)
    earlier = RaterExclusion.objects.create(rater=rater, campaign=campaign, reason="old", excluded_by=researcher)
    RaterExclusion.objects.filter(pk=earlier.pk).update(revoked_at=earlier.created_at + timedelta(seconds=1))
    assert by_user(campaign)[annotator1.pk].excluded is False
    RaterExclusion.objects.create(rater=rater, campaign=campaign, reason="clicked through", excluded_by=researcher)
    rows = by_user(campaign)
    assert (rows[annotator1.pk].excluded, rows[annotator1.pk].exclusion_reason) == (True, "clicked through")
    assert (rows[annotator2.pk].excluded, rows[annotator2.pk].exclusion_reason) == (False, "")


def test_gold_accuracy_over_time_by_hour(researcher, annotator1, annotator2):
    campaign = study(researcher, [annotator1, annotator2], items=0, gold={0: GOLD, 1: GOLD, 2: GOLD})
    start = datetime(2026, 3, 2, 9, 15, tzinfo=UTC)

    def right(position: int, system: str, aspect: str) -> float:
        return (3 if system == "sys_alpha" else 0) if aspect == "factuality" else 0

    rate(campaign, 0, annotator1, right, at=start)
    rate(campaign, 0, annotator2, right, at=start + timedelta(minutes=20))
    rate(campaign, 1, annotator1, right, at=start + timedelta(hours=2))
    rate(campaign, 1, annotator2, one_value(1), at=start + timedelta(hours=2, minutes=5))
    rate(campaign, 2, annotator2, one_value(1), at=start + timedelta(hours=3))
    panel = quality_panel(campaign)
    assert not panel.per_day
    assert [(row.label, row.passed, row.answered) for row in panel.accuracy_rows] == [
        ("03-02 09:00", 2, 2),
        ("03-02 11:00", 1, 2),
        ("03-02 12:00", 0, 1),
    ]
    assert panel.chart is not None and len(panel.chart.bars) == 3
    full, half, empty = panel.chart.bars
    assert full.height > half.height > empty.height == 0
    assert panel.chart.threshold_y == pytest.approx(
        panel.chart.baseline - (panel.chart.baseline - panel.chart.top) * 0.7
    )
    assert [row.user_id for row in panel.flagged] == [annotator2.pk]  # 1 of 3 gold answers right
    assert metrics.GOLD_MIN_ANSWERED == 3


def contrary(position: int, system: str, aspect: str) -> float:
    value = careful(position + 1, system, aspect)
    return 3 - value if aspect == "factuality" else -value


def test_an_excluded_rater_is_no_reference_for_the_others(researcher, annotator1, annotator2, annotator3):
    campaign = study(researcher, [annotator1, annotator2, annotator3], items=8)
    for position in range(8):
        rate(campaign, position, annotator1, careful_but_noisy(0))
        rate(campaign, position, annotator2, careful_but_noisy(1))
        rate(campaign, position, annotator3, contrary)
    before = by_user(campaign)[annotator1.pk].agreement.value
    RaterExclusion.objects.create(rater=Rater.objects.get(user=annotator3), reason="straight-lines")
    after = by_user(campaign)
    first, second = (Rater.objects.get(user=user) for user in (annotator1, annotator2))
    weighted, weight = 0.0, 0
    for aspect in ("factuality", "amount_info"):
        mine = {r.response_id: r.value for r in Rating.objects.filter(rater=first, aspect__name=aspect)}
        theirs = {r.response_id: r.value for r in Rating.objects.filter(rater=second, aspect__name=aspect)}
        shared = sorted(set(mine) & set(theirs))
        rho = spearmanr([mine[k] for k in shared], [theirs[k] for k in shared]).statistic
        weighted += rho * len(shared)
        weight += len(shared)
    assert after[annotator1.pk].agreement.value == pytest.approx(weighted / weight, abs=1e-12)
    assert after[annotator1.pk].agreement.value != pytest.approx(before)
    assert after[annotator3.pk].excluded and after[annotator3.pk].agreement.value is not None

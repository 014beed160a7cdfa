"""Krippendorff's alpha for unitizing (judging.statistics.unitizing) on Krippendorff's published examples."""

import numpy as np
import pytest

from annotations.spans.error_spans import Span
from judging.statistics.unitizing import UnitizedItem, unitizing_alpha, unitizing_alpha_bootstrap_ci


def _unit(begin, length, category, shift=0):
    return Span(begin - shift, begin - shift + length, category, "minor")


def _krippendorff_2004():
    # Krippendorff, Content Analysis, 2nd ed. (2004), p. 254: a continuum from 150 to 450, two observers, categories
    # c and k (units as begin, length). The same example is a test of DKPro Statistics' unitizing alpha
    # (Krippendorff2004Test).
    i = [(225, 70, "c"), (370, 30, "c"), (180, 60, "k"), (300, 50, "k")]
    j = [(220, 80, "c"), (355, 20, "c"), (400, 20, "c"), (180, 60, "k"), (300, 50, "k")]
    return UnitizedItem(300, {"i": [_unit(*u, shift=150) for u in i], "j": [_unit(*u, shift=150) for u in j]})


def test_krippendorff_2004_worked_example():
    result = unitizing_alpha([_krippendorff_2004()])
    c, k = result["categories"]["c"], result["categories"]["k"]
    # Published: D_o(c) = .0144, D_e(c) = .0532, alpha(c) = .7286; D_o(k) = 0, D_e(k) = .0490, alpha(k) = 1.
    assert c["observed"] == pytest.approx(2600 / (2 * 300**2))  # distances 50 + 850 + 400, both orders
    assert c["observed"] == pytest.approx(0.0144, abs=5e-5)
    assert c["expected"] == pytest.approx(0.0532, abs=5e-5)
    assert c["alpha"]["value"] == pytest.approx(0.7286, abs=5e-5)
    assert k["observed"] == 0.0
    assert k["expected"] == pytest.approx(0.0490, abs=5e-5)
    assert k["alpha"]["value"] == 1.0
    # Over both categories: 1 - (D_o(c) + D_o(k)) / (D_e(c) + D_e(k)). The published .8591 is this ratio taken from
    # the rounded disagreements (1 - .0144 / .1022); unrounded it is .85867.
    total = result["alpha"]["value"]
    assert total == pytest.approx(1 - (c["observed"] + k["observed"]) / (c["expected"] + k["expected"]))
    assert total == pytest.approx(0.8591, abs=5e-4)
    assert 1 - round(c["observed"] + k["observed"], 4) / round(c["expected"] + k["expected"], 4) == pytest.approx(
        0.8591, abs=5e-5
    )


def test_krippendorff_1995_observed_disagreements():
    # Krippendorff (1995), "On the reliability of unitizing continuous data", Sociological Methodology 25, p. 57:
    # four pairs of observers on a continuum of 24; observed disagreements A .03125, B 2.26736, C .02777, D .38715
    # (also DKPro Statistics' Krippendorff1995Test). The expected disagreements there use a continuous
    # approximation, so only the observed ones are compared.
    units = {
        "A": ([(2, 8), (14, 6)], [(4, 4), (15, 2)]),
        "B": ([(0, 18)], [(0, 2), (2, 1), (3, 1), (4, 1), (5, 1), (6, 3), (9, 1)]),
        "C": ([(2, 6), (10, 2), (14, 4), (20, 2)], [(0, 2), (4, 4), (10, 4), (16, 2), (20, 2)]),
        "D": ([(0, 2), (2, 8), (10, 4), (14, 6), (20, 4)], [(0, 4), (4, 4), (8, 7), (15, 2), (17, 7)]),
    }
    first = [_unit(b, n, category) for category, (a, _) in units.items() for b, n in a]
    second = [_unit(b, n, category) for category, (_, z) in units.items() for b, n in z]
    result = unitizing_alpha([UnitizedItem(24, {"first": first, "second": second})])
    observed = {category: values["observed"] for category, values in result["categories"].items()}
    assert observed == pytest.approx({"A": 0.03125, "B": 2.26736, "C": 0.02777, "D": 0.38715}, abs=1e-5)


def test_answers_are_laid_end_to_end():
    # The 2004 example cut into two answers at 150 (in the continuum's own positions 300): no unit crosses the cut,
    # so alpha is unchanged.
    whole = _krippendorff_2004()
    cut = 150
    parts = []
    for low, high in ((0, cut), (cut, 300)):
        parts.append(
            UnitizedItem(
                high - low,
                {
                    rater: [
                        Span(s.start - low, s.end - low, s.category, s.severity)
                        for s in spans
                        if low <= s.start and s.end <= high
                    ]
                    for rater, spans in whole.spans_by_rater.items()
                },
            )
        )
    assert sum(len(v) for p in parts for v in p.spans_by_rater.values()) == 9
    assert unitizing_alpha(parts)["alpha"]["value"] == pytest.approx(unitizing_alpha([whole])["alpha"]["value"])


def test_without_category_all_spans_are_one_kind():
    spans_i = [Span(0, 5, "a", "minor"), Span(10, 12, "b", "major")]
    spans_j = [Span(0, 5, "b", "minor"), Span(10, 12, "a", "major")]
    item = UnitizedItem(20, {"i": spans_i, "j": spans_j})
    assert unitizing_alpha([item], with_category=False)["alpha"]["value"] == 1.0
    assert unitizing_alpha([item])["alpha"]["value"] < 0.5


@pytest.mark.parametrize(
    ("items", "reason"),
    [
        ([UnitizedItem(10, {"i": [Span(0, 2, "a", "minor")]})], "fewer than two raters"),
        ([UnitizedItem(10, {"i": [], "j": []})], "no rater marked any span"),
        ([UnitizedItem(0, {"i": [], "j": []})], "the answers have no characters"),
        (
            [UnitizedItem(10, {"i": [Span(0, 2, "a", "minor")], "j": []}), UnitizedItem(5, {"i": []})],
            "rater j did not annotate answer 2",
        ),
        (
            [UnitizedItem(10, {"i": [Span(0, 4, "a", "minor"), Span(2, 6, "a", "minor")], "j": []})],
            "rater i marked overlapping spans of category a",
        ),
    ],
)
def test_too_little_or_unfit_data_is_undefined_with_a_reason(items, reason):
    result = unitizing_alpha(items)
    assert result["alpha"]["value"] is None
    assert result["alpha"]["undefined"].startswith(reason)


def _seeded_items(seed, answers=30):
    # Two raters who mostly mark the same stretches, with jittered edges and some misses.
    rng = np.random.default_rng(seed)
    items = []
    for _ in range(answers):
        length = int(rng.integers(20, 60))
        first, second = [], []
        position = 0
        while position + 8 < length:
            start = int(rng.integers(position, length - 6))
            end = start + int(rng.integers(2, 6))
            category = str(rng.choice(["Accuracy", "Fluency"]))
            first.append(Span(start, end, category, "minor"))
            if rng.random() < 0.8:
                jitter_start = max(position, start + int(rng.integers(-1, 2)))
                jitter_end = max(jitter_start + 1, end + int(rng.integers(-1, 2)))
                second.append(Span(jitter_start, min(jitter_end, length), category, "minor"))
            position = end + 2
        items.append(UnitizedItem(length, {"a": first, "b": second}))
    return items


def test_bootstrap_interval_resamples_answers_as_documented():
    items = _seeded_items(38)
    point = unitizing_alpha(items)["alpha"]["value"]
    ci = unitizing_alpha_bootstrap_ci(items, n_resamples=200, seed=0)
    # The documented convention, written out: one rng.integers(0, n, n) per resample, percentile interval.
    rng = np.random.default_rng(0)
    alphas = []
    for _ in range(200):
        drawn = rng.integers(0, len(items), len(items))
        alphas.append(unitizing_alpha([items[int(i)] for i in drawn])["alpha"]["value"])
    low, high = np.quantile(alphas, [0.025, 0.975])
    assert (ci["low"], ci["high"]) == pytest.approx((low, high))
    assert ci["low"] < point < ci["high"]
    assert 0.3 < point < 0.95
    assert ci == unitizing_alpha_bootstrap_ci(items, n_resamples=200, seed=0)


def test_bootstrap_interval_is_undefined_when_alpha_is():
    ci = unitizing_alpha_bootstrap_ci([UnitizedItem(10, {"a": [], "b": []})])
    assert ci == {"low": None, "high": None, "undefined": "no rater marked any span"}
    one = unitizing_alpha_bootstrap_ci([_krippendorff_2004()])
    assert one["undefined"] == "fewer than two answers to resample"

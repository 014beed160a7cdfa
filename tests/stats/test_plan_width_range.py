"""Planning refuses widths below its documented floor and answers that grow as the interval narrows.

A probe found `width=1e-300` answered 500 (OverflowError), `1e-17` answered 3 items while `1e-10` answered 8.6e20,
and statpsych's one refinement asked more items for a wider interval at high |r| (-0.99: 12 items at width 0.078,
29 at 0.080)."""

from __future__ import annotations

import io
import itertools

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

from judging.statistics.planning import (
    MAX_ITEMS,
    MIN_WIDTH,
    PlanningError,
    items_for_power,
    items_for_width,
    krippendorff_minimum_units,
)

WIDTHS = [float(w) for w in np.geomspace(MIN_WIDTH, 1.999, 40)]
CORRELATIONS = (-0.999999, -0.99, -0.5, 0.0, 0.3, 0.7, 0.95, 0.999, 0.999999)


def assert_narrower_never_needs_fewer(items: list[int]) -> None:
    for wider, (narrower_items, wider_items) in zip(WIDTHS[1:], itertools.pairwise(items), strict=True):
        assert wider_items <= narrower_items, (
            f"width {wider:g} asks {wider_items} items, a narrower one {narrower_items}"
        )


@pytest.mark.parametrize("statistic", ["pearson", "spearman", "kendall"])
@pytest.mark.parametrize("confidence", [0.5, 0.95, 0.999999])
def test_correlation_plans_are_monotone_in_the_width(statistic: str, confidence: float) -> None:
    for expected in CORRELATIONS:
        assert_narrower_never_needs_fewer(
            [items_for_width(statistic, expected, width, confidence=confidence) for width in WIDTHS]
        )


@pytest.mark.parametrize("raters", [2, 3, 10])
def test_icc_plans_are_monotone_in_the_width(raters: int) -> None:
    for expected in (1e-9, 0.05, 0.5, 0.9, 0.99, 0.999999):
        assert_narrower_never_needs_fewer([items_for_width("icc", expected, width, raters=raters) for width in WIDTHS])


def test_the_plans_still_match_statpsych() -> None:
    assert items_for_width("pearson", 0.3, 0.2) == 320  # size.ci.cor(.05, .3, 0, .2) -> 320
    assert items_for_width("spearman", 0.362, 0.25) == 200  # size.ci.spear(.05, .362, .25) -> 200
    assert items_for_width("kendall", 0.3, 0.2) == 143  # size.ci.kendalltau(.05, .3, .2) -> 143
    assert items_for_width("icc", 0.7, 0.2, raters=3) == 68  # size.ci.icc(.05, .70, 3, .2) -> 68


@pytest.mark.parametrize("width", [1e-300, 1e-17, 1e-10, MIN_WIDTH / 2])
def test_a_width_below_the_floor_is_refused(width: float) -> None:
    with pytest.raises(PlanningError, match=f"width must be at least {MIN_WIDTH:g}"):
        items_for_width("pearson", 0.5, width)


def test_the_narrowest_width_is_answered() -> None:
    assert 10_000_000 < items_for_width("pearson", 0.0, MIN_WIDTH) < MAX_ITEMS


@pytest.mark.parametrize(
    "call",
    [
        lambda: items_for_power(1e-200, 0.8, 0.0),
        lambda: items_for_power(0.3, 0.8, 0.3000001),
        lambda: krippendorff_minimum_units(0.8, 5e-324),
    ],
)
def test_a_plan_beyond_any_study_is_refused(call) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(PlanningError, match="more than 1,000,000,000 items"):
        call()


@pytest.mark.django_db
@pytest.mark.parametrize("width", ["1e-300", "1e-17", "0.0009"])
def test_the_api_refuses_a_width_below_the_floor(researcher: User, width: str) -> None:
    client = Client()
    client.force_login(researcher)
    response = client.get(reverse("api-stats-plan"), {"statistic": "pearson", "expected": "0.5", "width": width})
    assert response.status_code == 400
    assert "width must be at least 0.001" in response.json()["detail"][0]


@pytest.mark.django_db
def test_the_api_refuses_a_power_plan_beyond_any_study(researcher: User) -> None:
    client = Client()
    client.force_login(researcher)
    query = {"statistic": "pearson", "expected": "1e-200", "power": "0.8"}
    response = client.get(reverse("api-stats-plan"), query)
    assert response.status_code == 400 and "more than 1,000,000,000 items" in response.json()["detail"][0]


@pytest.mark.django_db
@pytest.mark.parametrize("width", ["1e-300", "1e-17"])
def test_the_command_refuses_a_width_below_the_floor(width: str) -> None:
    with pytest.raises(CommandError, match=r"width must be at least 0\.001"):
        call_command(
            "plan_study",
            "--statistic",
            "pearson",
            "--expected",
            "0.5",
            "--width",
            width,
            "--json",
            stdout=io.StringIO(),
        )

"""Past SCATTER_MAX_POINTS answers the judge-against-human plot counts answers in a grid of squares: the number of
shapes stays bounded, every answer is counted once, and the page's figures do not change."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from annotations.models import Dataset
from judging.analysis import plots
from judging.analysis.plots import DENSITY_CELL_PIXELS, SCATTER_MAX_POINTS, scatter_plot
from tests.dashboard.conftest import JUDGE_NAME

WIDTH, HEIGHT = 460, 340
# The plot area of scatter_plot's default size, inside its margins.
MOST_CELLS = ((WIDTH - 48 - 16) // DENSITY_CELL_PIXELS) * ((HEIGHT - 12 - 40) // DENSITY_CELL_PIXELS)


def _points(count: int) -> list[dict[str, Any]]:
    # Human means on a 1..5 grid of quarters, judge scores 1..5: many answers share a square, some lie on the edges.
    return [
        {"system": f"s{index % 7}", "human": 1 + (index % 17) / 4, "judge": 1 + (index * 7) % 5}
        for index in range(count)
    ]


def test_many_answers_are_counted_in_a_bounded_grid() -> None:
    points = _points(50_000)
    plot = scatter_plot(points, x_range=(1, 5), y_range=(1, 5), width=WIDTH, height=HEIGHT)
    assert plot["points"] == []
    assert plot["legend"] == []
    assert 0 < len(plot["cells"]) <= MOST_CELLS
    assert sum(cell["count"] for cell in plot["cells"]) == 50_000
    assert plot["max_count"] == max(cell["count"] for cell in plot["cells"])
    # The answers with human mean 1 and judge score 1 (index a multiple of 17 and of 5) fill the bottom-left square.
    bottom_left = min(plot["cells"], key=lambda cell: (cell["x"], -cell["y"]))
    assert bottom_left["count"] == len(range(0, 50_000, 85))
    assert bottom_left["x"] == 48
    assert bottom_left["y"] + bottom_left["height"] == pytest.approx(HEIGHT - 40)
    darkest = max(plot["cells"], key=lambda cell: cell["count"])
    assert darkest["opacity"] == 1.0


def test_few_answers_are_drawn_one_circle_each() -> None:
    points = _points(SCATTER_MAX_POINTS)
    plot = scatter_plot(points, x_range=(1, 5), y_range=(1, 5))
    assert len(plot["points"]) == SCATTER_MAX_POINTS
    assert plot["cells"] == []


def _judges_page(researcher: User, dataset: Dataset) -> str:
    client = Client()
    client.force_login(researcher)
    response = client.get(reverse("dashboard-judges", args=[dataset.pk]), {"judge": JUDGE_NAME, "aspect": "overall"})
    assert response.status_code == 200
    return response.content.decode()


def _scatter_svg(html: str) -> str:
    figure = re.search(r"<figcaption>Judge vs human mean per answer.*?</svg>", html, flags=re.S)
    assert figure is not None
    return figure.group(0)


@pytest.mark.django_db
def test_the_judges_page_counts_answers_in_squares_past_the_limit_with_the_same_figures(
    stats_dataset: Dataset, researcher: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    drawn = _judges_page(researcher, stats_dataset)
    circles = _scatter_svg(drawn).count("<circle")
    assert circles > 3
    monkeypatch.setattr(plots, "SCATTER_MAX_POINTS", 3)
    counted = _judges_page(researcher, stats_dataset)
    svg = _scatter_svg(counted)
    assert "<circle" not in svg
    squares = re.findall(r'<rect [^>]*fill-opacity="[0-9.]+"><title>(\d+) answers', svg)
    assert 0 < len(squares) <= MOST_CELLS
    assert sum(int(count) for count in squares) == circles
    assert "more than 3 answers: counted in squares" in counted
    assert "the darkest" in counted
    # Every table of figures (correlations, the alternative-annotator test, means, bias) reads as before.
    assert re.findall(r"<table.*?</table>", counted, flags=re.S) == re.findall(r"<table.*?</table>", drawn, flags=re.S)

"""Geometry for server-side SVG plots (no JavaScript, no CDN): the templates only place shapes and text.

Colours are presentation attributes, not style attributes, so the strict CSP (no unsafe-inline) holds.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext

PALETTE = [
    "#1f5fbf",
    "#d95f02",
    "#1b9e77",
    "#7570b3",
    "#e7298a",
    "#66a61e",
    "#e6ab02",
    "#a6761d",
    "#666666",
    "#0f8fa8",
]


# Above this many answers the scatter plot counts them in a grid of square cells instead of drawing a circle each: a
# page of 100,000 circles takes seconds to render and to draw, and the circles cover each other long before that.
SCATTER_MAX_POINTS = 2000
DENSITY_CELL_PIXELS = 8


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    if high <= low:
        return [low]
    step = (high - low) / (count - 1)
    return [low + i * step for i in range(count)]


def _label(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.2g}"


def _jitter(index: int, step: float, pixels: float = 5.0) -> float:
    """Deterministic offset in [-pixels, pixels] so identical points do not hide each other; the two axes use the
    two steps of the R2 low-discrepancy sequence, which spreads a pile of ties evenly over a small square."""
    return ((0.5 + index * step) % 1.0 - 0.5) * 2 * pixels


def bar_chart(bars: list[dict[str, Any]], *, width: int = 300, height: int = 160) -> dict[str, Any]:
    """Vertical bars with count labels; ``bars`` are {"label", "count"}."""
    margin_left, margin_bottom, margin_top = 8, 22, 14
    plot_height = height - margin_bottom - margin_top
    highest = max((bar["count"] for bar in bars), default=0) or 1
    slot = (width - margin_left * 2) / max(len(bars), 1)
    shapes = []
    for index, bar in enumerate(bars):
        bar_height = plot_height * bar["count"] / highest
        x = margin_left + index * slot + slot * 0.1
        shapes.append(
            {
                "x": round(x, 2),
                "y": round(margin_top + plot_height - bar_height, 2),
                "width": round(slot * 0.8, 2),
                "height": round(bar_height, 2),
                "label": bar["label"],
                "count": bar["count"],
                "label_x": round(x + slot * 0.4, 2),
                "label_y": height - 6,
                "count_y": round(margin_top + plot_height - bar_height - 3, 2),
            }
        )
    return {"width": width, "height": height, "bars": shapes, "baseline": margin_top + plot_height}


def scatter_plot(
    points: list[dict[str, Any]],
    *,
    x_range: tuple[float, float],
    y_range: tuple[float, float],
    width: int = 460,
    height: int = 340,
) -> dict[str, Any]:
    """Judge (y) against human mean (x), one colour per system."""
    left, right, top, bottom = 48, 16, 12, 40
    x_low, x_high = x_range
    y_low, y_high = y_range
    if points:
        x_low = min(x_low, min(p["human"] for p in points))
        x_high = max(x_high, max(p["human"] for p in points))
        y_low = min(y_low, min(p["judge"] for p in points))
        y_high = max(y_high, max(p["judge"] for p in points))
    if x_high <= x_low:
        x_high = x_low + 1
    if y_high <= y_low:
        y_high = y_low + 1
    plot_w, plot_h = width - left - right, height - top - bottom

    def sx(value: float) -> float:
        return round(left + (value - x_low) / (x_high - x_low) * plot_w, 2)

    def sy(value: float) -> float:
        return round(top + plot_h - (value - y_low) / (y_high - y_low) * plot_h, 2)

    binned = len(points) > SCATTER_MAX_POINTS
    systems = [] if binned else sorted({p["system"] for p in points})
    colour = {system: PALETTE[i % len(PALETTE)] for i, system in enumerate(systems)}
    cells = _density_cells(points, (x_low, x_high), (y_low, y_high), left, top, plot_w, plot_h) if binned else []
    return {
        "n": len(points),
        "max_points": SCATTER_MAX_POINTS,
        "cells": cells,
        "max_count": max((cell["count"] for cell in cells), default=0),
        "width": width,
        "height": height,
        "left": left,
        "top": top,
        "right_edge": width - right,
        "bottom_edge": top + plot_h,
        "points": [
            {
                "cx": round(sx(p["human"]) + _jitter(index, 0.7548776662), 2),
                "cy": round(sy(p["judge"]) + _jitter(index, 0.5698402910), 2),
                "fill": colour[p["system"]],
                "title": f"{p['system']}: human {p['human']:.3g}, judge {p['judge']:.3g}",
            }
            for index, p in enumerate(points)
            if not binned
        ],
        "x_ticks": [{"pos": sx(v), "label": _label(v)} for v in _ticks(x_low, x_high)],
        "y_ticks": [{"pos": sy(v), "label": _label(v)} for v in _ticks(y_low, y_high)],
        "legend": [{"system": system, "fill": colour[system]} for system in systems],
        "x_label_x": left + plot_w / 2,
        "x_label_y": height - 4,
        "y_label_y": top + plot_h / 2,
    }


def _density_cells(
    points: list[dict[str, Any]],
    x_range: tuple[float, float],
    y_range: tuple[float, float],
    left: float,
    top: float,
    plot_w: float,
    plot_h: float,
) -> list[dict[str, Any]]:
    """The answers counted in a grid of squares of DENSITY_CELL_PIXELS over the plot area (a two-dimensional
    histogram); only occupied squares are drawn, darker for more answers, at most columns x rows of them."""
    import numpy as np  # noqa: PLC0415 -- only large plots count cells

    columns = max(1, int(plot_w // DENSITY_CELL_PIXELS))
    rows = max(1, int(plot_h // DENSITY_CELL_PIXELS))
    x_edges = np.linspace(x_range[0], x_range[1], columns + 1)
    y_edges = np.linspace(y_range[0], y_range[1], rows + 1)
    human = np.fromiter((p["human"] for p in points), dtype=np.float64, count=len(points))
    judge = np.fromiter((p["judge"] for p in points), dtype=np.float64, count=len(points))
    counts, _, _ = np.histogram2d(human, judge, bins=[x_edges, y_edges])
    highest = counts.max()
    cell_w, cell_h = plot_w / columns, plot_h / rows
    cells = []
    for column, row in zip(*np.nonzero(counts), strict=True):
        count = int(counts[column, row])
        cells.append(
            {
                "x": round(left + column * cell_w, 2),
                "y": round(top + plot_h - (row + 1) * cell_h, 2),
                "width": round(cell_w, 2),
                "height": round(cell_h, 2),
                "opacity": round(0.15 + 0.85 * count / highest, 3),
                "count": count,
                "title": gettext(
                    "%(count)s answers: human %(human_low).3g to %(human_high).3g, judge %(judge_low).3g to "
                    "%(judge_high).3g"
                )
                % {
                    "count": count,
                    "human_low": x_edges[column],
                    "human_high": x_edges[column + 1],
                    "judge_low": y_edges[row],
                    "judge_high": y_edges[row + 1],
                },
            }
        )
    return cells


def heat_cells(labels: list[int], matrix: list[list[int]]) -> list[list[dict[str, Any]]]:
    """Confusion-matrix cells with a shade class from 0 (empty) to 5 (the largest count)."""
    highest = max((count for row in matrix for count in row), default=0) or 1
    return [
        [
            {"count": count, "shade": min(5, round(5 * count / highest)), "diagonal": i == j}
            for j, count in enumerate(row)
        ]
        for i, row in enumerate(matrix)
    ]

"""The hybrid panel of a campaign's progress page: the annotations view does not import the judge, so its template
loads this tag, which reads the judge's side."""

from __future__ import annotations

from typing import Any

from django import template

from judging.hybrid.selectors import active_estimates
from judging.hybrid.selectors import hybrid_panel as panel_of
from judging.hybrid.selectors import stopping_panel as stopping_of

register = template.Library()


@register.inclusion_tag("judging/_hybrid_panel.html")
def hybrid_panel(campaign: Any) -> dict[str, Any]:
    return {"campaign": campaign, "panel": panel_of(campaign)}


SVG_WIDTH, SVG_HEIGHT = 300, 120


def _sequence_lines(looks: list[list[Any]], lower: float, upper: float) -> dict[str, str]:
    """The confidence sequence's lower and upper limits as SVG polyline points, n along x and the scale along y."""
    defined = [(n, low, high) for n, low, high in looks if low is not None and high is not None]
    if not defined or upper <= lower:
        return {"low": "", "high": ""}
    last = max(n for n, _, _ in defined) or 1

    def point(n: float, value: float) -> str:
        x = SVG_WIDTH * n / last
        y = SVG_HEIGHT * (1 - (value - lower) / (upper - lower))
        return f"{x:.1f},{y:.1f}"

    return {
        "low": " ".join(point(n, low) for n, low, _ in defined),
        "high": " ".join(point(n, high) for n, _, high in defined),
    }


@register.inclusion_tag("judging/_stopping_panel.html")
def stopping_panel(campaign: Any) -> dict[str, Any]:
    stopping = stopping_of(campaign)
    lines = (
        _sequence_lines(stopping.get("looks", []), stopping.get("lower", 0.0), stopping.get("upper", 1.0))
        if stopping
        else None
    )
    return {
        "campaign": campaign,
        "stopping": stopping,
        "lines": lines,
        "svg": {"width": SVG_WIDTH, "height": SVG_HEIGHT},
        "active": active_estimates(campaign),
    }


CHART_WIDTH, CHART_HEIGHT = 180, 56
# The line a figure is read against: a difference against 0, a win rate against one half.
REFERENCE = {"difference": 0.0, "win": 0.5}


def sequence_chart(item: dict[str, Any]) -> dict[str, Any] | None:
    """A figure's confidence sequence over its looks as SVG points: the band between the limits (a polygon), the
    running estimate (a polyline) and the reference line, n along x and the figure's scale along y."""
    points = item["points"]
    lower, upper = item["scale"]
    if not points or upper <= lower:
        return None
    first, last = points[0][0], points[-1][0]

    def x(n: float) -> float:
        return CHART_WIDTH * (n - first) / (last - first) if last > first else CHART_WIDTH * 0.5

    def y(value: float) -> float:
        return CHART_HEIGHT * (1 - (value - lower) / (upper - lower))

    top = [f"{x(n):.1f},{y(high):.1f}" for n, _low, high, _est in points]
    bottom = [f"{x(n):.1f},{y(low):.1f}" for n, low, _high, _est in reversed(points)]
    if last == first:  # one look: a bar of the figure's width would hide that it is one point
        top = [f"{CHART_WIDTH * 0.45:.1f},{y(points[0][2]):.1f}", f"{CHART_WIDTH * 0.55:.1f},{y(points[0][2]):.1f}"]
        bottom = [f"{CHART_WIDTH * 0.55:.1f},{y(points[0][1]):.1f}", f"{CHART_WIDTH * 0.45:.1f},{y(points[0][1]):.1f}"]
    reference = REFERENCE.get(item["kind"])
    return {
        "band": " ".join(top + bottom),
        "estimate": " ".join(f"{x(n):.1f},{y(est):.1f}" for n, _low, _high, est in points),
        "reference": None if reference is None else f"{y(reference):.1f}",
        "first": first,
        "last": last,
        "first_low": points[0][1],
        "first_high": points[0][2],
    }


@register.inclusion_tag("judging/_sequences_panel.html")
def sequences_panel(campaign: Any) -> dict[str, Any]:
    from judging.analysis.campaign_sequences import campaign_sequences  # noqa: PLC0415 - the reports load numpy
    from judging.analysis.wording import phrase  # noqa: PLC0415 - it loads the statistics

    sequences = campaign_sequences(campaign)
    aspects = []
    for aspect in sequences["aspects"]:
        rows = [
            {
                **item,
                "chart": sequence_chart(item),
                "undefined": item["undefined"] and phrase(item["undefined"]),
                "fixed_undefined": item["fixed_undefined"] and phrase(item["fixed_undefined"]),
            }
            for item in [*aspect["means"], *aspect["differences"], *aspect["wins"]]
            + ([aspect["agreement"]] if aspect["agreement"] else [])
        ]
        aspects.append({**aspect, "rows": rows})
    return {
        "campaign": campaign,
        "sequences": {**sequences, "aspects": aspects},
        "chart": {"width": CHART_WIDTH, "height": CHART_HEIGHT},
    }

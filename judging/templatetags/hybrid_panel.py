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

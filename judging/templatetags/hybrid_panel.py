"""The hybrid panel of a campaign's progress page: the annotations view does not import the judge, so its template
loads this tag, which reads the judge's side."""

from __future__ import annotations

from typing import Any

from django import template

from judging.hybrid.selectors import hybrid_panel as panel_of

register = template.Library()


@register.inclusion_tag("judging/_hybrid_panel.html")
def hybrid_panel(campaign: Any) -> dict[str, Any]:
    return {"campaign": campaign, "panel": panel_of(campaign)}

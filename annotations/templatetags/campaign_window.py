"""The campaign's hand-out window as a sentence, the same on the annotator, progress, settings and research pages."""

from typing import Any

from django import template
from django.utils import timezone

from annotations.slots import hand_out_window

register = template.Library()


@register.inclusion_tag("annotate/_campaign_window.html")
def campaign_window(campaign: Any) -> dict[str, Any]:
    window = hand_out_window(opens_at=campaign.opens_at, closes_at=campaign.closes_at, now=timezone.now())
    return {
        "window": window.value,
        "opens_at": campaign.opens_at,
        "closes_at": campaign.closes_at,
        "zone": timezone.get_current_timezone_name(),
    }

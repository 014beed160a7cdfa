"""Links into FActScore from pages other apps render (the annotators' home page).

A template library of its own, so that ``templates/home.html`` can show the fact review without
its view (annotations) knowing about FActScore.
"""

from __future__ import annotations

from typing import Any

from django import template
from django.urls import reverse

from judging.factscore.selectors import review_campaigns_for_annotator, review_progress

register = template.Library()


@register.inclusion_tag("factscore/_home_review_link.html", takes_context=True)
def fact_review_links(context: template.Context) -> dict[str, Any]:
    """The signed-in user's active fact-review campaigns with their own progress; nothing for anyone else.

    Only campaign names and counts reach the page: never the run, judge or system behind a campaign,
    since reviewers are blinded to them.
    """
    request = context.get("request")
    user = getattr(request, "user", None) or context.get("user")
    if user is None or not user.is_authenticated:
        return {"campaigns": []}
    campaigns = [
        (campaign, review_progress(campaign=campaign, user=user)) for campaign in review_campaigns_for_annotator(user)
    ]
    return {"campaigns": campaigns, "review_home_url": reverse("factscore:review-home")}

"""The researcher's exclusion controls of a campaign's quality table: exclude a rater (optionally reopening their
slots), reopen later, revoke. POST only; a researcher who sees the campaign, a rater of its dataset, else 404.

With htmx the response is the whole quality panel, recomputed (`annotate/_quality_panel.html`): an exclusion changes
the other raters' figures too, so the row alone would leave them stale. A refusal answers 422 with the row's controls
only, retargeted to them, so the reason typed stays as it was. Without htmx, a redirect back to the campaign's
progress page with a message."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import wraps

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_POST

from annotations.models import Campaign, Rater, RaterExclusion
from annotations.quality.exclusion_selectors import (
    campaign_rater_or_404,
    exclusion_disputes_closed,
    rater_exclusion_in_force,
)
from annotations.quality.selectors import RATER_NAMES_PSEUDONYMS, quality_panel, rater_names_choice
from annotations.quality.services import ExclusionError, rater_exclude, rater_exclusion_revoke, rater_slots_reopen
from annotations.selectors import campaign_for_researcher


@dataclass(frozen=True)
class ExclusionRow:
    """What the controls template reads of a quality-table row."""

    rater_id: int
    excluded: bool
    exclusion_reason: str
    flag_reasons: list[str] = field(default_factory=list)


def _row(rater: Rater, exclusion: RaterExclusion | None, reason: str = "") -> ExclusionRow:
    return ExclusionRow(
        rater_id=rater.pk,
        excluded=exclusion is not None,
        exclusion_reason=exclusion.reason if exclusion is not None else "",
        flag_reasons=[reason] if reason else [],
    )


def _names(request: HttpRequest) -> str:
    return rater_names_choice(request.POST.get("names"))


def _shown_name(request: HttpRequest, rater: Rater) -> str:
    """The rater as the panel the researcher is looking at names them."""
    if _names(request) == RATER_NAMES_PSEUDONYMS or rater.user is None:
        return rater.pseudonym
    return rater.user.get_username()


def _answer(
    request: HttpRequest,
    campaign: Campaign,
    rater: Rater,
    *,
    done: str | None = None,
    problem: str | None = None,
    reason: str = "",
) -> HttpResponse:
    names = _names(request)
    if getattr(request, "htmx", False):
        context: dict[str, object] = {
            "campaign": campaign,
            "exclusion_rater_id": rater.pk,
            "exclusion_done": done,
            "exclusion_problem": problem,
            "exclusion_reason": reason,
        }
        if problem:
            context["row"] = _row(rater, rater_exclusion_in_force(rater), reason)
            context["quality"] = {"names": names}
            response = render(request, "annotate/_exclusion_controls.html", context, status=422)
            response["HX-Retarget"] = f"#exclusion-controls-{rater.pk}"
            response["HX-Reswap"] = "outerHTML"
            return response
        context["quality"] = quality_panel(campaign, names=names)
        return render(request, "annotate/_quality_panel.html", context)
    if problem:
        messages.error(request, problem)
    elif done:
        messages.success(request, done)
    progress = reverse("campaign-progress", args=[campaign.pk])
    if names == RATER_NAMES_PSEUDONYMS:
        progress += f"?names={names}"
    return HttpResponseRedirect(progress, status=303)


def _researcher(request: HttpRequest) -> User | None:
    return request.user if isinstance(request.user, User) else None


def _rater_control(
    control: Callable[[HttpRequest, Campaign, Rater], HttpResponse],
) -> Callable[[HttpRequest, int, int], HttpResponse]:
    """A control posted by a researcher who sees the campaign, on a rater of its dataset."""

    @require_POST
    @login_required
    @wraps(control)
    def view(request: HttpRequest, campaign_id: int, rater_id: int) -> HttpResponse:
        campaign = campaign_for_researcher(request.user, campaign_id)
        return control(request, campaign, campaign_rater_or_404(campaign, rater_id))

    return view


@_rater_control
def rater_exclude_view(request: HttpRequest, campaign: Campaign, rater: Rater) -> HttpResponse:
    reason = str(request.POST.get("reason", ""))
    reopen = request.POST.get("reopen") == "on"
    try:
        exclusion = rater_exclude(
            rater=rater, reason=reason, by=_researcher(request), campaign=campaign, reopen_slots=reopen
        )
    except ExclusionError as exc:
        return _answer(request, campaign, rater, problem=str(exc), reason=reason.strip())
    done = (
        _("%(rater)s is excluded from the statistics; their tasks are reopened and they left the pool.")
        if reopen
        else _("%(rater)s is excluded from the statistics.")
    ) % {"rater": _shown_name(request, rater)}
    closed = exclusion_disputes_closed(exclusion)
    if closed:
        done += " " + ngettext(
            "%(n)d open dispute over their ratings is closed with it; its adjudicators are told why.",
            "%(n)d open disputes over their ratings are closed with it; their adjudicators are told why.",
            closed,
        ) % {"n": closed}
    return _answer(request, campaign, rater, done=done)


@_rater_control
def rater_slots_reopen_view(request: HttpRequest, campaign: Campaign, rater: Rater) -> HttpResponse:
    exclusion = rater_exclusion_in_force(rater)
    if exclusion is None:
        return _answer(request, campaign, rater, problem=_("Exclude the rater in this campaign first."))
    try:
        added = rater_slots_reopen(exclusion=exclusion, campaign=campaign)
    except ExclusionError as exc:
        return _answer(request, campaign, rater, problem=str(exc))
    done = ngettext(
        "%(n)d task of %(rater)s reopened; they left the pool.",
        "%(n)d tasks of %(rater)s reopened; they left the pool.",
        added,
    ) % {"n": added, "rater": _shown_name(request, rater)}
    return _answer(request, campaign, rater, done=done)


@_rater_control
def rater_exclusion_revoke_view(request: HttpRequest, campaign: Campaign, rater: Rater) -> HttpResponse:
    exclusion = rater_exclusion_in_force(rater)
    if exclusion is None:
        return _answer(
            request, campaign, rater, done=_("%(rater)s is not excluded.") % {"rater": _shown_name(request, rater)}
        )
    try:
        rater_exclusion_revoke(exclusion=exclusion, by=_researcher(request))
    except ExclusionError as exc:
        return _answer(request, campaign, rater, problem=str(exc), reason=exclusion.reason)
    done = _("%(rater)s counts in the statistics again.") % {"rater": _shown_name(request, rater)}
    return _answer(request, campaign, rater, done=done, reason=exclusion.reason)

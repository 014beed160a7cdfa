"""The adjudicator's pages (queue, one dispute, recording the final values) and the researcher's adjudication
settings of a campaign. Login first; then the role, the campaign's rule and ownership decide (403 without the
role, 404 outside one's campaigns); writes are POST only."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotations.adjudication.forms import AdjudicationRuleForm
from annotations.adjudication.selectors import (
    DisputeClosed,
    campaign_rule,
    dispute_for_adjudicator,
    dispute_queue,
    dispute_view,
)
from annotations.adjudication.services import (
    AdjudicationError,
    adjudication_rule_set,
    campaign_disputes_find,
    dispute_resolve,
)
from annotations.rubrics.task_sheet import Cell
from annotations.selectors import campaign_for_researcher
from annotations.text.ascii_numbers import ascii_int


@require_GET
@login_required
def queue_page(request: HttpRequest) -> HttpResponse:
    show_settled = request.GET.get("settled") == "1"
    rows = dispute_queue(request.user, resolved=show_settled)
    return render(request, "adjudicate/queue.html", {"rows": rows, "show_settled": show_settled})


def _closed_dispute_explained(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A dispute an exclusion closed answers with a page saying so (410 Gone), not a bare "not found"."""

    @wraps(view)
    def wrapper(request: HttpRequest, dispute_id: int) -> HttpResponse:
        try:
            return view(request, dispute_id)
        except DisputeClosed as closed:
            return render(request, "adjudicate/dispute_closed.html", {"closure": closed.closure}, status=410)

    return wrapper


def _dispute_page(request: HttpRequest, dispute_id: int, *, entered: dict[str, str], status: int = 200) -> HttpResponse:
    dispute = dispute_for_adjudicator(request.user, dispute_id)
    view = dispute_view(dispute)
    # A span aspect's final set is marked in the task page's span editor (static/js/spans.js), filled again with
    # what was sent when the service refused it.
    view.cells = [
        dataclasses.replace(
            cell,
            span_cell=Cell(
                scale=cell.scale,
                field_id=cell.field_id,
                value=entered.get(cell.field_id, ""),
                error="",
                popover=render_to_string("annotate/_scale_popover.html", {"scale": cell.scale}),
                blank_options="",
                buttons=False,
            ),
        )
        if cell.aspect.is_spans and dispute.resolved_at is None
        else cell
        for cell in view.cells
    ]
    context: dict[str, Any] = {
        "view": view,
        "dispute": dispute,
        "campaign": dispute.campaign,
        "turn": dispute.task.turn,
        "entered": entered,
    }
    return render(request, "adjudicate/dispute.html", context, status=status)


@require_GET
@login_required
@_closed_dispute_explained
def dispute_page(request: HttpRequest, dispute_id: int) -> HttpResponse:
    return _dispute_page(request, dispute_id, entered={})


def cell_field(response_id: int, aspect_id: int) -> str:
    return f"v-{response_id}-{aspect_id}"


@require_POST
@login_required
@_closed_dispute_explained
def dispute_resolve_view(request: HttpRequest, dispute_id: int) -> HttpResponse:
    dispute = dispute_for_adjudicator(request.user, dispute_id)
    assert isinstance(request.user, User)  # login_required
    values = {
        (entry["response_id"], entry["aspect_id"]): str(
            request.POST.get(cell_field(entry["response_id"], entry["aspect_id"]), "")
        )
        for entry in dispute.spreads
    }
    preference = str(request.POST.get("preference", ""))
    none_appropriate = preference == "none"
    preferred: int | None = None
    if preference and not none_appropriate:
        # Text that spells no answer id still names no answer shown, so the service refuses it with its message.
        preferred = ascii_int(preference)
        preferred = -1 if preferred is None else preferred
    try:
        dispute_resolve(
            dispute=dispute,
            adjudicator=request.user,
            values=values,
            reason=str(request.POST.get("reason", "")),
            preferred_response_id=preferred,
            none_appropriate=none_appropriate,
        )
    except AdjudicationError as exc:
        messages.error(request, str(exc))
        entered = {key: str(value) for key, value in request.POST.items() if key != "csrfmiddlewaretoken"}
        return _dispute_page(request, dispute_id, entered=entered, status=422)
    messages.success(request, _("The final values are recorded."))
    return HttpResponseRedirect(reverse("adjudication-queue"), status=303)


@require_http_methods(["GET", "POST"])
@login_required
def rule_page(request: HttpRequest, campaign_id: int) -> HttpResponse:
    campaign = campaign_for_researcher(request.user, campaign_id)
    rule = campaign_rule(campaign)
    keep = list(rule.adjudicators.values_list("pk", flat=True)) if rule is not None else []
    initial = (
        {
            "max_spread": rule.max_spread,
            "preference_splits": rule.preference_splits,
            "min_span_f1": rule.min_span_f1,
            "adjudicators": keep,
        }
        if rule is not None
        else {}
    )
    form = AdjudicationRuleForm(request.POST or None, initial=initial, user=request.user, keep=keep)
    if request.method == "POST" and form.is_valid():
        try:
            saved = adjudication_rule_set(
                campaign=campaign,
                max_spread=form.cleaned_data["max_spread"],
                preference_splits=form.cleaned_data["preference_splits"],
                adjudicators=form.cleaned_data["adjudicators"],
                min_span_f1=form.cleaned_data["min_span_f1"],
            )
        except AdjudicationError as exc:
            form.add_error(None, str(exc))
        else:
            if saved is None:
                messages.success(request, _("Adjudication is off for this campaign."))
            else:
                found = campaign_disputes_find(campaign=campaign)
                messages.success(
                    request,
                    _("Adjudication settings saved; the campaign has %(n)s disputed tasks so far.") % {"n": found},
                )
            return HttpResponseRedirect(reverse("adjudication-rule", args=[campaign.pk]), status=303)
    status = 422 if request.method == "POST" else 200
    return render(request, "adjudicate/rule.html", {"campaign": campaign, "form": form, "rule": rule}, status=status)

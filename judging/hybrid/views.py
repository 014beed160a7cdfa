"""The hybrid settings page of a campaign, in the research area: researchers (staff) only, their own campaigns;
writes are POST only and go through the services."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from annotations.models import Campaign
from annotations.selectors import campaign_for_researcher
from judging.hybrid import selectors
from judging.hybrid.forms import HybridCalibrationForm
from judging.hybrid.services import HybridError, hybrid_apply, hybrid_calibrate
from judging.models import HybridCalibration


def _page(request: HttpRequest, campaign: Campaign, form: HybridCalibrationForm, status: int = 200) -> HttpResponse:
    context: dict[str, Any] = {
        "campaign": campaign,
        "form": form,
        "choices": selectors.version_choices(campaign),
        "calibrations": selectors.calibrations_of_campaign(campaign)[:20],
        "panel": selectors.hybrid_panel(campaign),
        "section": "hybrid",
    }
    return render(request, "research/hybrid.html", context, status=status)


@require_GET
@login_required
def hybrid_page(request: HttpRequest, campaign_id: int) -> HttpResponse:
    campaign = campaign_for_researcher(request.user, campaign_id)
    form = HybridCalibrationForm(versions=selectors.versions_of_campaign_dataset(campaign))
    return _page(request, campaign, form)


@require_POST
@login_required
def hybrid_calibrate_view(request: HttpRequest, campaign_id: int) -> HttpResponse:
    campaign = campaign_for_researcher(request.user, campaign_id)
    form = HybridCalibrationForm(request.POST, versions=selectors.versions_of_campaign_dataset(campaign))
    if not form.is_valid():
        return _page(request, campaign, form, status=400)
    try:
        calibration = hybrid_calibrate(
            campaign=campaign,
            version=form.cleaned_data["version"],
            target=form.cleaned_data["target"],
            delta=form.cleaned_data["delta"],
            min_kept=form.cleaned_data["min_kept"],
            user=request.user,  # type: ignore[arg-type]
        )
    except HybridError as exc:
        form.add_error(None, str(exc))
        return _page(request, campaign, form, status=400)
    if calibration.threshold is None:
        messages.warning(
            request,
            _("Calibration undefined: %(reason)s. The campaign stays all-human.")
            % {"reason": calibration.undefined_reason},
        )
    else:
        messages.success(
            request,
            _("Calibrated: the judge may keep tasks whose confidence is at least %(threshold).3f.")
            % {"threshold": calibration.threshold},
        )
    return HttpResponseRedirect(reverse("research-campaign-hybrid", args=[campaign.pk]))


@require_POST
@login_required
def hybrid_apply_view(request: HttpRequest, campaign_id: int, calibration_id: int) -> HttpResponse:
    campaign = campaign_for_researcher(request.user, campaign_id)
    calibration = get_object_or_404(HybridCalibration, pk=calibration_id, campaign=campaign)
    try:
        hybrid_apply(calibration=calibration, user=request.user)  # type: ignore[arg-type]
    except HybridError as exc:
        messages.error(request, str(exc))
        return HttpResponseRedirect(reverse("research-campaign-hybrid", args=[campaign.pk]))
    messages.success(
        request,
        _("The judge is rating the campaign's tasks; those it is sure of leave the raters' queue when it ends."),
    )
    return HttpResponseRedirect(reverse("research-campaign-hybrid", args=[campaign.pk]))

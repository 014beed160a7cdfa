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
from judging.hybrid.forms import HybridCalibrationForm, SamplingForm
from judging.hybrid.services import HybridError, campaign_sampling_set, hybrid_apply, hybrid_calibrate
from judging.models import HybridCalibration


def _page(
    request: HttpRequest,
    campaign: Campaign,
    form: HybridCalibrationForm,
    status: int = 200,
    sampling_form: SamplingForm | None = None,
) -> HttpResponse:
    context: dict[str, Any] = {
        "campaign": campaign,
        "form": form,
        "sampling_form": sampling_form or SamplingForm(campaign=campaign, initial=SamplingForm.initial_for(campaign)),
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
            user=request.user,  # type: ignore[arg-type]
            **form.cleaned_data,
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


@require_POST
@login_required
def hybrid_sampling_view(request: HttpRequest, campaign_id: int) -> HttpResponse:
    campaign = campaign_for_researcher(request.user, campaign_id)
    sampling_form = SamplingForm(request.POST, campaign=campaign)
    calibration_form = HybridCalibrationForm(versions=selectors.versions_of_campaign_dataset(campaign))
    if not sampling_form.is_valid():
        return _page(request, campaign, calibration_form, status=400, sampling_form=sampling_form)
    try:
        campaign_sampling_set(campaign=campaign, **sampling_form.sampling_settings())
    except HybridError as exc:
        sampling_form.add_error(None, str(exc))
        return _page(request, campaign, calibration_form, status=400, sampling_form=sampling_form)
    messages.success(request, _("Sampling policy and stopping rule saved."))
    return HttpResponseRedirect(reverse("research-campaign-hybrid", args=[campaign.pk]))

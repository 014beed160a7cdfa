"""The certification page: a dataset's judge versions over time, its reference sets, certificates, drift checks and
teachings, and the researcher actions (name a reference set, certify a version, teach a version rated examples).
Thin: services write, selectors read."""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from annotations.models import Dataset
from judging.analysis.dashboard import researcher_required
from judging.analysis.forms import CertifyForm, ReferenceSetForm, TeachForm
from judging.analysis.selectors import dataset_for_stats_or_404
from judging.certification import selectors
from judging.certification.certificates import certificate_request
from judging.certification.evaluations import CertificationError
from judging.certification.reference_sets import reference_set_create
from judging.certification.teaching import judge_version_teach
from judging.models import JudgeVersion
from judging.selectors import campaigns_of_dataset

Forms = tuple[ReferenceSetForm, CertifyForm, TeachForm]


def _forms(dataset: Dataset, data: Any = None, which: str = "") -> Forms:
    campaigns = list(campaigns_of_dataset(dataset.pk).values_list("pk", "name"))
    versions = [
        (row.version.fingerprint, f"{row.version.config_name} · {row.version.provider_model} · {row.version.short}")
        for row in selectors.versions_of_dataset(dataset)
    ]
    reference_sets = list(selectors.reference_sets_of_dataset(dataset).values_list("pk", "name"))
    return (
        ReferenceSetForm(data if which == "reference" else None, campaigns=campaigns, prefix="reference"),
        CertifyForm(data if which == "certify" else None, versions=versions, reference_sets=reference_sets),
        TeachForm(data if which == "teach" else None, versions=versions, reference_sets=reference_sets, prefix="teach"),
    )


def _page(request: HttpRequest, dataset: Dataset, forms: Forms, status: int = 200) -> HttpResponse:
    rows = selectors.versions_of_dataset(dataset)
    comparisons = [
        {"older": older, "newer": newer}
        for older, newer in pairwise(rows)
        if older.version.config_name == newer.version.config_name and older.runs and newer.runs
    ]
    context = {
        "dataset": dataset,
        "versions": rows,
        "comparisons": comparisons,
        "unversioned": selectors.unversioned_runs(dataset),
        "reference_sets": selectors.reference_sets_of_dataset(dataset),
        "notices": selectors.suspension_notices(request.user, dataset),
        "reference_form": forms[0],
        "certify_form": forms[1],
        "teach_form": forms[2],
        "teachings": selectors.teachings_of_dataset(dataset),
    }
    return render(request, "dashboard/certification.html", context, status=status)


@require_GET
@researcher_required
def certification_page(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = dataset_for_stats_or_404(request.user, dataset_id)
    return _page(request, dataset, _forms(dataset))


_FORM_OF_ACTION = {"reference": 0, "certify": 1, "teach": 2}


def _action(
    request: HttpRequest, dataset_id: int, which: str, act: Callable[[Dataset, dict[str, Any]], str]
) -> HttpResponse:
    """One action of the page: its form checked, `act` run on the cleaned data (it returns the success message), the
    page shown again with the form's errors, the service's refusal among them, or a redirect to it."""
    dataset = dataset_for_stats_or_404(request.user, dataset_id)
    forms = _forms(dataset, request.POST, which)
    form = forms[_FORM_OF_ACTION[which]]
    if not form.is_valid():
        return _page(request, dataset, forms, status=400)
    try:
        message = act(dataset, form.cleaned_data)
    except CertificationError as exc:
        form.add_error(None, str(exc))
        return _page(request, dataset, forms, status=400)
    messages.success(request, message)
    return redirect("dashboard-certification", dataset.pk)


def _evaluation_arguments(request: HttpRequest, dataset: Dataset, data: dict[str, Any]) -> dict[str, Any]:
    """A version-on-reference-set form's cleaned data as the evaluation service's arguments: the chosen version and
    reference set, the researcher who asked, and the form's own fields, named as the service names them."""
    return {
        **data,
        "version": JudgeVersion.objects.get(fingerprint=data["version"]),
        "reference_set": selectors.reference_sets_of_dataset(dataset).get(pk=int(data["reference_set"])),
        "requested_by": request.user,
    }


@require_POST
@researcher_required
def reference_set_name(request: HttpRequest, dataset_id: int) -> HttpResponse:
    def act(dataset: Dataset, data: dict[str, Any]) -> str:
        source = data["source"]
        campaign = None
        if source.startswith("campaign:"):
            campaign = campaigns_of_dataset(dataset.pk).filter(pk=int(source.partition(":")[2])).first()
        reference = reference_set_create(
            dataset=dataset,
            name=data["name"],
            owner=request.user,  # type: ignore[arg-type]
            campaign=campaign,
            origin="all" if campaign is not None else source,
        )
        return _("Reference set %(name)s frozen with %(n)d ratings.") % {
            "name": reference.name,
            "n": reference.ratings.count(),
        }

    return _action(request, dataset_id, "reference", act)


@require_POST
@researcher_required
def certify_version(request: HttpRequest, dataset_id: int) -> HttpResponse:
    def act(dataset: Dataset, data: dict[str, Any]) -> str:
        certificate = certificate_request(**_evaluation_arguments(request, dataset, data))
        return _(
            "Certification of %(version)s started: its run judges the reference set, then the test is applied."
        ) % {"version": certificate.version.short}

    return _action(request, dataset_id, "certify", act)


@require_POST
@researcher_required
def teach_version(request: HttpRequest, dataset_id: int) -> HttpResponse:
    def act(dataset: Dataset, data: dict[str, Any]) -> str:
        teaching = judge_version_teach(**_evaluation_arguments(request, dataset, data))
        return _(
            "Teaching of %(version)s started: the old and the taught version judge %(n)d held-out answers, then "
            "the two are compared."
        ) % {"version": teaching.parent.short, "n": teaching.held_out}

    return _action(request, dataset_id, "teach", act)

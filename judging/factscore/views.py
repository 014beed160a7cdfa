"""FActScore pages: the researcher's report and drill-down, and the annotators' fact review."""

from __future__ import annotations

import time

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_POST

from judging.factscore import selectors, services
from judging.factscore.models import FactOrigin, FactReviewCampaign, HumanFactLabel

LABEL_CHOICES = [
    # Lazy: translated per request, in the reviewer's language.
    (HumanFactLabel.SUPPORTED, gettext_lazy("Supported"), "s"),
    (HumanFactLabel.NOT_SUPPORTED, gettext_lazy("Not supported"), "n"),
    (HumanFactLabel.IRRELEVANT, gettext_lazy("Irrelevant"), "i"),
]


def _int_or_none(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


# --- researcher ------------------------------------------------------------------------------------


@require_GET
@login_required
def run_index(request: HttpRequest) -> HttpResponse:
    if not request.user.is_staff:
        raise PermissionDenied("researchers only")
    return render(request, "factscore/runs.html", {"runs": selectors.factscore_runs_for_user(request.user)})


@require_GET
@login_required
def run_report(request: HttpRequest, run_id: int) -> HttpResponse:
    run = selectors.factscore_run_for_user_or_404(request.user, run_id)
    report = selectors.factscore_report(run, include_answers=True)
    return render(request, "factscore/report.html", {"run": run, "report": report})


@require_GET
@login_required
def answer_detail(request: HttpRequest, answer_id: int) -> HttpResponse:
    answer = selectors.fact_answer_for_user_or_404(request.user, answer_id)
    return render(request, "factscore/answer.html", selectors.answer_drilldown(answer))


# --- annotators ------------------------------------------------------------------------------------


@require_GET
@login_required
def review_home(request: HttpRequest) -> HttpResponse:
    campaigns = [
        (campaign, selectors.review_progress(campaign=campaign, user=request.user))
        for campaign in selectors.review_campaigns_for_annotator(request.user)
    ]
    return render(request, "factscore/review_home.html", {"campaigns": campaigns})


@require_POST
@login_required
def review_next(request: HttpRequest, campaign_id: int) -> HttpResponse:
    # POST only: claiming writes a lease, and a GET (a link or an image on another site) must change nothing.
    campaign = selectors.review_campaign_for_annotator(request.user, campaign_id)
    return _claim_next(request, campaign)


def _claim_next(request: HttpRequest, campaign: FactReviewCampaign) -> HttpResponse:
    try:
        assignment = services.fact_review_claim(campaign=campaign, user=request.user)
    except services.NotInReviewPool:
        raise Http404("no such review campaign") from None
    if assignment is None:
        return render(
            request,
            "factscore/review_done.html",
            {"campaign": campaign, "progress": selectors.review_progress(campaign=campaign, user=request.user)},
        )
    return redirect("factscore:review-task", campaign_id=campaign.pk, task_id=assignment.task_id)


def _task_context(request: HttpRequest, campaign, assignment, error: str = "") -> dict:  # type: ignore[no-untyped-def]
    answer = assignment.task.answer
    turn = answer.response.turn
    facts = services.reviewer_facts(assignment)
    labels = dict(assignment.labels.values_list("fact_id", "label"))
    rows = []
    for fact in facts:
        evidence = []
        if campaign.show_evidence and fact.origin == FactOrigin.MODEL:
            verdict = getattr(fact, "verdict", None)
            # Only the passages are shown, never the estimator's label.
            evidence = [
                {"title": e.get("title", ""), "text": e.get("text", "")} for e in (verdict.evidence if verdict else [])
            ]
        rows.append({"fact": fact, "evidence": evidence, "label": labels.get(fact.pk, "")})
    return {
        "campaign": campaign,
        "assignment": assignment,
        "prompt": turn.prompt,
        "answer_text": answer.response.text,
        "rows": rows,
        "label_choices": LABEL_CHOICES,
        "progress": selectors.review_progress(campaign=campaign, user=request.user),
        "error": error,
        "started": f"{time.time():.3f}",
    }


@require_GET
@login_required
def review_task(request: HttpRequest, campaign_id: int, task_id: int) -> HttpResponse:
    campaign = selectors.review_campaign_for_annotator(request.user, campaign_id)
    assignment = selectors.leased_review(campaign=campaign, task_id=task_id, user=request.user)
    return render(request, "factscore/review_task.html", _task_context(request, campaign, assignment))


@require_POST
@login_required
def review_edit(request: HttpRequest, campaign_id: int, task_id: int) -> HttpResponse:
    campaign = selectors.review_campaign_for_annotator(request.user, campaign_id)
    assignment = selectors.leased_review(campaign=campaign, task_id=task_id, user=request.user)
    error = ""
    try:
        services.fact_review_edit(
            assignment=assignment,
            user=request.user,
            operation=request.POST.get("operation", ""),
            fact_id=_int_or_none(request.POST.get("fact_id")),
            text=request.POST.get("text", ""),
        )
    except services.ReviewError as exc:
        error = str(exc)
    except services.ReviewNotLeased:
        raise PermissionDenied("this review is no longer yours") from None
    context = _task_context(request, campaign, assignment, error)
    if request.htmx:  # type: ignore[attr-defined]
        return render(request, "factscore/_review_facts.html", context, status=422 if error else 200)
    if error:
        return render(request, "factscore/review_task.html", context, status=422)
    return redirect("factscore:review-task", campaign_id=campaign.pk, task_id=task_id)


@require_POST
@login_required
def review_submit(request: HttpRequest, campaign_id: int, task_id: int) -> HttpResponse:
    campaign = selectors.review_campaign_for_annotator(request.user, campaign_id)
    assignment = selectors.leased_review(campaign=campaign, task_id=task_id, user=request.user)
    labels: dict[int, str] = {}
    for key in request.POST:
        value = request.POST.get(key, "")
        if key.startswith("label-"):
            fact_id = _int_or_none(key[len("label-") :])
            if fact_id is None:
                return render(
                    request,
                    "factscore/review_task.html",
                    _task_context(request, campaign, assignment, _("Unknown field.")),
                    status=422,
                )
            labels[fact_id] = value
    started = request.POST.get("started")
    seconds = None
    try:
        seconds = max(0.0, time.time() - float(started)) if started else None
    except ValueError:
        seconds = None
    try:
        services.fact_review_submit(
            assignment=assignment,
            user=request.user,
            labels=labels,
            seconds_spent=seconds,
            comment=request.POST.get("comment", ""),
        )
    except services.ReviewError as exc:
        context = _task_context(request, campaign, assignment, str(exc))
        # Keep what the reviewer chose so far.
        for row in context["rows"]:
            row["label"] = labels.get(row["fact"].pk, row["label"])
        return render(request, "factscore/review_task.html", context, status=422)
    except services.ReviewNotLeased:
        raise PermissionDenied("this review is no longer yours") from None
    return _claim_next(request, campaign)


@require_POST
@login_required
def review_skip(request: HttpRequest, campaign_id: int, task_id: int) -> HttpResponse:
    campaign = selectors.review_campaign_for_annotator(request.user, campaign_id)
    assignment = selectors.leased_review(campaign=campaign, task_id=task_id, user=request.user)
    try:
        services.fact_review_skip(assignment=assignment, user=request.user, reason=request.POST.get("reason", ""))
    except services.ReviewNotLeased:
        raise PermissionDenied("this review is no longer yours") from None
    return _claim_next(request, campaign)

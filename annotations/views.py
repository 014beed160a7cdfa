"""Server-rendered pages: the home page, the annotator's campaign and task pages, campaign progress and the
dataset downloads.

Views stay thin: they parse the request, call a selector or service, and pick a template (an htmx partial when
htmx asked). Blinding is enforced by what the selectors load, not by what the templates leave out.
"""

import re
import uuid
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core import signing
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict, StreamingHttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect
from django_htmx.middleware import HtmxDetails

from annotations.adjudication.selectors import dispute_queue, may_adjudicate
from annotations.campaigns.answers import MISSING, TaskAnswer, value_limit
from annotations.campaigns.claims import assignment_claim, assignment_skip
from annotations.campaigns.drafts import assignment_draft_save
from annotations.campaigns.errors import (
    AlreadyRated,
    CampaignError,
    DraftInvalid,
    FieldProblem,
    LeaseLost,
    QuotaReached,
    RevisitRefused,
    SubmissionInvalid,
)
from annotations.campaigns.progress import annotator_progress, campaign_progress
from annotations.campaigns.selectors import (
    campaign_answer_format,
    campaign_for_annotator,
    campaigns_for_annotator,
    closed_campaign_for_annotator,
)
from annotations.campaigns.submissions import submission_create
from annotations.campaigns.tasks import (
    assignment_draft_values,
    earlier_prompts,
    has_submitted_task,
    leased_assignment,
    revisable_assignment,
    submission_form_values,
    submitted_tasks,
    task_candidates,
)
from annotations.datasets.agreement_summary import agreement_report
from annotations.datasets.downloads import EXPORT_KINDS, export_response
from annotations.datasets.parquet_export import BINARY_KINDS, binary_export_response
from annotations.models import Assignment, AssignmentStatus, Campaign, SkipReason
from annotations.quality.selectors import quality_panel, rater_names_choice
from annotations.recruitment.services import crowd_session_finish
from annotations.recruitment.views import recruitment_context
from annotations.rubrics.task_sheet import NA_TOKEN, campaign_scales, task_sheet
from annotations.selectors import (
    campaign_for_researcher,
    campaigns_for_researcher,
    dataset_for_user_or_404,
    datasets_for_user,
)
from annotations.slots import HandOut, NotInPool, NotLeased, hand_out_window
from annotations.text.ascii_numbers import ascii_decimal, ascii_int
from annotations.text.opaque import opaque_pk, opaque_ref


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


RATING_FIELD = re.compile(r"^r-([0-9]{1,3})-([0-9]{1,3})$")
DRAFT_IGNORED_FIELDS = frozenset({"csrfmiddlewaretoken", "lease"})


@require_GET
@login_required
def home(request: HttpRequest) -> HttpResponse:
    """Annotators see their campaigns with their own progress; researchers also see their datasets and campaigns."""
    mine = [
        (campaign, annotator_progress(campaign=campaign, user=request.user))
        for campaign in campaigns_for_annotator(request.user)
    ]
    context: dict[str, Any] = {"annotator_campaigns": mine}
    if may_adjudicate(request.user):
        context["open_disputes"] = len(dispute_queue(request.user))
    if request.user.is_staff:
        context["datasets"] = datasets_for_user(request.user)
        context["researcher_campaigns"] = campaigns_for_researcher(request.user)
    return render(request, "home.html", context)


# --- annotator pages --------------------------------------------------------------------------------------------


def _task_url(campaign: Campaign, task_id: int) -> str:
    return reverse("annotate-task", args=[campaign.pk, task_id])


@require_GET
@login_required
def campaign_detail(request: HttpRequest, campaign_id: int) -> HttpResponse:
    campaign = campaign_for_annotator(request.user, campaign_id)
    return render(
        request,
        "annotate/campaign.html",
        {
            "campaign": campaign,
            "progress": annotator_progress(campaign=campaign, user=request.user),
            "scales": campaign_scales(campaign),
            "submitted": submitted_tasks(campaign=campaign, user=request.user),
            "window_open": _hand_out(campaign) == HandOut.OPEN,
        },
    )


def _hand_out(campaign: Campaign) -> HandOut:
    return hand_out_window(opens_at=campaign.opens_at, closes_at=campaign.closes_at, now=timezone.now())


def _outside_window_message(campaign: Campaign) -> str | None:
    """Why no task is handed out when the campaign is outside its hand-out window; None inside it."""
    window = _hand_out(campaign)
    zone = timezone.get_current_timezone_name()
    if window == HandOut.NOT_YET_OPEN:
        when = date_format(timezone.localtime(campaign.opens_at), "Y-m-d H:i")
        return _("This campaign opens at %(when)s (%(zone)s).") % {"when": when, "zone": zone}
    if window == HandOut.CLOSED:
        when = date_format(timezone.localtime(campaign.closes_at), "Y-m-d H:i")
        return _("This campaign closed at %(when)s (%(zone)s).") % {"when": when, "zone": zone}
    return None


def _redirect(request: HtmxHttpRequest, url: str) -> HttpResponse:
    if request.htmx:
        return HttpResponseClientRedirect(url)
    return HttpResponseRedirect(url, status=303)


def _next_or_done(request: HtmxHttpRequest, campaign: Campaign, *, saved: bool = False) -> HttpResponse:
    try:
        assignment = assignment_claim(campaign=campaign, user=request.user)  # type: ignore[arg-type]
    except NotInPool:
        raise Http404("no such campaign") from None
    if saved:
        # Worded after the claim: after the last task, "here is your next task" would contradict the page.
        messages.success(request, _("Saved.") if assignment is None else _("Saved. Here is your next task."))
    if assignment is None:
        if crowd_session_finish(user=request.user, campaign=campaign):  # type: ignore[arg-type]
            return _redirect(request, reverse("crowd-done"))
        campaign.refresh_from_db(fields=["stopped_at"])
        if campaign.stopped_at is None:
            messages.info(
                request,
                _outside_window_message(campaign) or _("There are no more tasks for you in this campaign. Thank you!"),
            )
        return _redirect(request, reverse("annotate-campaign", args=[campaign.pk]))
    return _redirect(request, _task_url(campaign, assignment.task_id))


@require_http_methods(["GET", "POST"])
@login_required
def task_next(request: HtmxHttpRequest, campaign_id: int) -> HttpResponse:
    """POST because it leases a task: GET requests never change anything. A GET (a bookmark, a reload) goes to
    the campaign page, whose button sends the POST."""
    campaign = campaign_for_annotator(request.user, campaign_id)
    if request.method == "GET":
        return HttpResponseRedirect(reverse("annotate-campaign", args=[campaign.pk]), status=303)
    return _next_or_done(request, campaign)


def _task_context(
    request: HttpRequest,
    *,
    campaign: Campaign,
    assignment: Assignment,
    values: dict[str, str] | None = None,
    problems: list[FieldProblem] | None = None,
    idempotency_key: str = "",
) -> dict[str, Any]:
    values = values or {}
    problems = problems or []
    editing = assignment.status == AssignmentStatus.SUBMITTED
    errors: dict[str, str] = {}
    for problem in problems:
        errors.setdefault(problem.field, problem.message)
    scales = campaign_scales(campaign)
    candidates = task_candidates(assignment=assignment, user_id=int(request.user.pk or 0))
    sheet = task_sheet(campaign, scales, candidates, values=values, errors=errors)
    turn = assignment.task.turn
    return {
        "campaign": campaign,
        "assignment": assignment,
        "task": assignment.task,
        "progress": annotator_progress(campaign=campaign, user=request.user),
        "scales": scales,
        "sheet": sheet,
        "earlier_prompts": earlier_prompts(turn),
        "prompt": turn.prompt,
        "reference": turn.reference if campaign.show_reference else None,
        "context_passages": turn.context_passages if campaign.show_context else [],
        "values": values,
        "problems": problems,
        "errors": errors,
        "idempotency_key": idempotency_key or uuid.uuid4().hex,
        "submit_url": reverse("annotate-submit", args=[campaign.pk, assignment.task_id]),
        "skip_url": reverse("annotate-skip", args=[campaign.pk, assignment.task_id]),
        "draft_url": reverse("annotate-draft", args=[campaign.pk, assignment.task_id]),
        "editing": editing,
        "lease_token": signing.dumps(opaque_ref("slot", assignment.pk), salt=_lease_salt(request)),
        "skip_reasons": SkipReason.choices,
        "na_token": NA_TOKEN,
        "answer_format": campaign_answer_format(campaign),
    }


def _lease_salt(request: HttpRequest) -> str:
    return f"annotate-lease:{request.user.pk}"


def _former_slot(request: HttpRequest) -> int | None:
    """The slot the submitted page was built for, signed for this user, so a late answer can say which lease it had.
    The slot is named by its opaque reference: a signature is not encryption, and a slot id would show its order."""
    try:
        value = signing.loads(str(request.POST.get("lease", "")), salt=_lease_salt(request))
    except signing.BadSignature:
        return None
    return opaque_pk("slot", value) if isinstance(value, str) else None


def _closed(request: HttpRequest, campaign_id: int) -> Campaign:
    """For a pool member, a closed campaign says so and leads home; anyone else gets the usual 404."""
    campaign = closed_campaign_for_annotator(request.user, campaign_id)
    if campaign is None:
        raise Http404("no such campaign")
    return campaign


@require_GET
@login_required
def task_page(request: HttpRequest, campaign_id: int, task_id: int) -> HttpResponse:
    """The leased task, or the user's submitted answer to correct while the campaign allows it. A task that is not
    theirs gets the 403 page that leads back to the campaign; a closed campaign a page that says it is closed."""
    try:
        campaign = campaign_for_annotator(request.user, campaign_id)
    except Http404:
        closed = _closed(request, campaign_id)
        return render(request, "annotate/task_closed.html", {"campaign": closed, "closed": True})
    try:
        assignment = leased_assignment(campaign=campaign, task_id=task_id, user=request.user)
    except PermissionDenied:
        revisable = revisable_assignment(campaign=campaign, task_id=task_id, user=request.user)
        if revisable is None:
            if has_submitted_task(campaign=campaign, task_id=task_id, user=request.user):
                return render(request, "annotate/task_closed.html", {"campaign": campaign, "closed": False})
            raise
        assignment = revisable
    values = assignment_draft_values(assignment=assignment, user=request.user)
    draft_saved = bool(values)
    if not values and assignment.status == AssignmentStatus.SUBMITTED:
        values = submission_form_values(assignment=assignment, user=request.user)
    context = _task_context(request, campaign=campaign, assignment=assignment, values=values)
    context["draft_saved"] = draft_saved
    return render(request, "annotate/task.html", context)


@require_POST
@login_required
def task_draft(request: HttpRequest, campaign_id: int, task_id: int) -> HttpResponse:
    """Keeps the half-filled form; the page sends it as the annotator types and when they leave."""
    campaign = campaign_for_annotator(request.user, campaign_id)
    # The CSRF token travels in the body when the page is leaving (a beacon carries no headers), and the page sends its
    # signed lease along with the fields; neither is a form value.
    values = {name: value for name, value in request.POST.items() if name not in DRAFT_IGNORED_FIELDS}
    user: User = request.user  # type: ignore[assignment]
    try:
        assignment_draft_save(campaign=campaign, task_id=task_id, user=user, values=values)
    except NotInPool:
        raise Http404("no such campaign") from None
    except DraftInvalid as exc:
        return HttpResponse(str(exc), status=400, content_type="text/plain; charset=utf-8")
    return HttpResponse(status=204)


def _parse_value(text: str) -> Any:
    text = text.strip()
    if not text:
        return None
    if text.lower() in {NA_TOKEN, "n/a"}:
        return MISSING
    number = ascii_decimal(text)
    return text if number is None else number  # text is refused by the service with a message naming the field


def answer_from_form(data: QueryDict) -> tuple[TaskAnswer, dict[str, str]]:
    """The TaskAnswer in a POSTed form, and the raw values to put back into the form if it is refused.
    Unknown fields are ignored; rating fields that name candidates not shown are refused by the service."""
    ratings: dict[tuple[int, int], Any] = {}
    values: dict[str, str] = {}
    for key in data:
        match = RATING_FIELD.match(key)
        if match:
            sent = str(data.get(key, ""))
            raw = sent[: value_limit(sent)]
            values[key] = raw.strip()
            ratings[(int(match[1]), int(match[2]))] = _parse_value(raw)
    preference_text = str(data.get("preference", "")).strip()
    preference: int | None = None
    if preference_text:
        preference = ascii_int(preference_text, max_digits=3)
        preference = -1 if preference is None else preference
    values["preference"] = preference_text
    values["none_appropriate"] = "1" if data.get("none_appropriate") else ""
    values["rationale"] = str(data.get("rationale", ""))
    values["comment"] = str(data.get("comment", ""))
    return (
        TaskAnswer(
            ratings=ratings,
            preference=preference,
            none_appropriate=bool(data.get("none_appropriate")),
            rationale=values["rationale"],
            comment=values["comment"],
        ),
        values,
    )


def _back_to_task(request: HttpRequest, campaign: Campaign, task_id: int) -> HttpResponse:
    """A GET on a task's POST-only step goes to the task page that offers it, with the same refusals (404 outside
    the campaign, 403 for a task not leased to the user), so the redirect reveals nothing the page would not."""
    leased_assignment(campaign=campaign, task_id=task_id, user=request.user)
    return HttpResponseRedirect(_task_url(campaign, task_id), status=303)


@require_http_methods(["GET", "POST"])
@login_required
def task_submit(request: HtmxHttpRequest, campaign_id: int, task_id: int) -> HttpResponse:
    """Stores the answer, or a correction of a submitted one. A refusal is never silent: a closed campaign, a
    correction the campaign does not allow and a lease that went to someone else each say so on the page the
    annotator lands on."""
    try:
        campaign = campaign_for_annotator(request.user, campaign_id)
    except Http404:
        if request.method == "GET":
            raise
        _closed(request, campaign_id)
        messages.error(request, _("This campaign is closed, so your answer was not saved."))
        return _redirect(request, reverse("home"))
    if request.method == "GET":
        return _back_to_task(request, campaign, task_id)
    answer, values = answer_from_form(request.POST)
    key = str(request.POST.get("idempotency_key", ""))
    user: User = request.user  # type: ignore[assignment]
    campaign_url = reverse("annotate-campaign", args=[campaign.pk])
    try:
        result = submission_create(
            campaign=campaign,
            task_id=task_id,
            user=user,
            idempotency_key=key,
            answer=answer,
            former_slot_id=_former_slot(request),
        )
    except LeaseLost:
        messages.error(
            request,
            _(
                "Your time for this task ran out and it went to someone else, so your answer was not counted. "
                "It is kept as a draft and fills in the form if the task comes back to you."
            ),
        )
        return _redirect(request, campaign_url)
    except RevisitRefused:
        messages.error(
            request,
            _("You had submitted this task already and this campaign allows no changes: your change was not saved."),
        )
        return _redirect(request, campaign_url)
    except QuotaReached:
        messages.info(
            request, _("You have already done every task this study asks of you, so this answer was not saved.")
        )
        return _next_or_done(request, campaign)
    except (NotLeased, NotInPool):
        if not campaign.tasks.filter(pk=task_id).exists():
            raise Http404("no such task") from None
        raise PermissionDenied("this task is not leased to you") from None
    except AlreadyRated:
        messages.error(
            request,
            _(
                "You have already rated one of these answers in another campaign, so this task cannot take your "
                "answer and was not saved. It goes back to the others."
            ),
        )
        return _next_or_done(request, campaign)
    except SubmissionInvalid as invalid:
        try:
            assignment = leased_assignment(campaign=campaign, task_id=task_id, user=request.user)
        except PermissionDenied:
            revisable = revisable_assignment(campaign=campaign, task_id=task_id, user=request.user)
            if revisable is None:
                raise
            assignment = revisable
        context = _task_context(
            request,
            campaign=campaign,
            assignment=assignment,
            values=values,
            problems=invalid.problems,
            idempotency_key=key if len(key) <= 64 else "",
        )
        template = "annotate/_task_form.html" if request.htmx else "annotate/task.html"
        return render(request, template, context, status=422)
    if result.revised:
        messages.success(request, _("Your correction is saved."))
        return _redirect(request, campaign_url)
    return _next_or_done(request, campaign, saved=not result.replayed)


@require_http_methods(["GET", "POST"])
@login_required
def task_skip(request: HtmxHttpRequest, campaign_id: int, task_id: int) -> HttpResponse:
    campaign = campaign_for_annotator(request.user, campaign_id)
    if request.method == "GET":
        return _back_to_task(request, campaign, task_id)
    assignment = leased_assignment(campaign=campaign, task_id=task_id, user=request.user)
    try:
        assignment_skip(
            assignment=assignment,
            user=request.user,  # type: ignore[arg-type]
            reason=str(request.POST.get("reason", "")),
            note=str(request.POST.get("note", "")),
        )
    except CampaignError as exc:
        messages.error(request, str(exc))
        return _redirect(request, _task_url(campaign, task_id))
    except NotLeased:
        raise PermissionDenied("this task is not leased to you") from None
    messages.info(request, _("Task skipped."))
    return _next_or_done(request, campaign)


# --- researcher pages -------------------------------------------------------------------------------------------


@require_GET
@login_required
def campaign_progress_page(request: HttpRequest, campaign_id: int) -> HttpResponse:
    campaign = campaign_for_researcher(request.user, campaign_id)
    context = {"campaign": campaign, "progress": campaign_progress(campaign), **recruitment_context(request, campaign)}
    context["quality"] = quality_panel(campaign, names=rater_names_choice(request.GET.get("names")))
    return render(request, "annotate/progress.html", context)


@require_GET
@login_required
def dataset_export(request: HttpRequest, dataset_id: int, kind: str) -> HttpResponse | StreamingHttpResponse:
    """The export buttons' target: the same downloads as the API, behind the login page instead of a 401.
    403 for anyone who is not a researcher and 404 outside the researcher's datasets, as on the progress page."""
    if not request.user.is_staff:
        raise PermissionDenied("researcher access is required")
    if kind not in EXPORT_KINDS and kind not in BINARY_KINDS:
        raise Http404("no such export")
    dataset = dataset_for_user_or_404(request.user, dataset_id)
    if kind in BINARY_KINDS:
        return binary_export_response(dataset, kind, agreement_report)
    return export_response(dataset, kind)

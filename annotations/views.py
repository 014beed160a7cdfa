"""Server-rendered pages: the home page, the annotator's campaign and task pages, campaign progress and the
dataset downloads.

Views stay thin: they parse the request, call a selector or service, and pick a template (an htmx partial when
htmx asked). Blinding is enforced by what the selectors load, not by what the templates leave out.
"""

import re
import uuid
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core import signing
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, StreamingHttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect
from django_htmx.middleware import HtmxDetails

from annotations.campaign_selectors import (
    NA_TOKEN,
    Candidate,
    Scale,
    annotator_progress,
    assignment_draft_values,
    campaign_for_annotator,
    campaign_for_researcher,
    campaign_progress,
    campaign_scales,
    campaigns_for_annotator,
    campaigns_for_researcher,
    closed_campaign_for_annotator,
    earlier_prompts,
    has_submitted_task,
    leased_assignment,
    rating_field_id,
    revisable_assignment,
    submission_form_values,
    submitted_tasks,
    task_candidates,
)
from annotations.campaign_services import (
    MAX_VALUE_CHARS,
    MISSING,
    CampaignError,
    DraftInvalid,
    FieldProblem,
    LeaseLost,
    NotInPool,
    NotLeased,
    RevisitRefused,
    SubmissionInvalid,
    TaskAnswer,
    assignment_claim,
    assignment_draft_save,
    assignment_skip,
    submission_create,
)
from annotations.exporting import EXPORT_KINDS, export_response
from annotations.models import Assignment, AssignmentStatus, Campaign, SkipReason
from annotations.quality.selectors import quality_panel
from annotations.recruitment.services import crowd_session_finish
from annotations.recruitment.views import recruitment_context
from annotations.selectors import dataset_for_user_or_404, datasets_for_user


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


RATING_FIELD = re.compile(r"^r-(\d{1,3})-(\d{1,3})$")
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
        },
    )


def _redirect(request: HtmxHttpRequest, url: str) -> HttpResponse:
    if request.htmx:
        return HttpResponseClientRedirect(url)
    return HttpResponseRedirect(url, status=303)


def _next_or_done(request: HtmxHttpRequest, campaign: Campaign) -> HttpResponse:
    try:
        assignment = assignment_claim(campaign=campaign, user=request.user)  # type: ignore[arg-type]
    except NotInPool:
        raise Http404("no such campaign") from None
    if assignment is None:
        if crowd_session_finish(user=request.user):  # type: ignore[arg-type]
            return _redirect(request, reverse("crowd-done"))
        messages.info(request, _("There are no more tasks for you in this campaign. Thank you!"))
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


@dataclass(frozen=True)
class Cell:
    scale: Scale
    field_id: str
    value: str
    error: str
    popover: str  # the scale's help, rendered once per page (annotate/_scale_popover.html)
    blank_options: str  # the scale's options with none selected, rendered once per page
    buttons: bool  # a row of radio buttons (annotate/_scale_buttons.html) instead of a drop-down


FIELD_PLACEHOLDER = "__field__"


@dataclass(frozen=True)
class ScaleFragments:
    popover: str
    blank: str  # unselected options, or a button row whose field name is FIELD_PLACEHOLDER
    buttons: bool

    def blank_for(self, field_id: str) -> str:
        if not self.buttons:
            return self.blank
        # The row was escaped when it was rendered; the field id is "r-<digits>-<digits>" (rating_field_id).
        return mark_safe(self.blank.replace(FIELD_PLACEHOLDER, field_id))  # noqa: S308  # nosec B308 B703


def _scale_fragments(scales: list[Scale], *, dropdowns: bool) -> dict[int, ScaleFragments]:
    """Each scale's help and unselected control, rendered (and escaped) by their templates once per page instead
    of once per candidate: they are most of the task page's markup and were most of its rendering time."""
    fragments = {}
    for scale in scales:
        blank: str = ""
        buttons = scale.fits_button_row and not dropdowns
        if buttons:
            template = "annotate/_scale_buttons.html"
            blank = render_to_string(template, {"scale": scale, "field_id": FIELD_PLACEHOLDER, "na_token": NA_TOKEN})
        elif scale.is_discrete:
            blank = render_to_string("annotate/_scale_options.html", {"scale": scale, "na_token": NA_TOKEN})
        popover = render_to_string("annotate/_scale_popover.html", {"scale": scale})
        fragments[scale.index] = ScaleFragments(popover=popover, blank=blank, buttons=buttons)
    return fragments


def _cell(scale: Scale, fragments: ScaleFragments, number: int, values: dict[str, str], errors: dict[str, str]) -> Cell:
    field_id = rating_field_id(number, scale.index)
    return Cell(
        scale=scale,
        field_id=field_id,
        value=values.get(field_id, ""),
        error=errors.get(field_id, ""),
        popover=fragments.popover,
        blank_options=fragments.blank_for(field_id),
        buttons=fragments.buttons,
    )


@dataclass(frozen=True)
class SheetRow:
    candidate: Candidate
    cells: list[Cell]


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
    fragments = _scale_fragments(scales, dropdowns=campaign.scale_dropdowns)
    sheet = [
        SheetRow(
            candidate=candidate,
            cells=[_cell(scale, fragments[scale.index], candidate.number, values, errors) for scale in scales],
        )
        for candidate in candidates
    ]
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
        "lease_token": signing.dumps(assignment.pk, salt=_lease_salt(request)),
        "skip_reasons": SkipReason.choices,
        "na_token": NA_TOKEN,
    }


def _lease_salt(request: HttpRequest) -> str:
    return f"annotate-lease:{request.user.pk}"


def _former_slot(request: HttpRequest) -> int | None:
    """The slot the submitted page was built for, signed for this user, so a late answer can say which lease it had."""
    try:
        value = signing.loads(str(request.POST.get("lease", "")), salt=_lease_salt(request))
    except signing.BadSignature:
        return None
    return value if isinstance(value, int) else None


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
    try:
        return float(text)
    except ValueError:
        return text  # refused by the service with a message naming the field


def answer_from_form(data: Any) -> tuple[TaskAnswer, dict[str, str]]:
    """The TaskAnswer in a POSTed form, and the raw values to put back into the form if it is refused.
    Unknown fields are ignored; rating fields that name candidates not shown are refused by the service."""
    ratings: dict[tuple[int, int], Any] = {}
    values: dict[str, str] = {}
    for key in data:
        match = RATING_FIELD.match(key)
        if match:
            raw = str(data.get(key, ""))[:MAX_VALUE_CHARS]
            values[key] = raw.strip()
            ratings[(int(match[1]), int(match[2]))] = _parse_value(raw)
    preference_text = str(data.get("preference", "")).strip()
    preference: int | None = None
    if preference_text:
        preference = int(preference_text) if preference_text.isdigit() and len(preference_text) < 4 else -1
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
    except (NotLeased, NotInPool):
        if not campaign.tasks.filter(pk=task_id).exists():
            raise Http404("no such task") from None
        raise PermissionDenied("this task is not leased to you") from None
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
    if not result.replayed:
        messages.success(request, _("Saved. Here is your next task."))
    return _next_or_done(request, campaign)


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
    context["quality"] = quality_panel(campaign)
    return render(request, "annotate/progress.html", context)


@require_GET
@login_required
def dataset_export(request: HttpRequest, dataset_id: int, kind: str) -> StreamingHttpResponse:
    """The export buttons' target: the same downloads as the API, behind the login page instead of a 401.
    403 for anyone who is not a researcher and 404 outside the researcher's datasets, as on the progress page."""
    if not request.user.is_staff:
        raise PermissionDenied("researcher access is required")
    if kind not in EXPORT_KINDS:
        raise Http404("no such export")
    dataset = dataset_for_user_or_404(request.user, dataset_id)
    return export_response(dataset, kind)

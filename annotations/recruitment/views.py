"""Worker entry pages (Prolific, MTurk ExternalQuestion, signed invites), the completion page, and the researcher's
recruitment forms on the campaign progress page.

A landing GET writes nothing: it checks the platform's parameters and shows a start page that carries them signed;
its POST joins. Platform ids are personal data: no page title, account name, panel or log line of ours shows them."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.core import signing
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.clickjacking import xframe_options_exempt
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotations.campaign_selectors import campaign_for_researcher, campaign_scales
from annotations.models import Campaign
from annotations.recruitment import entry
from annotations.recruitment.entry import Arrival, BadParameter
from annotations.recruitment.forms import InviteLabelsForm, LinkSettingsForm
from annotations.recruitment.models import CrowdSession, Platform, RecruitmentLink
from annotations.recruitment.ratelimit import join_attempt_record, joins_blocked
from annotations.recruitment.selectors import (
    crowd_worker_of,
    current_session,
    example_task,
    link_by_token,
    recruitment_panel,
)
from annotations.recruitment.services import (
    LinkClosed,
    RecruitmentError,
    crowd_worker_join,
    link_create,
    link_update,
)

MTURK_FRAME_ANCESTORS = " ".join(sorted(entry.MTURK_SUBMIT_ORIGINS))
PROLIFIC_QUERY = "PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"


def _page(request: HttpRequest, title: str, message: str, *, status: int, **extra: Any) -> HttpResponse:
    return render(request, "recruit/message.html", {"title": title, "message": message, **extra}, status=status)


def _too_many(request: HttpRequest) -> HttpResponse:
    return _page(
        request,
        _("Too many attempts"),
        _("Too many joins from your network in a short time. Please wait a minute and reload this page."),
        status=429,
    )


def _bad_parameter(request: HttpRequest, problem: BadParameter) -> HttpResponse:
    return _page(
        request,
        _("This link is incomplete"),
        _("The link's parameter %(name)s %(problem)s. Please return to the study platform and open the study again.")
        % {"name": problem.name, "problem": problem.problem},
        status=400,
    )


def _signed_in_elsewhere(request: HttpRequest) -> HttpResponse:
    return _page(
        request,
        _("Sign out first"),
        _(
            "You are signed in to evalsite with your own account. A study link signs you in as a study participant: "
            "sign out first, or open the link in a private window."
        ),
        status=403,
        sign_out=True,
    )


def _link_or_404(request: HttpRequest, token: str, platform: str | None) -> RecruitmentLink:
    link = link_by_token(token)
    if link is None or (platform is not None and link.platform != platform):
        # Counted so that guessing tokens is throttled along with joining.
        join_attempt_record(request)
        raise Http404("no such study link")
    return link


def _refusal(request: HttpRequest, link: RecruitmentLink) -> HttpResponse | None:
    """A page refusing the visit, or None: accounts other than this link's workers, and closed campaigns."""
    worker = crowd_worker_of(request.user)
    if request.user.is_authenticated and worker is None:
        return _signed_in_elsewhere(request)
    if not link.campaign.is_active:
        return _page(
            request, _("This study has ended"), _("This study is closed. Thank you for your interest."), status=410
        )
    return None


def _closed_link(request: HttpRequest) -> HttpResponse:
    return _page(
        request,
        _("This study link is closed"),
        _("This study link admits no new participants at the moment."),
        status=410,
    )


def _start_page(request: HttpRequest, link: RecruitmentLink, arrival: Arrival) -> HttpResponse:
    context = {"campaign": link.campaign, "link": link, "arrival_token": arrival.signed(), "action": request.path}
    return render(request, "recruit/start.html", context)


def _allow_mturk_frame(response: HttpResponse) -> None:
    response.headers["Content-Security-Policy"] = _policy(frame_ancestors=MTURK_FRAME_ANCESTORS)


def _policy(*, frame_ancestors: str = "'none'", form_action: str = "'self'") -> str:
    policy = str(settings.CONTENT_SECURITY_POLICY)
    policy = policy.replace("frame-ancestors 'none'", f"frame-ancestors {frame_ancestors}")
    return policy.replace("form-action 'self'", f"form-action {form_action}")


def _join(request: HttpRequest, link: RecruitmentLink) -> HttpResponse:
    if joins_blocked(request):
        return _too_many(request)
    join_attempt_record(request)
    try:
        arrival = entry.arrival_from_signed(str(request.POST.get("arrival", "")), link)
    except (signing.BadSignature, TypeError):
        return _page(
            request,
            _("Please start again"),
            _("This start page expired or was changed. Please open the study link again."),
            status=400,
        )
    try:
        session = crowd_worker_join(
            link=link,
            platform_worker_id=arrival.worker_id,
            session_key=arrival.session_key,
            study_key=arrival.study_key,
            submit_to=arrival.submit_to,
        )
    except LinkClosed:
        return _closed_link(request)
    except RecruitmentError as exc:
        return _page(request, _("Joining failed"), str(exc), status=409)
    login(request, session.worker.user, backend="django.contrib.auth.backends.ModelBackend")
    return HttpResponseRedirect(reverse("annotate-campaign", args=[link.campaign_id]), status=303)


@require_http_methods(["GET", "POST"])
def entry_page(request: HttpRequest, token: str) -> HttpResponse:
    """Prolific links and signed invites: GET shows the start page, its POST joins."""
    if joins_blocked(request):
        return _too_many(request)
    link = _link_or_404(request, token, None)
    if link.platform == Platform.MTURK:
        raise Http404("no such study link")
    refusal = _refusal(request, link)
    if refusal is not None:
        return refusal
    if request.method == "POST":
        return _join(request, link)
    worker = crowd_worker_of(request.user)
    known = worker.platform_worker_id if worker is not None and worker.link_id == link.pk else None
    try:
        arrival = entry.arrival_for(link, request.GET, known_worker_id=known)
    except BadParameter as problem:
        return _bad_parameter(request, problem)
    except signing.BadSignature:
        join_attempt_record(request)
        return _page(
            request,
            _("This invitation is not valid"),
            _("This invitation link was altered or is incomplete. Please use the link exactly as you received it."),
            status=403,
        )
    if not link.is_open and not link.workers.filter(platform_worker_id=arrival.worker_id).exists():
        return _closed_link(request)
    return _start_page(request, link, arrival)


@xframe_options_exempt
@require_http_methods(["GET", "POST"])
def mturk_entry_page(request: HttpRequest, token: str) -> HttpResponse:
    """An MTurk ExternalQuestion, which MTurk shows in a frame: a preview before the HIT is accepted (stores
    nothing), then the start page. Only MTurk's origins may frame these pages."""
    response = _mturk_entry(request, token)
    if not isinstance(response, HttpResponseRedirect):
        _allow_mturk_frame(response)
    return response


def _mturk_entry(request: HttpRequest, token: str) -> HttpResponse:
    if joins_blocked(request):
        return _too_many(request)
    link = _link_or_404(request, token, Platform.MTURK)
    if request.method == "GET" and request.GET.get("assignmentId") == entry.MTURK_PREVIEW:
        return _preview(request, link)
    refusal = _refusal(request, link)
    if refusal is not None:
        return refusal
    if request.method == "POST":
        return _join(request, link)
    try:
        arrival = entry.mturk_arrival(link, request.GET)
    except BadParameter as problem:
        return _bad_parameter(request, problem)
    if not link.is_open and not link.workers.filter(platform_worker_id=arrival.worker_id).exists():
        return _closed_link(request)
    if request.headers.get("Sec-Fetch-Dest") == "iframe":
        # Inside MTurk's frame our cookies are third-party, which browsers refuse or partition, and the task pages
        # may not be framed: the work happens in a tab of its own, opened from here.
        return render(request, "recruit/open_tab.html", {"campaign": link.campaign, "url": request.get_full_path()})
    return _start_page(request, link, arrival)


def _preview(request: HttpRequest, link: RecruitmentLink) -> HttpResponse:
    campaign = link.campaign
    example = example_task(campaign) if campaign.is_active else None
    context = {
        "campaign": campaign,
        "task": example[0] if example else None,
        "answers": example[1] if example else [],
        "scales": campaign_scales(campaign),
    }
    return render(request, "recruit/preview.html", context)


@require_GET
@login_required
def completion_page(request: HttpRequest) -> HttpResponse:
    """The end of a worker's session: the completion code, then back to the platform. Marking the session done
    happened in the POST that found nothing left; this page only reads."""
    worker = crowd_worker_of(request.user)
    if worker is None:
        raise Http404("not a study participant")
    session = current_session(worker)
    link = worker.link
    if session is None or session.completed_at is None:
        return _page(
            request,
            _("Not finished yet"),
            _("You still have tasks to do in this study."),
            status=200,
            continue_url=reverse("annotate-campaign", args=[link.campaign_id]),
        )
    if link.platform == Platform.MTURK and session.submit_to:
        return _mturk_submit(request, link, session)
    return render(request, "recruit/done.html", {"link": link, "campaign": link.campaign})


def _mturk_submit(request: HttpRequest, link: RecruitmentLink, session: CrowdSession) -> HttpResponse:
    context = {
        "link": link,
        "submit_url": f"{session.submit_to.rstrip('/')}/mturk/externalSubmit",
        "assignment_id": session.session_key,
    }
    response = render(request, "recruit/mturk_submit.html", context)
    response.headers["Content-Security-Policy"] = _policy(form_action=f"'self' {session.submit_to.rstrip('/')}")
    return response


# --- researcher ---------------------------------------------------------------------------------------------------


def entry_url(request: HttpRequest, link: RecruitmentLink) -> str:
    """The address to give the platform, with the query string it fills in."""
    if link.platform == Platform.MTURK:
        return request.build_absolute_uri(reverse("crowd-mturk", args=[link.token]))
    url = request.build_absolute_uri(reverse("crowd-entry", args=[link.token]))
    if link.platform == Platform.PROLIFIC:
        return f"{url}?{PROLIFIC_QUERY}"
    return url


def recruitment_context(request: HttpRequest, campaign: Campaign) -> dict[str, Any]:
    """What the progress page's recruitment panel shows."""
    panel = recruitment_panel(campaign)
    return {
        "recruitment": panel,
        "recruitment_links": [(row, entry_url(request, row.link)) for row in panel.links],
    }


def _progress(campaign: Campaign) -> HttpResponseRedirect:
    return HttpResponseRedirect(reverse("campaign-progress", args=[campaign.pk]) + "#recruitment", status=303)


@require_POST
@login_required
def link_create_view(request: HttpRequest, campaign_id: int) -> HttpResponse:
    campaign = campaign_for_researcher(request.user, campaign_id)
    form = LinkSettingsForm(request.POST)
    if not form.is_valid():
        messages.error(request, form.problem())
        return _progress(campaign)
    try:
        link_create(
            campaign=campaign,
            platform=str(request.POST.get("platform", "")),
            created_by=request.user,  # type: ignore[arg-type]
            **form.settings(),
        )
    except RecruitmentError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, _("Study link created."))
    return _progress(campaign)


@require_POST
@login_required
def link_update_view(request: HttpRequest, campaign_id: int, platform: str) -> HttpResponse:
    campaign = campaign_for_researcher(request.user, campaign_id)
    link = RecruitmentLink.objects.filter(campaign=campaign, platform=platform).first()
    if link is None:
        raise Http404("no such study link")
    form = LinkSettingsForm(request.POST)
    if not form.is_valid():
        messages.error(request, form.problem())
        return _progress(campaign)
    try:
        link_update(link=link, is_open=bool(request.POST.get("is_open")), **form.settings())
    except RecruitmentError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, _("Study link saved."))
    return _progress(campaign)


@require_POST
@login_required
def invite_links_view(request: HttpRequest, campaign_id: int) -> HttpResponse:
    """One signed link per participant label. Nothing is stored: the signature is the invitation. POST because the
    list of labels can be long."""
    campaign = campaign_for_researcher(request.user, campaign_id)
    link = RecruitmentLink.objects.filter(campaign=campaign, platform=Platform.INVITE).first()
    if link is None:
        raise Http404("no such study link")
    form = InviteLabelsForm(request.POST)
    if not form.is_valid():
        messages.error(request, form.problem())
        return _progress(campaign)
    base = entry_url(request, link)
    invites = [
        (label, f"{base}?{urlencode({'invite': entry.invite_signature(link, label)})}") for label in form.labels()
    ]
    return render(request, "recruit/invites.html", {"campaign": campaign, "invites": invites})

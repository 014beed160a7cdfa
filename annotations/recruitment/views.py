"""Worker entry pages (Prolific, MTurk ExternalQuestion, signed invites), the completion page, and the researcher's
recruitment forms on the campaign progress page.

A landing GET writes nothing: it checks the platform's parameters and shows a start page that carries them signed;
its POST joins. Platform ids are personal data: no page title, account name, panel or log line of ours shows them.

Why one module of this size: a worker's way in (the platform's start page, consent, screening, the join) is one
sequence whose steps hand a signed state to the next, and the researcher's link forms are the other end of the same
links; each view is short.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.core import signing
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.translation import gettext as _
from django.views.decorators.clickjacking import xframe_options_exempt
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotations.models import Campaign
from annotations.recruitment import entry
from annotations.recruitment.entry import Arrival, BadParameter
from annotations.recruitment.forms import InviteLabelsForm, LinkSettingsForm
from annotations.recruitment.models import (
    CrowdSession,
    LinkScreening,
    Platform,
    RecruitmentLink,
    ScreeningOutcomeKind,
)
from annotations.recruitment.ratelimit import join_attempt_allowed, join_attempt_record, joins_blocked
from annotations.recruitment.rules import questions_as_text, screening_passes
from annotations.recruitment.selectors import (
    crowd_worker_of,
    current_session,
    example_task,
    link_by_token,
    recruitment_panel,
    screening_ended_for,
)
from annotations.recruitment.services import (
    LinkClosed,
    RecruitmentError,
    crowd_worker_join,
    link_create,
    link_screening_set,
    link_update,
    screening_outcome_record,
)
from annotations.rubrics.task_sheet import Candidate, campaign_scales, task_sheet
from annotations.selectors import campaign_for_researcher
from annotations.slots import HandOut, hand_out_window

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
    campaign = link.campaign
    window = hand_out_window(opens_at=campaign.opens_at, closes_at=campaign.closes_at, now=timezone.now())
    zone = timezone.get_current_timezone_name()
    if window == HandOut.CLOSED:
        when = date_format(timezone.localtime(campaign.closes_at), "Y-m-d H:i")
        message = _("This study closed at %(when)s (%(zone)s). Thank you for your interest.")
        return _page(request, _("This study has ended"), message % {"when": when, "zone": zone}, status=410)
    if window == HandOut.NOT_YET_OPEN:
        when = date_format(timezone.localtime(campaign.opens_at), "Y-m-d H:i")
        message = _("This study opens at %(when)s (%(zone)s). Please come back then.")
        return _page(request, _("This study has not started yet"), message % {"when": when, "zone": zone}, status=403)
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
    if not join_attempt_allowed(request):
        return _too_many(request)
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


# --- consent and screening ----------------------------------------------------------------------------------------


def _consent_proof(link: RecruitmentLink, arrival: Arrival) -> str:
    return signing.dumps([link.pk, arrival.worker_id, arrival.session_key], salt=entry.CONSENT_SALT, compress=True)


def _consented(link: RecruitmentLink, arrival: Arrival, proof: str) -> bool:
    try:
        data = signing.loads(proof, salt=entry.CONSENT_SALT, max_age=entry.JOIN_MAX_AGE)
    except signing.BadSignature:
        return False
    return bool(data == [link.pk, arrival.worker_id, arrival.session_key])


def _screening_step(
    request: HttpRequest, link: RecruitmentLink, screening: LinkScreening, template: str, **extra: Any
) -> HttpResponse:
    context = {
        "campaign": link.campaign,
        "link": link,
        "screening": screening,
        "arrival_token": str(request.POST.get("arrival", "")),
        "action": request.path,
        **extra,
    }
    return render(request, template, context)


def _screened_out(
    request: HttpRequest, link: RecruitmentLink, screening: LinkScreening, *, declined: bool
) -> HttpResponse:
    """The polite end before any task. Prolific gets the configured screened-out code; MTurk has no way to pay a
    participant who did no task, so the page asks them to return the HIT."""
    context = {"link": link, "campaign": link.campaign, "screening": screening, "declined": declined}
    response = render(request, "recruit/screened_out.html", context)
    if link.platform == Platform.MTURK:
        _allow_mturk_frame(response)
    return response


def _join_or_screen(request: HttpRequest, link: RecruitmentLink) -> HttpResponse:
    """The start page's POST. Without screening, the join. With it: consent first (agree or decline), then the
    screening questions; who declines or fails is recorded and ends here, without an account or a task slot."""
    screening = LinkScreening.objects.filter(link=link).first()
    if screening is None:
        return _join(request, link)
    try:
        arrival = entry.arrival_from_signed(str(request.POST.get("arrival", "")), link)
    except (signing.BadSignature, TypeError):
        return _join(request, link)  # answers with its own "start again" page
    if link.workers.filter(platform_worker_id=arrival.worker_id).exists():
        return _join(request, link)  # a returning participant was screened when they first joined
    if screening_ended_for(link=link, platform_worker_id=arrival.worker_id):
        return _screened_out(request, link, screening, declined=False)
    step = str(request.POST.get("step", ""))
    if step == "" and screening.consent_text:
        return _screening_step(request, link, screening, "recruit/consent.html")
    proof = str(request.POST.get("consent_proof", ""))
    if step == "consent":
        if request.POST.get("consent") != "agree":
            return _screening_end(request, link, screening, arrival, ScreeningOutcomeKind.DECLINED, {})
        proof = _consent_proof(link, arrival)
    elif screening.consent_text and not _consented(link, arrival, proof):
        return _screening_step(request, link, screening, "recruit/consent.html")
    if step != "screening" and screening.questions:
        return _screening_step(request, link, screening, "recruit/screening.html", consent_proof=proof)
    picked = {i: str(request.POST.get(f"q-{i}", "")) for i in range(len(screening.questions))}
    answers = {q["text"]: picked[i] for i, q in enumerate(screening.questions)}
    if not screening_passes(questions=screening.questions, rule=screening.rule, answers=picked):
        return _screening_end(request, link, screening, arrival, ScreeningOutcomeKind.SCREENED_OUT, answers)
    screening_outcome_record(
        link=link, platform_worker_id=arrival.worker_id, session_key=arrival.session_key,
        outcome=ScreeningOutcomeKind.PASSED, answers=answers,
    )  # fmt: skip
    return _join(request, link)


def _screening_end(
    request: HttpRequest,
    link: RecruitmentLink,
    screening: LinkScreening,
    arrival: Arrival,
    outcome: str,
    answers: dict[str, str],
) -> HttpResponse:
    if not join_attempt_allowed(request):
        return _too_many(request)
    screening_outcome_record(
        link=link, platform_worker_id=arrival.worker_id, session_key=arrival.session_key, outcome=outcome,
        answers=answers,
    )  # fmt: skip
    return _screened_out(request, link, screening, declined=outcome == ScreeningOutcomeKind.DECLINED)


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
        return _join_or_screen(request, link)
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
        return _join_or_screen(request, link)
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
    scales = campaign_scales(campaign)
    answers = example[1] if example else []
    # The task form itself, shown inert (the template): the candidates are numbered as on a task, and nothing in the
    # form leads anywhere, so a preview still stores nothing.
    candidates = [Candidate(number=n, response_id=0, text=text) for n, text in enumerate(answers, start=1)]
    context: dict[str, Any] = {
        "campaign": campaign,
        "task": example[0] if example else None,
        "scales": scales,
        "sheet": task_sheet(campaign, scales, candidates, values={}, errors={}),
        "values": {},
        "errors": {},
        "problems": [],
        "editing": False,
        "answer_format": campaign.dataset.answer_format,
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
    if session is not None and session.completed_at is None and session.ran_out_at is not None:
        # Not the completion code, no redirect to the platform's completion URL and no MTurk submission: the worker
        # reports this code (or returns the HIT) and the researcher decides.
        return render(request, "recruit/no_tasks.html", {"link": link, "campaign": link.campaign})
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


def _campaign_link_or_404(campaign: Campaign, platform: str) -> RecruitmentLink:
    link = RecruitmentLink.objects.filter(campaign=campaign, platform=platform).first()
    if link is None:
        raise Http404("no such study link")
    return link


def _link_settings_applied(
    request: HttpRequest, campaign: Campaign, apply: Callable[[dict[str, Any]], object], done: str
) -> HttpResponse:
    """The posted study link settings handed to `apply`, the outcome shown on the progress page."""
    form = LinkSettingsForm(request.POST)
    if not form.is_valid():
        messages.error(request, form.problem())
        return _progress(campaign)
    try:
        apply(form.settings())
    except RecruitmentError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, done)
    return _progress(campaign)


@require_POST
@login_required
def link_create_view(request: HttpRequest, campaign_id: int) -> HttpResponse:
    campaign = campaign_for_researcher(request.user, campaign_id)
    return _link_settings_applied(
        request,
        campaign,
        lambda settings: link_create(
            campaign=campaign,
            platform=str(request.POST.get("platform", "")),
            created_by=request.user,  # type: ignore[arg-type]
            **settings,
        ),
        _("Study link created."),
    )


@require_POST
@login_required
def link_update_view(request: HttpRequest, campaign_id: int, platform: str) -> HttpResponse:
    campaign = campaign_for_researcher(request.user, campaign_id)
    link = _campaign_link_or_404(campaign, platform)
    return _link_settings_applied(
        request,
        campaign,
        lambda settings: link_update(link=link, is_open=bool(request.POST.get("is_open")), **settings),
        _("Study link saved."),
    )


@require_POST
@login_required
def invite_links_view(request: HttpRequest, campaign_id: int) -> HttpResponse:
    """One signed link per participant label. Nothing is stored: the signature is the invitation. POST because the
    list of labels can be long."""
    campaign = campaign_for_researcher(request.user, campaign_id)
    link = _campaign_link_or_404(campaign, Platform.INVITE)
    form = InviteLabelsForm(request.POST)
    if not form.is_valid():
        messages.error(request, form.problem())
        return _progress(campaign)
    base = entry_url(request, link)
    invites = [
        (label, f"{base}?{urlencode({'invite': entry.invite_signature(link, label)})}") for label in form.labels()
    ]
    return render(request, "recruit/invites.html", {"campaign": campaign, "invites": invites})


@require_http_methods(["GET", "POST"])
@login_required
def link_screening_view(request: HttpRequest, campaign_id: int, platform: str) -> HttpResponse:
    """The researcher's consent text and screening questions of one study link."""
    campaign = campaign_for_researcher(request.user, campaign_id)
    link = _campaign_link_or_404(campaign, platform)
    screening = LinkScreening.objects.filter(link=link).first()
    values = {
        "consent_text": screening.consent_text if screening else "",
        "questions": questions_as_text(screening.questions) if screening else "",
        "rule": screening.rule if screening else "all",
        "screened_out_code": screening.screened_out_code if screening else "SCREENED",
    }
    status = 200
    if request.method == "POST":
        values = {key: str(request.POST.get(key, "")) for key in values}
        try:
            link_screening_set(
                link=link,
                consent_text=values["consent_text"],
                questions_text=values["questions"],
                rule=values["rule"],
                screened_out_code=values["screened_out_code"],
            )
        except RecruitmentError as exc:
            messages.error(request, str(exc))
            status = 422
        else:
            messages.success(request, _("Consent and screening saved."))
            return HttpResponseRedirect(reverse("crowd-link-screening", args=[campaign.pk, link.platform]), status=303)
    outcomes = [
        (ScreeningOutcomeKind(row["outcome"]).label, row["n"])
        for row in link.screening_outcomes.values("outcome").annotate(n=Count("id")).order_by("outcome")
    ]
    context = {"campaign": campaign, "link": link, "values": values, "outcomes": outcomes}
    return render(request, "recruit/screening_settings.html", context, status=status)

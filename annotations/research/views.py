"""The research area's pages. Every page but the invitation link is for researchers (staff) only, and shows only the
datasets they own or share; writes are POST only and go through the services."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotations.campaigns.errors import CampaignError
from annotations.campaigns.setup import campaign_create
from annotations.datasets.editing import dataset_answer_format_set
from annotations.datasets.import_checks import iter_items
from annotations.datasets.importing import dataset_import, dataset_validate
from annotations.errors import DatasetEditError, DatasetImportError, RubricError
from annotations.forms import DatasetUploadForm
from annotations.gold.selectors import gold_for_item, item_rating_count, span_gold_answers
from annotations.gold.services import GoldError, gold_item_remove, gold_item_set, item_answer_texts, item_systems
from annotations.models import AnswerFormat, Campaign, GoldItem, Item, Response
from annotations.recruitment.services import RecruitmentError, link_create
from annotations.research import selectors
from annotations.research.forms import (
    CampaignBuilderForm,
    GoldSettingsForm,
    InviteAcceptForm,
    InviteForm,
    PoolAddForm,
    expected_span_lines,
    minute_input,
    parse_expected_span_lines,
)
from annotations.research.services import (
    InviteError,
    annotator_deactivate,
    annotator_invite,
    annotator_pool_add,
    invite_accept,
)
from annotations.rubrics.specs import RUBRIC_MAX_BYTES, is_json_number, load_rubric_bytes, preset_rubric
from annotations.rubrics.task_sheet import NA_TOKEN, Candidate, Scale, aspect_scale, task_sheet
from annotations.selectors import dataset_for_user_or_404, datasets_for_user
from annotations.text.ascii_numbers import ascii_decimal, ascii_int

PREVIEW_ITEMS = 3


def researcher_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Signed in (else the login page) and a researcher (else 403)."""

    @wraps(view)
    @login_required
    def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_staff:
            raise PermissionDenied("researcher access is required")
        return view(request, *args, **kwargs)

    return checked


@require_GET
@researcher_required
def research_home(request: HttpRequest) -> HttpResponse:
    datasets = datasets_for_user(request.user).order_by("name")
    campaigns = selectors.researcher_campaigns(request.user).order_by("-created_at")
    return render(request, "research/home.html", {"datasets": datasets, "campaigns": campaigns, "section": "home"})


# --- import -----------------------------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@researcher_required
def research_import(request: HttpRequest) -> HttpResponse:
    """GET shows the form; POST with "preview" checks the whole file and shows the rubric and the first items
    (writing nothing); POST with "import" imports every item or none and opens the new dataset's items."""
    form = DatasetUploadForm(request.POST or None, request.FILES or None)
    context: dict[str, Any] = {"form": form, "section": "import"}
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            rubric = None
            if form.cleaned_data.get("rubric"):
                rubric = load_rubric_bytes(form.cleaned_data["rubric"].read(RUBRIC_MAX_BYTES + 1))
            preset = form.cleaned_data.get("preset") or None
            if "preview" in request.POST:
                if preset is not None:
                    rubric = preset_rubric(preset)
                used, notice = dataset_validate(stream=upload, rubric=rubric)
                upload.seek(0)
                first = []
                for _line, obj in iter_items(upload):
                    first.append(json.dumps(obj, ensure_ascii=False, indent=2))
                    if len(first) >= PREVIEW_ITEMS:
                        break
                context.update(preview_rubric=used, preview_notice=notice, preview_items=first)
            else:
                result = dataset_import(
                    stream=upload,
                    name=form.cleaned_data["name"],
                    rubric=rubric,
                    preset=preset,
                    owner=request.user,  # type: ignore[arg-type]
                )
                messages.success(
                    request,
                    _("Imported %(items)s items, %(answers)s answers and %(ratings)s ratings.")
                    % {"items": result.items, "answers": result.responses, "ratings": result.ratings},
                )
                if result.notice:
                    messages.warning(request, result.notice)
                return HttpResponseRedirect(reverse("research-items", args=[result.dataset.pk]))
        except (DatasetImportError, RubricError) as exc:
            context["error"] = _("%(error)s (nothing was imported)") % {"error": exc}
    failed = request.method == "POST" and (bool(form.errors) or "error" in context)
    return render(request, "research/import.html", context, status=400 if failed else 200)


# --- campaign builder -------------------------------------------------------------------------------------------


def _preview_html(request: HttpRequest, form: CampaignBuilderForm) -> str:
    """The first task of the dataset as an annotator will see it, rendered by the task form's own template from a
    campaign that is not saved: nothing is written."""
    data = form.cleaned_data
    campaign = Campaign(name=data["name"], dataset=form.dataset, **form.campaign_options())
    scales = [aspect_scale(aspect, i) for i, aspect in enumerate(data["aspects"], start=1)]
    first = Item.objects.filter(dataset=form.dataset).order_by("position").first()
    turn = first.turns.order_by("index").first() if first is not None else None
    responses = list(Response.objects.filter(turn=turn).order_by("position")) if turn is not None else []
    if data.get("candidates_per_task"):
        responses = responses[: data["candidates_per_task"]]
    candidates = [Candidate(number=i, response_id=r.pk, text=r.text) for i, r in enumerate(responses, start=1)]
    sheet = task_sheet(campaign, scales, candidates, values={}, errors={})
    context = {
        "campaign": campaign,
        "scales": scales,
        "sheet": sheet,
        "values": {},
        "problems": [],
        "errors": {},
        "submit_url": "",
        "draft_url": "",
        "idempotency_key": "",
        "lease_token": "",
        "na_token": NA_TOKEN,
        "editing": False,
        "answer_format": form.dataset.answer_format,
    }
    return render_to_string(
        "research/_task_preview.html",
        {
            **context,
            "prompt": turn.prompt if turn is not None else "",
            "reference": turn.reference if turn is not None and campaign.show_reference else None,
            "context_passages": turn.context_passages if turn is not None and campaign.show_context else [],
        },
        request=request,
    )


@require_http_methods(["GET", "POST"])
@researcher_required
def campaign_builder(request: HttpRequest) -> HttpResponse:
    """First the dataset (a GET choice), then the campaign of that dataset: "preview" renders a task from the
    settings, "create" builds the campaign (and its crowd link, if any) through the services, all or nothing."""
    dataset_id = request.POST.get("dataset") or request.GET.get("dataset")
    datasets = datasets_for_user(request.user).order_by("name")
    if not dataset_id:
        if request.method == "POST":
            return render(request, "research/campaign_dataset.html", {"datasets": datasets}, status=400)
        return render(request, "research/campaign_dataset.html", {"datasets": datasets, "section": "campaign"})
    dataset_pk = ascii_int(dataset_id)
    if dataset_pk is None:
        raise Http404("no such dataset")
    dataset = dataset_for_user_or_404(request.user, dataset_pk)
    form = CampaignBuilderForm(request.POST or None, dataset=dataset, user=request.user)
    context: dict[str, Any] = {"form": form, "dataset": dataset, "section": "campaign"}
    if request.method == "POST" and form.is_valid():
        if "preview" in request.POST:
            context["preview"] = _preview_html(request, form)
            return render(request, "research/campaign_builder.html", context)
        data = form.cleaned_data
        try:
            with transaction.atomic():
                campaign = campaign_create(
                    name=data["name"],
                    dataset=dataset,
                    raters_per_item=data["raters_per_item"],
                    candidates_per_task=data.get("candidates_per_task"),
                    annotators=list(data["annotators"]),
                    aspects=list(data["aspects"]),
                    created_by=request.user,  # type: ignore[arg-type]
                    **form.campaign_options(),
                )
                if data.get("crowd_platform"):
                    link_create(
                        campaign=campaign,
                        platform=data["crowd_platform"],
                        created_by=request.user,  # type: ignore[arg-type]
                        tasks_per_session=data.get("tasks_per_session"),
                        tasks_per_worker=data.get("tasks_per_worker"),
                    )
        except (CampaignError, RecruitmentError) as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(
                request,
                _("Built %(tasks)s tasks with %(n)s rater slots each.")
                % {"tasks": campaign.tasks.count(), "n": campaign.raters_per_item},
            )
            return HttpResponseRedirect(reverse("campaign-progress", args=[campaign.pk]))
    status = 400 if request.method == "POST" else 200
    return render(request, "research/campaign_builder.html", context, status=status)


# --- annotators -------------------------------------------------------------------------------------------------


def _annotators_page(request: HttpRequest, *, status: int = 200, **extra: Any) -> HttpResponse:
    campaigns = selectors.researcher_campaigns(request.user).order_by("name")
    context = {
        "section": "annotators",
        "loads": selectors.annotator_loads(request.user),
        "invite_form": extra.pop("invite_form", None) or InviteForm(campaigns=campaigns),
        "pool_form": extra.pop("pool_form", None)
        or PoolAddForm(campaigns=campaigns, annotators=selectors.pool_accounts(request.user)),
        **extra,
    }
    return render(request, "research/annotators.html", context, status=status)


@require_GET
@researcher_required
def annotators_page(request: HttpRequest) -> HttpResponse:
    return _annotators_page(request)


@require_POST
@researcher_required
def annotator_invite_view(request: HttpRequest) -> HttpResponse:
    """The link is shown in this response only: the database keeps just a hash of its token."""
    form = InviteForm(request.POST, campaigns=selectors.researcher_campaigns(request.user))
    if form.is_valid():
        try:
            issued = annotator_invite(
                username=form.cleaned_data["username"],
                email=form.cleaned_data["email"],
                campaign=form.cleaned_data["campaign"],
                by=request.user,  # type: ignore[arg-type]
            )
        except InviteError as exc:
            form.add_error("username", str(exc))
        else:
            link = request.build_absolute_uri(reverse("research-invite-accept", args=[issued.token]))
            return _annotators_page(request, invite_link=link, invited=issued.invite.user)
    return _annotators_page(request, status=400, invite_form=form)


@require_POST
@researcher_required
def annotator_pool_add_view(request: HttpRequest) -> HttpResponse:
    form = PoolAddForm(
        request.POST,
        campaigns=selectors.researcher_campaigns(request.user),
        annotators=selectors.pool_accounts(request.user),
    )
    if form.is_valid():
        try:
            annotator_pool_add(campaign=form.cleaned_data["campaign"], user=form.cleaned_data["annotator"])
        except InviteError as exc:
            form.add_error("annotator", str(exc))
        else:
            messages.success(
                request,
                _("%(user)s joined the pool of %(campaign)s.")
                % {"user": form.cleaned_data["annotator"].username, "campaign": form.cleaned_data["campaign"].name},
            )
            return HttpResponseRedirect(reverse("research-annotators"))
    return _annotators_page(request, status=400, pool_form=form)


@require_POST
@researcher_required
def annotator_deactivate_view(request: HttpRequest, user_id: int) -> HttpResponse:
    user = selectors.annotator_manageable(request.user, user_id)
    campaigns = list(selectors.researcher_campaigns(request.user).filter(annotators=user))
    spent = annotator_deactivate(user=user, campaigns=campaigns)
    messages.success(
        request,
        ngettext(
            "%(user)s was deactivated and can no longer sign in: their signed-in sessions are ended and "
            "%(count)d pending invitation link no longer works.",
            "%(user)s was deactivated and can no longer sign in: their signed-in sessions are ended and "
            "%(count)d pending invitation links no longer work.",
            spent,
        )
        % {"user": user.username, "count": spent},
    )
    return HttpResponseRedirect(reverse("research-annotators"))


@require_http_methods(["GET", "POST"])
def invite_accept_view(request: HttpRequest, token: str) -> HttpResponse:
    """Open to anyone holding the link: the token is the credential, and it works once, before it expires."""
    invite = selectors.invite_for_token(token)
    if invite is None:
        return render(request, "research/invite_invalid.html", status=404)
    form = InviteAcceptForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            invite_accept(token=token, password=form.cleaned_data["password1"])
        except InviteError as exc:
            form.add_error("password1", str(exc))
        else:
            messages.success(request, _("Your password is set. Sign in with it."))
            return HttpResponseRedirect(reverse("login"))
    status = 400 if request.method == "POST" else 200
    return render(request, "research/invite_accept.html", {"form": form, "invitee": invite.user}, status=status)


# --- item browser -----------------------------------------------------------------------------------------------


def _number(text: str | None) -> float | None:
    return ascii_decimal(text)


@require_GET
@researcher_required
def items_page(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = dataset_for_user_or_404(request.user, dataset_id)
    filters = selectors.ItemFilters(
        text=request.GET.get("q", "").strip(),
        system=request.GET.get("system", ""),
        aspect=request.GET.get("aspect", ""),
        value=_number(request.GET.get("value")),
        min_spread=_number(request.GET.get("spread")),
        min_gap=_number(request.GET.get("gap")),
    )
    page = Paginator(selectors.items_browse(dataset, filters), selectors.ITEMS_PER_PAGE).get_page(
        request.GET.get("page")
    )
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "dataset": dataset,
        "filters": filters,
        "page": page,
        "rows": selectors.item_rows(dataset, list(page.object_list)),
        "systems": selectors.dataset_systems(dataset),
        "aspects": selectors.dataset_aspects(dataset),
        "query": query.urlencode(),
        "answer_formats": AnswerFormat.choices,
    }
    return render(request, "research/items.html", context)


@require_POST
@researcher_required
def dataset_answer_format(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = dataset_for_user_or_404(request.user, dataset_id)
    try:
        dataset_answer_format_set(dataset=dataset, answer_format=str(request.POST.get("answer_format", "")))
    except DatasetEditError as exc:
        messages.error(request, _("%(error)s (nothing was changed)") % {"error": exc})
    else:
        messages.success(
            request,
            _("Answers are now shown as: %(format)s.") % {"format": dataset.get_answer_format_display()},
        )
    return HttpResponseRedirect(reverse("research-items", args=[dataset.pk]) + "#answer-format")


@dataclasses.dataclass(frozen=True)
class GoldCell:
    scale: Scale
    field_id: str
    value: str
    control: str  # "buttons", "select", "number" or "spans"
    no_error: bool = False  # a span aspect: the answer is expected to have no error


def _gold_grid(item: Item, expected: dict[str, dict[str, Any]]) -> list[tuple[str, list[GoldCell]]]:
    """Per system, one scale control per aspect, as the task form draws them; N/A is no expected value. A span
    aspect takes the errors expected, one a line, or "no error"."""
    rows = []
    aspects = selectors.dataset_aspects(item.dataset)
    texts = item_answer_texts(item)
    for s_index, system in enumerate(item_systems(item), start=1):
        cells = []
        for a_index, aspect in enumerate(aspects, start=1):
            scale = dataclasses.replace(aspect_scale(aspect, a_index), allows_missing=False)
            value = expected.get(system, {}).get(aspect.name)
            field_id = f"gold-{s_index}-{a_index}"
            if aspect.is_spans and texts:
                spans = value.get("spans") if isinstance(value, dict) else None
                lines = expected_span_lines(value, texts.get(system, ""))
                no_error = spans == []
                cells.append(GoldCell(scale=scale, field_id=field_id, value=lines, control="spans", no_error=no_error))
                continue
            number = float(value) if value is not None and is_json_number(value) else None
            token = "" if number is None else (str(int(number)) if number.is_integer() else str(value))
            control = "buttons" if scale.fits_button_row else "select" if scale.is_discrete else "number"
            cells.append(GoldCell(scale=scale, field_id=field_id, value=token, control=control))
        rows.append((system, cells))
    return rows


def _item_context(request: HttpRequest, item: Item, **extra: Any) -> dict[str, Any]:
    gold = gold_for_item(item)
    return {
        "dataset": item.dataset,
        "item": item,
        "turns": selectors.item_turns(item),
        "history": selectors.item_history(item),
        "gold": gold,
        "span_gold_answers": span_gold_answers(item),
        "item_ratings": item_rating_count(item),
        "gold_grid": _gold_grid(item, extra.pop("expected", None) or (gold.expected if gold else {})),
        "gold_form": extra.pop("gold_form", None)
        or GoldSettingsForm(
            initial={"kind": gold.kind, "tolerance": gold.tolerance, "instruction": gold.instruction} if gold else None
        ),
        **extra,
    }


@require_GET
@researcher_required
def item_page(request: HttpRequest, dataset_id: int, item_id: int) -> HttpResponse:
    item = selectors.item_for_researcher(request.user, dataset_id, item_id)
    return render(request, "research/item.html", _item_context(request, item))


def _expected_from_post(request: HttpRequest, item: Item) -> tuple[dict[str, dict[str, Any]], list[str]]:
    expected: dict[str, dict[str, Any]] = {}
    problems = []
    for system, cells in _gold_grid(item, {}):
        for cell in cells:
            aspect = cell.scale.aspect
            if cell.control == "spans":
                no_error = request.POST.get(f"{cell.field_id}-none") == "on"
                spans, bad_lines = parse_expected_span_lines(
                    request.POST.get(cell.field_id, ""), severities=aspect.scheme.severities
                )
                where = {"system": system, "aspect": aspect.display_label}
                problems += [f"{system}, {aspect.display_label}: {problem}" for problem in bad_lines]
                if spans and no_error:
                    problems.append(_("%(system)s, %(aspect)s: list the errors or expect none, not both") % where)
                elif spans or no_error:
                    expected.setdefault(system, {})[aspect.name] = {"spans": spans}
                continue
            text = request.POST.get(cell.field_id, "").strip()
            if not text:
                continue
            number = _number(text)
            if number is None:
                problems.append(
                    _("%(system)s, %(aspect)s: expected a number, found %(text)s")
                    % {"system": system, "aspect": aspect.display_label, "text": text}
                )
                continue
            expected.setdefault(system, {})[aspect.name] = int(number) if number.is_integer() else number
    return expected, problems


@require_POST
@researcher_required
def item_gold_set(request: HttpRequest, dataset_id: int, item_id: int) -> HttpResponse:
    item = selectors.item_for_researcher(request.user, dataset_id, item_id)
    form = GoldSettingsForm(request.POST)
    expected, problems = _expected_from_post(request, item)
    if form.is_valid() and not problems:
        if not expected:
            problems.append(_("Choose at least one expected value."))
        else:
            ratings = item_rating_count(item)
            try:
                gold_item_set(
                    item=item,
                    kind=form.cleaned_data["kind"],
                    expected=expected,
                    tolerance=form.cleaned_data["tolerance"],
                    instruction=form.cleaned_data["instruction"],
                    by=request.user,  # type: ignore[arg-type]
                )
            except GoldError as exc:
                problems.append(str(exc))
            else:
                messages.success(
                    request,
                    ngettext(
                        "The item is marked as gold. %(n)d rating of its answers no longer counts in the dataset's "
                        "statistics.",
                        "The item is marked as gold. %(n)d ratings of its answers no longer count in the dataset's "
                        "statistics.",
                        ratings,
                    )
                    % {"n": ratings},
                )
                return HttpResponseRedirect(reverse("research-item", args=[item.dataset_id, item.pk]) + "#gold")
    context = _item_context(request, item, gold_form=form, expected=expected, gold_problems=problems)
    return render(request, "research/item.html", context, status=400)


@require_POST
@researcher_required
def item_gold_remove(request: HttpRequest, dataset_id: int, item_id: int) -> HttpResponse:
    item = selectors.item_for_researcher(request.user, dataset_id, item_id)
    get_object_or_404(GoldItem, item=item)
    try:
        gold_item_remove(item=item, by=request.user)  # type: ignore[arg-type]
    except GoldError as exc:
        return render(request, "research/item.html", _item_context(request, item, gold_problems=[str(exc)]), status=400)
    ratings = item_rating_count(item)
    messages.success(
        request,
        ngettext(
            "The item is no longer gold. %(n)d rating of its answers counts in the dataset's statistics again.",
            "The item is no longer gold. %(n)d ratings of its answers count in the dataset's statistics again.",
            ratings,
        )
        % {"n": ratings},
    )
    return HttpResponseRedirect(reverse("research-item", args=[item.dataset_id, item.pk]) + "#gold")


# --- campaign settings --------------------------------------------------------------------------------------------

# What a campaign's settings page may change; the rest was fixed when its tasks and rater slots were built.
CAMPAIGN_EDITABLE = (
    "name", "is_active", "aspects", "guidelines", "show_reference", "show_context", "scale_dropdowns",
    "ask_preference", "rationale_required", "lease_minutes", "allow_revisit", "gold_rate", "opens_at", "closes_at",
    "annotators",
)  # fmt: skip


@require_http_methods(["GET", "POST"])
@researcher_required
def campaign_settings_page(request: HttpRequest, campaign_id: int) -> HttpResponse:
    """The settings the admin's campaign form may change, through the same form and service (campaign_update);
    the dataset and the task shape are shown fixed, with the reason."""
    from django import forms  # noqa: PLC0415 - the form class is built for this page only

    from annotations.admin.campaigns import CampaignForm  # noqa: PLC0415 - the admin's form, shared, not its admin

    campaign = get_object_or_404(selectors.researcher_campaigns(request.user), pk=campaign_id)
    form_class = forms.modelform_factory(
        Campaign,
        form=CampaignForm,
        fields=CAMPAIGN_EDITABLE,
        widgets={
            "aspects": forms.CheckboxSelectMultiple,
            "annotators": forms.CheckboxSelectMultiple,
            **{name: minute_input() for name in ("opens_at", "closes_at")},
        },
    )
    form = form_class(request.POST or None, instance=campaign, user=request.user)  # type: ignore[call-arg]
    form.fields["aspects"].queryset = campaign.dataset.aspects.order_by("position")  # type: ignore[attr-defined]
    if request.method == "POST" and form.is_valid():
        # The form's clean() stored the change through campaign_update, all or nothing.
        messages.success(request, _("Saved the settings of %(name)s.") % {"name": campaign.name})
        return HttpResponseRedirect(reverse("research-campaign-settings", args=[campaign.pk]))
    context = {
        "section": "campaign",
        "campaign": campaign,
        "form": form,
        "has_ratings": campaign.assignments.filter(submitted_at__isnull=False).exists(),
    }
    return render(request, "research/campaign_settings.html", context, status=400 if form.is_bound else 200)

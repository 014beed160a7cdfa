"""The judges area of the research area: researchers (staff) only, their own and shared datasets, configs and runs.
Reads go through the selectors; writes are POST only and go through `judging.services`, the same services as the
admin, the API and the `judge` command."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseStopPolling

from annotations.research.views import researcher_required
from annotations.selectors import dataset_for_user_or_404, datasets_for_user
from annotations.text.ascii_numbers import ascii_int
from judging import run_plans, services
from judging import selectors as run_selectors
from judging.admin import LaunchForm, run_live_context
from judging.admin_forms import preview_context
from judging.config import ConfigError, validate_config
from judging.models import JudgeRun
from judging.research import selectors
from judging.research.forms import TEMPLATE_LABELS, ResearchJudgeConfigForm, research_template


def _run_or_404(request: HttpRequest, run_id: int) -> JudgeRun:
    return run_selectors.judge_run_for_user_or_404(request.user, run_id)  # type: ignore[arg-type]


@require_GET
@researcher_required
def judges_home(request: HttpRequest) -> HttpResponse:
    context = {
        "section": "judges",
        "datasets": datasets_for_user(request.user).order_by("name", "pk"),
        "configs": run_selectors.judge_configs_for_user(request.user).order_by("name", "-version")[:50],  # type: ignore[arg-type]
        "templates": list(TEMPLATE_LABELS.items()),
    }
    return render(request, "research/judges/home.html", context)


def _config_initial(request: HttpRequest) -> dict[str, Any]:
    """?template=<key> fills the form from a template, ?config=<id> from a saved config (saving stores its next
    version), ?dataset=<id> picks the dataset whose aspects and items are offered."""
    initial: dict[str, Any] = {}
    key = request.GET.get("template", "")
    config_id = ascii_int(request.GET.get("config", ""))
    if key in TEMPLATE_LABELS:
        initial["config_json"] = json.dumps(research_template(key), indent=2, ensure_ascii=False)
    elif config_id is not None:
        row = run_selectors.judge_config_for_user_or_404(request.user, config_id)  # type: ignore[arg-type]
        initial["config_json"] = json.dumps(row.config, indent=2, ensure_ascii=False)
    else:
        initial["config_json"] = json.dumps(research_template("geval"), indent=2, ensure_ascii=False)
    dataset_id = ascii_int(request.GET.get("dataset", ""))
    if dataset_id is not None:
        initial["dataset"] = dataset_id
    return initial


def _shown_config(form: ResearchJudgeConfigForm) -> dict[str, Any] | None:
    raw = form.data.get("config_json") if form.is_bound else form.initial.get("config_json")
    try:
        value = json.loads(raw or "")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


@require_http_methods(["GET", "POST"])
@researcher_required
def config_new(request: HttpRequest) -> HttpResponse:
    """GET shows the form; POST validates the JSON view and saves it as a config (or a config's next version)."""
    if request.method == "POST":
        form = ResearchJudgeConfigForm(request.POST, user=request.user)
    else:
        form = ResearchJudgeConfigForm(initial=_config_initial(request), user=request.user)
    if request.method == "POST" and form.is_valid():
        cfg = form.cleaned_data["config_json"]
        try:
            created = services.judge_config_create(raw=cfg.stored(), owner=request.user)  # type: ignore[arg-type]
        except ConfigError as exc:
            form.add_error("config_json", exc.errors)
        else:
            messages.success(request, _("Saved the judge config %(config)s.") % {"config": created})
            dataset = form.cleaned_data.get("dataset")
            if dataset is not None:
                url = reverse("research-judge-launch", args=[dataset.pk])
                return HttpResponseRedirect(f"{url}?config={created.pk}")
            return HttpResponseRedirect(reverse("research-judges"))
    context = {
        "section": "judges",
        "form": form,
        "templates": list(TEMPLATE_LABELS.items()),
        "providers": selectors.provider_statuses(_shown_config(form)),
        "allowlist": selectors.api_base_allowlist(),
    }
    return render(request, "research/judges/config.html", context, status=400 if form.is_bound else 200)


@require_POST
@researcher_required
def config_preview(request: HttpRequest) -> HttpResponse:
    """The prompt a config would send for one item, before it is saved: a POST that writes nothing and sends
    nothing; the page's script swaps the part in, without it the whole page shows it."""
    context = {**preview_context(request.POST, user=request.user), "section": "judges"}
    if getattr(request, "htmx", False):
        return render(request, "admin/judging/judgeconfig/_preview.html", context)
    return render(request, "research/judges/preview.html", context)


@require_http_methods(["GET", "POST"])
@researcher_required
def launch(request: HttpRequest, dataset_id: int) -> HttpResponse:
    """GET chooses a config and a scope; POST "estimate" shows the calls and cost, "pilot" launches a few items
    first, "launch" the whole scope. A launch is enqueued when its transaction commits; a worker runs it."""
    dataset = dataset_for_user_or_404(request.user, dataset_id)
    initial = {"config": ascii_int(request.GET.get("config", ""))}
    form = LaunchForm(request.POST or None, initial=initial, request=request, dataset=dataset)
    estimate = None
    error = ""
    action = request.POST.get("action", "estimate")
    if request.method == "POST" and form.is_valid():
        chosen = form.launch_arguments()
        try:
            if action == "pilot":
                cfg = validate_config(chosen["config"].config)
                chosen["limit"] = run_plans.pilot_limit(dataset=dataset, cfg=cfg, campaign=chosen["campaign"])
                chosen["name"] = chosen["name"] or services.free_run_name(
                    dataset, _("%(name)s pilot") % {"name": cfg.name}
                )
            if action in ("pilot", "launch"):
                run = services.judge_run_launch(
                    launched_by=request.user,  # type: ignore[arg-type]
                    **chosen,
                )
                messages.success(
                    request,
                    _("Launched the judge run %(name)s (%(units)s units).") % {"name": run.name, "units": run.total},
                )
                if run.start_unsent_at is not None:
                    messages.warning(request, services.start_unsent_message(run))
                return HttpResponseRedirect(reverse("research-judge-run", args=[run.pk]))
            estimate = form.estimate(request.user)  # type: ignore[arg-type]
        except (ConfigError, services.LaunchError) as exc:
            error = str(exc)
    context = {
        "section": "judges",
        "dataset": dataset,
        "form": form,
        "estimate": estimate,
        "error": error,
        "pilot_units": run_plans.PILOT_UNITS,
    }
    status = 400 if request.method == "POST" and (error or not form.is_valid()) else 200
    return render(request, "research/judges/launch.html", context, status=status)


@require_GET
@researcher_required
def runs(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = dataset_for_user_or_404(request.user, dataset_id)
    context = {"section": "judges", "dataset": dataset, "runs": selectors.runs_of_dataset(dataset)}
    return render(request, "research/judges/runs.html", context)


def _live_context(run: JudgeRun) -> dict[str, Any]:
    return {**run_live_context(run), "in_research": True}


@require_GET
@researcher_required
def run_page(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _run_or_404(request, run_id)
    context = {
        "section": "judges",
        **_live_context(run),
        "config_json": json.dumps(run.config_snapshot, indent=2, ensure_ascii=False),
    }
    return render(request, "research/judges/run.html", context)


@require_GET
@researcher_required
def run_progress(request: HttpRequest, run_id: int) -> HttpResponse:
    context = _live_context(_run_or_404(request, run_id))
    response = render(request, "judging/admin/_progress.html", context)
    if not context["progress"].is_active and getattr(request, "htmx", False):
        # 286 tells htmx to stop polling; the final state is still swapped in.
        return HttpResponseStopPolling(response.content)
    return response


@require_POST
@researcher_required
def run_cancel(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _run_or_404(request, run_id)
    if services.judge_run_cancel(run=run):
        messages.success(request, _("Stopped: no new calls are sent; calls in flight are recorded."))
    else:
        messages.warning(request, _("The run had already ended."))
    return HttpResponseRedirect(reverse("research-judge-run", args=[run.pk]))


@require_POST
@researcher_required
def run_retry(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _run_or_404(request, run_id)
    try:
        count = services.judge_run_retry_failed(run=run)
    except services.LaunchError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request, _("Sending %(count)s failed unit(s) again (and any left pending).") % {"count": count}
        )
    return HttpResponseRedirect(reverse("research-judge-run", args=[run.pk]))

"""Admin for judge configs and runs, and the launcher behind the datasets' "Launch judge run…" action.

Researchers (staff) see configs and runs through the same scoped selectors as the API; every
custom view re-checks the object through them, so a URL with a foreign id is a 404.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseStopPolling

from annotations.admin.bases import UserFormAdmin, WholeObjectDeleteAdmin
from annotations.models import Campaign, Dataset
from annotations.selectors import datasets_for_user
from annotations.text.ascii_numbers import ascii_int
from judging import selectors

# FActScore (knowledge corpora, fact review campaigns, fact answers) keeps its admin in its own package, registered
# as this import runs; its staff-only rights are the judge admin's too.
from judging.factscore.admin import StaffAdmin
from judging.llm.calls import CONNECTION_KEYS
from judging.models import JudgeConfig, JudgeRun

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from judging.admin_forms import JudgeConfigForm
    from judging.run_plans import Estimate

# The judge config form (pydantic, through the config type) and the services (the engine) are imported where a page
# uses them: registering the admin happens in every process at django.setup(), most of which never show these pages.


def _staff(request: HttpRequest) -> bool:
    return bool(request.user.is_active and request.user.is_staff)


@admin.register(JudgeConfig)
class JudgeConfigAdmin(UserFormAdmin, StaffAdmin):
    # Staff may change a config: saving an edited one stores a new version; the old one stays for the runs that used it.
    change_form_template = "admin/judging/judgeconfig/change_form.html"
    list_display = ("name", "version", "method", "judge_model", "owner", "created_at")
    search_fields = ("name",)
    fieldsets = (
        (_("Start"), {"fields": ("template", "name", "method", "dataset")}),
        (
            _("Model and provider"),
            {"fields": ("model", *CONNECTION_KEYS)},
        ),
        (_("What is judged"), {"fields": ("aspects", "prompt", "language", "summarizer_model", "summarizer_prompt")}),
        (
            _("Reading the score"),
            {
                "fields": (
                    "output_format",
                    "output_regex",
                    "samples",
                    "temperature",
                    "max_tokens",
                    "logprobs",
                    "top_logprobs",
                    "logprob_scoring",
                    "fallback_samples",
                    "fallback_temperature",
                    "parse_retries",
                )
            },
        ),
        (_("Metric and pairwise"), {"fields": ("metric", "tokenize", "pairs", "baseline")}),
        (
            _("Limits"),
            {"fields": ("max_concurrency", "rpm", "tpm", "timeout_s", "max_retries", "budget_usd", "cache")},
        ),
        (_("JSON view"), {"fields": ("config_json",)}),
        (_("Preview"), {"fields": ("preview_item",)}),
    )

    @property
    def form(self) -> type[JudgeConfigForm]:  # type: ignore[override]
        from judging.admin_forms import JudgeConfigForm  # noqa: PLC0415 - see the imports

        return JudgeConfigForm

    @admin.display(description="method")
    def method(self, obj: JudgeConfig) -> str:
        return obj.judge_settings.method

    @admin.display(description="model")
    def judge_model(self, obj: JudgeConfig) -> str:
        return obj.judge_settings.model or obj.judge_settings.metric or ""

    def get_queryset(self, request: HttpRequest) -> QuerySet[JudgeConfig]:
        return selectors.judge_configs_for_user(request.user)

    def save_model(self, request: HttpRequest, obj: JudgeConfig, form: Any, change: bool) -> None:
        from judging import services  # noqa: PLC0415 - see the imports

        created = services.judge_config_create(raw=form.cleaned_data["config_json"].stored(), owner=request.user)  # type: ignore[arg-type]
        obj.pk, obj.name, obj.version, obj.config = created.pk, created.name, created.version, created.config
        obj._state.adding = False
        if change:
            messages.info(request, f"Saved as {created}; runs launched with earlier versions keep their snapshot.")

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        # The template links work without the script: ?template=<method> opens the form filled from it.
        from judging.admin_forms import METHOD_LABELS, config_template  # noqa: PLC0415 - see the imports

        initial: dict[str, Any] = {}
        method = request.GET.get("template", "")
        if method in METHOD_LABELS:
            initial["template"] = method
            initial["config_json"] = json.dumps(config_template(method), indent=2, ensure_ascii=False)
        dataset_pk = ascii_int(request.GET.get("dataset", ""))
        if dataset_pk is not None:
            initial["dataset"] = dataset_pk
        return initial

    def render_change_form(self, request: HttpRequest, context: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        from judging.admin_forms import METHOD_LABELS  # noqa: PLC0415 - see the imports

        context["template_links"] = list(METHOD_LABELS.items())
        context["preview_url"] = reverse("admin:judging_judgeconfig_preview")
        return super().render_change_form(request, context, *args, **kwargs)

    def get_urls(self) -> list:
        return [
            path("preview/", self.admin_site.admin_view(self.preview_view), name="judging_judgeconfig_preview"),
            *super().get_urls(),
        ]

    def preview_view(self, request: HttpRequest) -> HttpResponse:
        """The prompt a config would send for one item, before it is saved: a POST that writes nothing."""
        if not _staff(request):
            raise PermissionDenied
        if request.method == "GET":
            return HttpResponseRedirect(reverse("admin:judging_judgeconfig_add"))
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        from judging.admin_forms import preview_context  # noqa: PLC0415 - see the imports

        context = preview_context(request.POST, user=request.user)
        if getattr(request, "htmx", False):
            return TemplateResponse(request, "admin/judging/judgeconfig/_preview.html", context)
        context.update(self.admin_site.each_context(request), opts=JudgeConfig._meta, title=_("Prompt preview"))
        return TemplateResponse(request, "admin/judging/judgeconfig/preview.html", context)


class LaunchForm(forms.Form):
    config = forms.ModelChoiceField(
        queryset=JudgeConfig.objects.none(), label=_("Config"), help_text=_("Latest versions first.")
    )
    campaign = forms.ModelChoiceField(
        queryset=Campaign.objects.none(), required=False, empty_label=_("Whole dataset"), label=_("Scope")
    )
    limit = forms.IntegerField(
        required=False, min_value=1, label=_("Limit"), help_text=_("Judge at most this many answers.")
    )
    name = forms.CharField(
        required=False,
        max_length=200,
        label=_("Name"),
        help_text=_("Run name; default: the config's name, with a suffix for repeats."),
    )

    def __init__(self, *args: Any, request: HttpRequest, dataset: Dataset, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.dataset = dataset
        config_field = self.fields["config"]
        campaign_field = self.fields["campaign"]
        assert isinstance(config_field, forms.ModelChoiceField) and isinstance(campaign_field, forms.ModelChoiceField)
        config_field.queryset = selectors.judge_configs_for_user(request.user).order_by("name", "-version")
        campaign_field.queryset = selectors.campaigns_of_dataset(dataset.pk)

    def launch_arguments(self) -> dict[str, Any]:
        """The valid form's choice as `judge_run_launch` takes it (no name: the config's, made unique)."""
        data = self.cleaned_data
        return {
            "dataset": self.dataset,
            "config": data["config"],
            "campaign": data["campaign"],
            "limit": data["limit"],
            "name": data["name"] or None,
        }

    def estimate(self, launched_by: User) -> Estimate:
        """What launching the valid form's choice would cost; ConfigError or LaunchError when it cannot be launched."""
        from judging import run_plans  # noqa: PLC0415 - see the imports
        from judging.config import validate_config  # noqa: PLC0415 - see the imports

        data = self.cleaned_data
        return run_plans.estimate_run(
            dataset=self.dataset,
            cfg=validate_config(data["config"].config),
            campaign=data["campaign"],
            limit=data["limit"],
            launched_by=launched_by,
        )


@admin.register(JudgeRun)
class JudgeRunAdmin(WholeObjectDeleteAdmin, StaffAdmin):
    list_display = (
        "__str__",
        "dataset",
        "method",
        "status",
        "done",
        "failed",
        "parse_errors",
        "sampled_fallbacks",
        "total",
        "created_at",
    )
    list_filter = ("status", "method")
    search_fields = ("judge__name", "dataset__name")

    def get_queryset(self, request: HttpRequest) -> QuerySet[JudgeRun]:
        return selectors.judge_runs_for_user(request.user)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # runs are launched from a dataset, the command line or the API

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_urls(self) -> list:
        return [
            path(
                "<int:pk>/progress/", self.admin_site.admin_view(self.progress_view), name="judging_judgerun_progress"
            ),
            path("<int:pk>/cancel/", self.admin_site.admin_view(self.cancel_view), name="judging_judgerun_cancel"),
            # The datasets' "Launch judge run…" action (annotations.admin.datasets) links here by this URL name.
            path("launch/<int:pk>/", self.admin_site.admin_view(self.launch_view), name="judging_dataset_launch"),
            path(
                "<int:pk>/retry-failed/",
                self.admin_site.admin_view(self.retry_view),
                name="judging_judgerun_retry_failed",
            ),
            *super().get_urls(),
        ]

    def _run(self, request: HttpRequest, pk: Any) -> JudgeRun:
        if not _staff(request):
            raise PermissionDenied
        try:
            return selectors.judge_run_for_user_or_404(request.user, int(pk))
        except (TypeError, ValueError):
            raise Http404("no such run") from None

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if request.method != "GET":
            return HttpResponse(status=405)
        run = self._run(request, object_id)
        context = {
            **self.admin_site.each_context(request),
            "opts": JudgeRun._meta,
            "title": _("Judge run %(name)s") % {"name": run.name},
            **run_live_context(run),
            "config_json": json.dumps(run.config_snapshot, indent=2, ensure_ascii=False),
        }
        return TemplateResponse(request, "judging/admin/run.html", context)

    def progress_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        return _progress(request, self._run(request, pk))

    def cancel_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        return _cancel(request, self._run(request, pk))

    def retry_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        return _retry(request, self._run(request, pk))

    def launch_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        if request.method not in ("GET", "POST"):
            return HttpResponse(status=405)
        if not _staff(request):
            raise PermissionDenied
        dataset = datasets_for_user(request.user).filter(pk=pk).first()
        if dataset is None:
            raise Http404("no such dataset")
        from judging import services  # noqa: PLC0415 - see the imports
        from judging.config import ConfigError  # noqa: PLC0415 - see the imports

        form = LaunchForm(request.POST or None, request=request, dataset=dataset)
        estimate = None
        error = ""
        if request.method == "POST" and form.is_valid():
            try:
                if request.POST.get("confirm") == "yes":
                    run = services.judge_run_launch(
                        launched_by=request.user,  # type: ignore[arg-type]
                        **form.launch_arguments(),
                    )
                    messages.success(request, f"Launched judge run “{run.name}” ({run.total} units).")
                    if run.start_unsent_at is not None:
                        messages.warning(request, services.start_unsent_message(run))
                    return HttpResponseRedirect(reverse("admin:judging_judgerun_change", args=[run.pk]))
                estimate = form.estimate(request.user)  # type: ignore[arg-type]
            except (ConfigError, services.LaunchError) as exc:
                error = str(exc)
        context = {
            **self.admin_site.each_context(request),
            "opts": Dataset._meta,
            "title": _("Launch a judge run on %(dataset)s") % {"dataset": dataset.name},
            "dataset": dataset,
            "form": form,
            "estimate": estimate,
            "error": error,
        }
        return TemplateResponse(request, "judging/admin/launch.html", context)


def run_live_context(run: JudgeRun) -> dict[str, Any]:
    """What the polled part of the run page shows: the page and the poll render the same partial from it."""
    return {
        "run": run,
        "progress": selectors.judge_run_progress(run),
        "recent_errors": selectors.latest_errors_of_run(run),
    }


@require_GET
def _progress(request: HttpRequest, run: JudgeRun) -> HttpResponse:
    context = run_live_context(run)
    response = TemplateResponse(request, "judging/admin/_progress.html", context)
    if not context["progress"].is_active and getattr(request, "htmx", False):
        # 286 tells htmx to stop polling; the final state is still swapped in.
        stop = HttpResponseStopPolling(response.rendered_content)
        return stop
    return response


@require_POST
def _cancel(request: HttpRequest, run: JudgeRun) -> HttpResponse:
    from judging import services  # noqa: PLC0415 - see the imports

    if services.judge_run_cancel(run=run):
        messages.success(request, "Cancelled: no new calls are sent; calls in flight are recorded.")
    else:
        messages.warning(request, "The run had already ended.")
    return HttpResponseRedirect(reverse("admin:judging_judgerun_change", args=[run.pk]))


@require_POST
def _retry(request: HttpRequest, run: JudgeRun) -> HttpResponse:
    from judging import services  # noqa: PLC0415 - see the imports

    try:
        count = services.judge_run_retry_failed(run=run)
    except services.LaunchError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Sending {count} failed unit(s) again (and any left pending).")
    return HttpResponseRedirect(reverse("admin:judging_judgerun_change", args=[run.pk]))

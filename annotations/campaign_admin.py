"""Admin for annotation campaigns, scoped to the researcher's datasets like the rest of the annotations admin."""

import secrets
from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from annotations.campaign_services import (
    CampaignError,
    campaign_leases_release_outside_pool,
    campaign_tasks_build,
)
from annotations.models import Aspect, Campaign, Skip
from annotations.selectors import datasets_for_user


class CampaignForm(forms.ModelForm):
    class Meta:
        model = Campaign
        fields = (
            "name", "dataset", "is_active", "raters_per_item", "candidates_per_task", "aspects", "guidelines",
            "show_reference", "show_context", "ask_preference", "rationale_required", "lease_minutes", "annotators",
        )  # fmt: skip

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "aspects" in self.fields:
            self.fields["aspects"].required = False
            self.fields["aspects"].help_text = "Leave empty to show every aspect of the dataset."

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        dataset = data.get("dataset") or getattr(self.instance, "dataset", None)
        aspects = data.get("aspects")
        if dataset is not None and aspects is not None:
            foreign = [a.name for a in aspects if a.dataset_id != dataset.pk]
            if foreign:
                self.add_error("aspects", f"not aspects of {dataset.name}: {', '.join(foreign)}")
        return data


@admin.register(Campaign)
class CampaignAdmin(admin.ModelAdmin):
    form = CampaignForm
    list_display = ("name", "dataset", "raters_per_item", "candidates_per_task", "is_active", "progress_link")
    # RelatedOnly: the plain filter lists every dataset in the database, other researchers' included.
    list_filter = ("is_active", ("dataset", admin.RelatedOnlyFieldListFilter))
    search_fields = ("name",)
    filter_horizontal = ("aspects", "annotators")
    readonly_fields = ("created_by", "created_at")
    fieldsets = (
        (None, {"fields": ("name", "dataset", "is_active", "raters_per_item", "candidates_per_task")}),
        ("What annotators see", {"fields": ("aspects", "guidelines", "show_reference", "show_context")}),
        ("Questions", {"fields": ("ask_preference", "rationale_required", "lease_minutes")}),
        ("Annotator pool", {"fields": ("annotators",)}),
        ("Record", {"fields": ("created_by", "created_at")}),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).filter(dataset__in=datasets_for_user(request.user))

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        # Tasks and rater slots are built from these at creation; changing them later would break the N-slot rule.
        fixed = ("dataset", "raters_per_item", "candidates_per_task") if obj is not None else ()
        return (*self.readonly_fields, *fixed)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "dataset":
            kwargs["queryset"] = datasets_for_user(request.user)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_manytomany(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "aspects":
            kwargs["queryset"] = Aspect.objects.filter(dataset__in=datasets_for_user(request.user)).select_related(
                "dataset"
            )
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    @admin.display(description="progress")
    def progress_link(self, obj: Campaign) -> str:
        return format_html('<a href="{}">progress</a>', reverse("campaign-progress", args=[obj.pk]))

    def save_model(self, request: HttpRequest, obj: Campaign, form: Any, change: bool) -> None:
        if not change:
            obj.shuffle_seed = secrets.token_hex(16)
            obj.created_by = request.user  # type: ignore[assignment]
        super().save_model(request, obj, form, change)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        campaign: Campaign = form.instance
        if not campaign.aspects.exists():
            campaign.aspects.set(campaign.dataset.aspects.all())
        if not campaign.tasks.exists():
            try:
                built = campaign_tasks_build(campaign=campaign)
            except CampaignError as exc:
                self.message_user(request, str(exc), level="error")
            else:
                self.message_user(request, f"Built {built} tasks with {campaign.raters_per_item} rater slots each.")
        # Someone taken out of the pool loses their open task at once.
        campaign_leases_release_outside_pool(campaign=campaign)


@admin.register(Skip)
class SkipAdmin(admin.ModelAdmin):
    list_display = ("task", "annotator", "reason", "created_at")
    list_filter = ("reason",)
    readonly_fields = ("task", "annotator", "reason", "note", "created_at")

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).filter(task__campaign__dataset__in=datasets_for_user(request.user))

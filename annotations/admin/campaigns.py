"""Admin for annotation campaigns, scoped to the researcher's datasets like the rest of the annotations admin."""

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from annotations.admin.bases import ReadOnlyRowsAdmin, ScopedChoicesAdmin, UserFormAdmin, WholeObjectDeleteAdmin
from annotations.campaigns.settings import SETTING_NAMES
from annotations.models import Aspect, Campaign, Skip
from annotations.selectors import annotator_accounts, datasets_for_user


# What the form may change after creation; dataset, N and K are fixed once the tasks exist.
class CampaignForm(forms.ModelForm):
    class Meta:
        model = Campaign
        fields = (
            "name", "dataset", "is_active", "raters_per_item", "candidates_per_task", "aspects", "guidelines",
            "show_reference", "show_context", "ask_preference", "rationale_required", "lease_minutes", "annotators",
            "scale_dropdowns", "allow_revisit", "gold_rate", "opens_at", "closes_at",
        )  # fmt: skip
        # The form's words live here, not on the model, so they follow the reader's language without a migration.
        labels = {
            "name": _("Name"),
            "dataset": _("Dataset"),
            "is_active": _("Open to annotators"),
            "raters_per_item": _("Raters per item"),
            "candidates_per_task": _("Candidates per task"),
            "aspects": _("Aspects"),
            "guidelines": _("Guidelines"),
            "show_reference": _("Show the reference answer"),
            "show_context": _("Show the conversation context"),
            "ask_preference": _("Ask for a preference"),
            "rationale_required": _("Require a reason"),
            "lease_minutes": _("Lease minutes"),
            "annotators": _("Annotators"),
            "scale_dropdowns": _("Scales as drop-downs"),
            "allow_revisit": _("Allow revisit"),
            "gold_rate": _("Gold rate"),
            "opens_at": _("Opens at (UTC)"),
            "closes_at": _("Closes at (UTC)"),
        }
        help_texts = {
            "candidates_per_task": _("Answers per task; empty means all answers of a turn."),
            "guidelines": _("Markdown; raw HTML is not rendered."),
            "scale_dropdowns": _(
                "Show every scale as a drop-down. Otherwise a scale of at most 7 values is a row of buttons."
            ),
            "allow_revisit": _(
                "Annotators may reopen and correct the tasks they submitted while the campaign is open."
            ),
            "gold_rate": _("Share of each annotator's tasks drawn from gold items and attention checks (0 to 0.5)."),
            "opens_at": _("No task is handed out before this moment. Empty: open now."),
            "closes_at": _(
                "No new task is handed out from this moment; a task already started may still be submitted until "
                "its time runs out. Empty: no closing time."
            ),
        }

    def __init__(self, *args: Any, user: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        if "aspects" in self.fields:
            self.fields["aspects"].required = False
            self.fields["aspects"].help_text = _("Leave empty to show every aspect of the dataset.")
        if "gold_rate" in self.fields:
            # Optional in a post: a form or script that leaves it out keeps the campaign's rate.
            self.fields["gold_rate"].required = False
        if "annotators" in self.fields:
            pool = self.instance.annotators.values_list("pk", flat=True) if self.instance.pk else []
            self.fields["annotators"].queryset = annotator_accounts(user, keep=pool)  # type: ignore[attr-defined]

    def _post_clean(self) -> None:
        # Once the service refused, the model's own validation would only repeat the refusal in database words
        # ("Constraint … is violated") next to the service's sentence.
        if self.errors:
            return
        super()._post_clean()  # type: ignore[misc]  # a ModelForm hook the stubs leave out

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        dataset = data.get("dataset") or getattr(self.instance, "dataset", None)
        aspects = data.get("aspects")
        if dataset is not None and aspects is not None:
            foreign = [a.name for a in aspects if a.dataset_id != dataset.pk]
            if foreign:
                self.add_error(
                    "aspects",
                    _("not aspects of %(dataset)s: %(names)s") % {"dataset": dataset.name, "names": ", ".join(foreign)},
                )
        if self.errors:
            return data
        # Imported on use: registering the admin happens in every process at django.setup().
        from annotations.campaigns.errors import CampaignError  # noqa: PLC0415
        from annotations.campaigns.setup import campaign_create, campaign_update  # noqa: PLC0415

        # The service checks and writes in one step, so a refusal becomes a form error, never a half-built campaign.
        settings = {key: data[key] for key in SETTING_NAMES if key in data}
        if settings.get("gold_rate") is None:
            settings["gold_rate"] = self.instance.gold_rate if self.instance.pk else 0
        try:
            if self.instance.pk is None:
                self.instance = campaign_create(
                    name=data["name"],
                    dataset=data["dataset"],
                    raters_per_item=data["raters_per_item"],
                    candidates_per_task=data.get("candidates_per_task"),
                    annotators=list(data.get("annotators") or []),
                    aspects=list(aspects) if aspects else None,
                    created_by=self.user,
                    **settings,
                )
            else:
                campaign_update(
                    campaign=self.instance,
                    name=data["name"],
                    annotators=list(data.get("annotators") or []),
                    aspects=list(aspects) if aspects else None,
                    **settings,
                )
        except CampaignError as exc:
            raise forms.ValidationError(str(exc)) from None
        return data


def _aspects_for_user(user: Any) -> QuerySet:
    return Aspect.objects.filter(dataset__in=datasets_for_user(user)).select_related("dataset")


@admin.register(Campaign)
class CampaignAdmin(UserFormAdmin, ScopedChoicesAdmin, WholeObjectDeleteAdmin):
    form = CampaignForm
    scoped_choices = {"dataset": datasets_for_user, "aspects": _aspects_for_user}
    list_display = ("name", "dataset", "raters_per_item", "candidates_per_task", "is_active", "progress_link")
    # RelatedOnly: the plain filter lists every dataset in the database, other researchers' included.
    list_filter = ("is_active", ("dataset", admin.RelatedOnlyFieldListFilter))
    search_fields = ("name",)
    filter_horizontal = ("aspects", "annotators")
    readonly_fields = ("created_by", "created_at")
    fieldsets = (
        (None, {"fields": ("name", "dataset", "is_active", "raters_per_item", "candidates_per_task")}),
        (
            _("What annotators see"),
            {"fields": ("aspects", "guidelines", "show_reference", "show_context", "scale_dropdowns")},
        ),
        (_("Questions"), {"fields": ("ask_preference", "rationale_required", "lease_minutes", "allow_revisit")}),
        (_("Deadlines"), {"fields": ("opens_at", "closes_at")}),
        (_("Gold items and attention checks"), {"fields": ("gold_rate",)}),
        (_("Annotator pool"), {"fields": ("annotators",)}),
        (_("Record"), {"fields": ("created_by", "created_at")}),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).filter(dataset__in=datasets_for_user(request.user))

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        # Tasks and rater slots are built from these at creation; changing them later would break the N-slot rule.
        fixed = ("dataset", "raters_per_item", "candidates_per_task") if obj is not None else ()
        return (*self.readonly_fields, *fixed)

    @admin.display(description=_("progress"))
    def progress_link(self, obj: Campaign) -> str:
        return format_html('<a href="{}">{}</a>', reverse("campaign-progress", args=[obj.pk]), _("progress"))

    def save_model(self, request: HttpRequest, obj: Campaign, form: Any, change: bool) -> None:
        # The form's clean() already stored the campaign through the service.
        return

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        # The service set the aspects and the pool (and released the leases of those who left it).
        if not change:
            built = form.instance.tasks.count()
            self.message_user(request, f"Built {built} tasks with {form.instance.raters_per_item} rater slots each.")


# An annotator's own record: deleting it would hand them the task they declined again.
@admin.register(Skip)
class SkipAdmin(ReadOnlyRowsAdmin):
    list_display = ("task", "annotator", "reason", "created_at")
    list_filter = ("reason",)
    readonly_fields = ("task", "annotator", "reason", "note", "created_at")

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).filter(task__campaign__dataset__in=datasets_for_user(request.user))

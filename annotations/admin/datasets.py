import json
from collections.abc import Iterable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext_lazy as _

from annotations.admin.bases import ReadOnlyRowsAdmin, ScopedChoicesAdmin, WholeObjectDeleteAdmin
from annotations.admin.gold import gold_link
from annotations.datasets.editing import dataset_delete, dataset_update
from annotations.errors import DatasetEditError, DatasetImportError, RubricError
from annotations.forms import DatasetUploadForm
from annotations.models import Aspect, Dataset, Item, Rater, Rating, Response, System, Turn
from annotations.rubrics.specs import RUBRIC_MAX_BYTES, load_rubric_bytes
from annotations.selectors import datasets_for_user, researcher_accounts

# How each model reaches its dataset, for scoping foreign-key choices to the user's datasets.
_DATASET_PATHS: dict[type, str] = {
    System: "dataset",
    Item: "dataset",
    Aspect: "dataset",
    Rater: "dataset",
    Turn: "item__dataset",
    Response: "turn__item__dataset",
    Rating: "aspect__dataset",
}


def rows_for_user(model: type, user: Any) -> QuerySet | None:
    """The rows of `model` in the user's datasets, or None for models that belong to no dataset."""
    if model is Dataset:
        return datasets_for_user(user)
    path = _DATASET_PATHS.get(model)
    if path is None:
        return None
    return model._default_manager.filter(**{f"{path}__in": datasets_for_user(user)})  # type: ignore[attr-defined]


class OwnValuesFieldListFilter(admin.AllValuesFieldListFilter):
    """For a filter through a relation (system__key) Django lists the values of every row in the table, other
    researchers' included; this one offers only values of rows the user may see."""

    def __init__(
        self, field: Any, request: HttpRequest, params: Any, model: Any, model_admin: Any, field_path: str
    ) -> None:
        super().__init__(field, request, params, model, model_admin, field_path)
        self.lookup_choices = (
            model_admin.get_queryset(request).distinct().order_by(field_path).values_list(field_path, flat=True)
        )


class DatasetScopedAdmin(ReadOnlyRowsAdmin):
    """Researchers see only rows of datasets they own or share, in lists, searches and by id, and are offered
    only those rows in foreign-key fields (Django offers every row of the table otherwise).

    The rows are read-only: they come from an import that checked every range, missing code and rater against
    the rubric, and ratings made here come from campaigns that check them the same way. A hand edit would bypass
    all of it (a raw 99 on a 0-3 scale, a rater of another dataset) and silently change every statistic."""

    dataset_path = "dataset"

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        queryset = super().get_queryset(request)
        return queryset.filter(**{f"{self.dataset_path}__in": datasets_for_user(request.user)})

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        scoped = rows_for_user(db_field.related_model, request.user)
        if scoped is not None:
            kwargs["queryset"] = scoped
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class DatasetForm(forms.ModelForm):
    class Meta:
        model = Dataset
        fields = ("name", "owner", "members")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.errors:
            return data
        if self.instance.pk is None:
            raise forms.ValidationError("a dataset is added by importing a file")
        # The service checks and writes in one step, so a refusal becomes a form error.
        owner = data["owner"] if "owner" in self.fields else self.instance.owner
        members = data["members"] if "members" in self.fields else self.instance.members.all()
        try:
            dataset_update(dataset=self.instance, name=data["name"], owner=owner, members=list(members))
        except DatasetEditError as exc:
            raise forms.ValidationError(str(exc)) from None
        return data


@admin.register(Dataset)
class DatasetAdmin(ScopedChoicesAdmin, WholeObjectDeleteAdmin):
    """A dataset is added only by importing a file; its owner may rename it, share it and delete it whole."""

    form = DatasetForm
    scoped_choices = {"owner": researcher_accounts, "members": researcher_accounts}
    list_display = ("name", "owner", "created_at")
    search_fields = ("name",)
    readonly_fields = ("notice", "created_at", "rubric_aspects")
    filter_horizontal = ("members",)
    change_list_template = "admin/annotations/dataset/change_list.html"
    actions = ["launch_judge_run"]

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return datasets_for_user(request.user)

    # The rubric as imported, shown and never edited: every rating was checked against these ranges and missing
    # codes, so changing one would leave stored ratings outside their scale. A display rather than a view-only
    # inline, so a change form carries no formset whose refusal could come after the service has written.
    @admin.display(description="rubric")
    def rubric_aspects(self, obj: Dataset) -> str:
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{} to {}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (a.name, a.label, a.min_value, a.max_value, a.ideal, a.level, json.dumps(a.missing))
                for a in obj.aspects.order_by("position", "pk")
            ),
        )
        return format_html(
            "<table><thead><tr><th>aspect</th><th>label</th><th>range</th><th>ideal</th><th>level</th>"
            "<th>missing codes</th></tr></thead><tbody>{}</tbody></table>",
            rows,
        )

    def _owns(self, request: HttpRequest, obj: Dataset | None) -> bool:
        return obj is None or request.user.is_superuser or obj.owner_id == request.user.pk

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Researchers it is shared with read it; only its owner renames or re-shares it.
        return super().has_change_permission(request, obj) and self._owns(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_delete_permission(request, obj) and self._owns(request, obj)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        # Handing a dataset to someone else is an operator's act: the owner would lose it.
        fixed = () if request.user.is_superuser else ("owner",)
        return (*self.readonly_fields, *fixed)

    def add_view(
        self, request: HttpRequest, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        # An empty dataset without a rubric would be one the importer never makes.
        return HttpResponseRedirect(reverse("admin:annotations_dataset_import"))

    def save_model(self, request: HttpRequest, obj: Dataset, form: Any, change: bool) -> None:
        # The form's clean() already stored the change through the service.
        return

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        return

    def delete_model(self, request: HttpRequest, obj: Dataset) -> None:
        dataset_delete(dataset=obj)

    def delete_queryset(self, request: HttpRequest, queryset: Iterable[Dataset]) -> None:
        for dataset in queryset:
            dataset_delete(dataset=dataset)

    # The launcher belongs to the judging admin; the domain app only knows its URL name, not its code.
    @admin.action(description="Launch judge run…", permissions=["view"])
    def launch_judge_run(self, request: HttpRequest, queryset: QuerySet[Dataset]) -> HttpResponse | None:
        datasets = list(queryset[:2])
        if len(datasets) != 1:
            self.message_user(request, "Select exactly one dataset to judge.", level=messages.WARNING)
            return None
        return HttpResponseRedirect(reverse("admin:judging_dataset_launch", args=[datasets[0].pk]))

    def get_urls(self) -> list:
        return [
            path("import/", self.admin_site.admin_view(self.import_view), name="annotations_dataset_import"),
            *super().get_urls(),
        ]

    def import_view(self, request: HttpRequest) -> HttpResponse:
        if request.method not in ("GET", "POST"):
            return HttpResponseNotAllowed(["GET", "POST"])
        if not self.has_add_permission(request):
            return HttpResponse(status=403)
        form = DatasetUploadForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            # Imported on use: registering the admin happens in every process at django.setup().
            from annotations.datasets.importing import dataset_import  # noqa: PLC0415

            try:
                rubric = None
                if form.cleaned_data.get("rubric"):
                    rubric = load_rubric_bytes(form.cleaned_data["rubric"].read(RUBRIC_MAX_BYTES + 1))
                result = dataset_import(
                    stream=form.cleaned_data["file"],
                    name=form.cleaned_data["name"],
                    rubric=rubric,
                    preset=form.cleaned_data.get("preset") or None,
                    owner=request.user,  # type: ignore[arg-type]
                )
            except (DatasetImportError, RubricError) as exc:
                form.add_error(None, f"{exc} (nothing was imported)")
            else:
                messages.success(
                    request, f"Imported {result.items} items, {result.responses} answers, {result.ratings} ratings."
                )
                if result.notice:
                    messages.warning(request, result.notice)
                return HttpResponseRedirect(reverse("admin:annotations_dataset_change", args=[result.dataset.pk]))
        context = {
            **self.admin_site.each_context(request),
            "form": form,
            "opts": self.model._meta,
            "title": _("Import a JSONL dataset"),
        }
        # A POST that gets here failed (success redirects): 400 tells clients and tests so, never a 200 or a 500.
        status = 400 if request.method == "POST" else 200
        return TemplateResponse(request, "admin/annotations/dataset/import.html", context, status=status)


@admin.register(System)
class SystemAdmin(DatasetScopedAdmin):
    list_display = ("key", "model_name", "dataset")
    list_filter = (("dataset", admin.RelatedOnlyFieldListFilter),)
    search_fields = ("key", "model_name")


@admin.register(Item)
class ItemAdmin(DatasetScopedAdmin):
    list_display = ("external_id", "dataset", "position", "gold")
    list_filter = (("dataset", admin.RelatedOnlyFieldListFilter),)
    search_fields = ("external_id", "turns__prompt")
    readonly_fields = ("source", "gold")

    @admin.display(description=_("gold"))
    def gold(self, obj: Item) -> str:
        return gold_link(obj)


@admin.register(Turn)
class TurnAdmin(DatasetScopedAdmin):
    dataset_path = "item__dataset"
    list_display = ("__str__", "index")
    search_fields = ("prompt", "item__external_id")
    list_select_related = ("item",)


@admin.register(Response)
class ResponseAdmin(DatasetScopedAdmin):
    dataset_path = "turn__item__dataset"
    list_display = ("id", "turn", "system")
    list_filter = (
        ("system__dataset", admin.RelatedOnlyFieldListFilter),
        ("system__key", OwnValuesFieldListFilter),
    )
    search_fields = ("text", "turn__item__external_id")
    list_select_related = ("turn__item", "system")
    readonly_fields = ("source",)


@admin.register(Rater)
class RaterAdmin(DatasetScopedAdmin):
    list_display = ("pseudonym", "dataset", "is_positional")
    list_filter = (("dataset", admin.RelatedOnlyFieldListFilter), "is_positional")
    search_fields = ("pseudonym",)


@admin.register(Rating)
class RatingAdmin(DatasetScopedAdmin):
    dataset_path = "aspect__dataset"
    list_display = ("id", "response", "aspect", "rater", "raw", "value", "is_missing", "origin")
    list_filter = (
        "origin",
        "is_missing",
        ("aspect__dataset", admin.RelatedOnlyFieldListFilter),
        ("aspect__name", OwnValuesFieldListFilter),
    )
    search_fields = ("rater__pseudonym", "response__turn__item__external_id")
    list_select_related = ("response__turn__item", "response__system", "aspect", "rater")

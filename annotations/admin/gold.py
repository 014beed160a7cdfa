"""Admin for gold items and attention checks: a researcher marks an item of one of their datasets, with the values
expected per system and aspect, a tolerance and, for an attention check, the instruction shown in the task."""

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from annotations.admin.bases import UserFormAdmin
from annotations.gold.selectors import gold_item_handed_out
from annotations.gold.services import GoldError, dataset_aspect_ranges, gold_item_remove, gold_item_set, item_systems
from annotations.models import GoldItem, Item
from annotations.rubrics.specs import format_number
from annotations.selectors import datasets_for_user
from annotations.text.ascii_numbers import ascii_int


def _item_pk(value: Any) -> int:
    """The item id an add link carries (?item=), or 0 for none."""
    return ascii_int(value) or 0


def _choices_text(item: Item) -> str:
    """What the expected values may name: the systems that answered the item and the dataset's scales."""
    systems = format_html_join(", ", "<code>{}</code>", ((key,) for key in item_systems(item)))
    ranges = format_html_join(
        ", ",
        "<code>{}</code> {}–{}",
        (
            (name, format_number(low), format_number(high))
            for name, (low, high) in dataset_aspect_ranges(item.dataset_id).items()
        ),
    )
    return format_html(
        "{}<br>{}: {}<br>{}: {}",
        gettext('Per system, the value each aspect should get: {"system": {"aspect": 2}}.'),
        gettext("Systems"),
        systems,
        gettext("Aspects"),
        ranges,
    )


class GoldItemForm(forms.ModelForm):
    expected = forms.JSONField(
        label=_("Expected values"),
        help_text=_('Per system, the value each aspect should get: {"system": {"aspect": 2}}.'),
        widget=forms.Textarea(attrs={"rows": 4, "cols": 60}),
    )

    class Meta:
        model = GoldItem
        fields = ("item", "kind", "expected", "tolerance", "instruction")

    def __init__(self, *args: Any, user: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        scoped = Item.objects.filter(dataset__in=datasets_for_user(user))
        if "item" in self.fields:
            self.fields["item"].queryset = scoped.select_related("dataset")  # type: ignore[attr-defined]
        item = self.instance.item if self.instance.pk else scoped.filter(pk=_item_pk(self.initial.get("item"))).first()
        if item is not None:
            self.fields["expected"].help_text = _choices_text(item)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.errors:
            return data
        item = data.get("item") or self.instance.item
        if self.instance.pk is None and GoldItem.objects.filter(item=item).exists():
            raise forms.ValidationError(gettext("This item is already marked; change its entry instead."))
        # The service checks and writes in one step, so a refusal becomes a form error and nothing is stored.
        try:
            self.instance = gold_item_set(
                item=item,
                kind=data["kind"],
                expected=data["expected"],
                tolerance=data["tolerance"],
                instruction=data.get("instruction", ""),
                by=self.user,
            )
        except GoldError as exc:
            target = {"gold.kind": "kind", "gold.tolerance": "tolerance", "gold.instruction": "instruction"}.get(
                exc.field, "expected" if exc.field.startswith("gold.expected") else None
            )
            shown = f"{exc.field.removeprefix('gold.')}: {exc.message}" if exc.field else exc.message
            self.add_error(target, shown)
        return data


@admin.register(GoldItem)
class GoldItemAdmin(UserFormAdmin):
    form = GoldItemForm
    list_display = ("item", "dataset", "kind", "tolerance", "created_at")
    list_filter = ("kind", ("item__dataset", admin.RelatedOnlyFieldListFilter))
    search_fields = ("item__external_id",)
    list_select_related = ("item__dataset",)
    readonly_fields = ("created_by", "created_at")
    fields = ("item", "kind", "expected", "tolerance", "instruction", "created_by", "created_at")

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).filter(item__dataset__in=datasets_for_user(request.user))

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        # Another item would be another gold entry; the one-to-one row stays with its item.
        return (*self.readonly_fields, "item") if obj is not None else self.readonly_fields

    @admin.display(description=_("dataset"))
    def dataset(self, obj: GoldItem) -> str:
        return obj.item.dataset.name

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Once a campaign handed the gold task out, its answers measure raters; unmarking would turn them into
        # ratings of the dataset.
        allowed = super().has_delete_permission(request, obj)
        return allowed and (obj is None or not gold_item_handed_out(obj.item))

    def save_model(self, request: HttpRequest, obj: GoldItem, form: Any, change: bool) -> None:
        # The form's clean() already stored it through the service.
        return

    def delete_model(self, request: HttpRequest, obj: GoldItem) -> None:
        gold_item_remove(item=obj.item, by=request.user)  # type: ignore[arg-type]

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[GoldItem]) -> None:
        for gold in queryset.select_related("item"):
            try:
                gold_item_remove(item=gold.item, by=request.user)  # type: ignore[arg-type]
            except GoldError as exc:
                self.message_user(request, f"{gold.item}: {exc}", level=messages.WARNING)


def gold_link(item: Item) -> str:
    """A link from an item's admin page to the item's research page, where it is marked as gold (with a preview of
    its answers and the scale of each aspect) or its gold values are changed."""
    url = reverse("research-item", args=[item.dataset_id, item.pk])
    is_gold = GoldItem.objects.filter(item=item).exists()
    return format_html('<a href="{}">{}</a>', url, _("gold") if is_gold else _("mark as gold"))

"""Admin for FActScore: upload a knowledge corpus, open a fact review, open the report.

Researchers only see rows of datasets they own or share (annotations.selectors.datasets_for_user).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from annotations.admin.bases import ReadOnlyRowsAdmin, UserFormAdmin, WholeObjectDeleteAdmin, form_for_user
from annotations.selectors import annotator_accounts, datasets_for_user
from judging.factscore.corpus import PASSAGE_TOKENS
from judging.factscore.models import FactAnswer, FactReviewCampaign, KnowledgeCorpus, Passage
from judging.models import JudgeRun

# The services (corpus indexing, the slot engine) are imported where a form saves: registering the admin happens in
# every process at django.setup(), most of which never show these pages.


def _review_settings(data: dict[str, Any], *, show_evidence_unset: bool) -> dict[str, Any]:
    """The settings of a fact review campaign that its form both creates and edits."""
    return {
        "name": data["name"],
        "annotators": data.get("annotators") or [],
        "lease_minutes": data["lease_minutes"],
        "show_evidence": data.get("show_evidence", show_evidence_unset),
        "guidelines": data.get("guidelines") or "",
    }


class StaffAdmin(admin.ModelAdmin):
    """Researchers (staff) work here like in the judge admin: rights by role, rows scoped by dataset."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_staff)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_active and request.user.is_staff)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_staff)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_active and request.user.is_staff)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_superuser)


class CorpusUploadForm(forms.ModelForm):
    file = forms.FileField(help_text='JSONL, one {"id", "title", "text"} object per line, UTF-8.')
    replace = forms.BooleanField(required=False, help_text="Replace a corpus of the same name.")

    class Meta:
        model = KnowledgeCorpus
        fields = ["dataset", "name", "passage_tokens"]

    def __init__(self, *args: Any, user: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        self.fields["dataset"].queryset = datasets_for_user(user)  # type: ignore[attr-defined]
        self.fields["passage_tokens"].initial = PASSAGE_TOKENS

    def clean(self) -> dict[str, Any]:
        from judging.factscore import services  # noqa: PLC0415 - see the imports

        data = super().clean() or {}
        if self.errors:
            return data
        try:
            self.instance = services.knowledge_corpus_upload(
                dataset=data["dataset"],
                name=data["name"],
                stream=data["file"],
                uploaded_by=getattr(self, "user", None),
                passage_tokens=data["passage_tokens"],
                replace=data.get("replace", False),
            )
        except services.CorpusError as exc:
            raise forms.ValidationError(f"{exc} (nothing was stored)") from None
        return data

    def validate_unique(self) -> None:
        # The upload service already checked (and, with "replace", replaced) the name.
        return

    def save(self, commit: bool = True) -> KnowledgeCorpus:
        return self.instance

    def save_m2m(self) -> None:
        return


@admin.register(KnowledgeCorpus)
class KnowledgeCorpusAdmin(WholeObjectDeleteAdmin, StaffAdmin):
    list_display = ("name", "dataset", "n_documents", "n_passages", "passage_tokens", "created_at")
    # RelatedOnly: the plain filter lists every dataset in the database, other researchers' included.
    list_filter = (("dataset", admin.RelatedOnlyFieldListFilter),)
    search_fields = ("name",)
    readonly_fields = ("dataset", "name", "passage_tokens", "n_documents", "n_passages", "fingerprint", "created_at")

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).filter(dataset__in=datasets_for_user(request.user))

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        if obj is not None:
            return super().get_form(request, obj, change=change, **kwargs)
        return form_for_user(CorpusUploadForm, request.user)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return ["dataset", "name", "passage_tokens", "file", "replace"]
        return self.readonly_fields

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.readonly_fields if obj is not None else ()

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Passages and the index are built from the upload; a different corpus is a new upload.
        return obj is None and super().has_change_permission(request, obj)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        from judging.factscore.indexes import forget_cached_indexes  # noqa: PLC0415 - see the imports

        # The upload form's clean() stored the corpus through the service; nothing is ever changed afterwards.
        forget_cached_indexes()
        messages.info(request, f"{obj.n_documents} documents split into {obj.n_passages} passages.")


# The corpus counts and its search index are built from all of its passages; a corpus goes whole.
@admin.register(Passage)
class PassageAdmin(ReadOnlyRowsAdmin, StaffAdmin):
    list_display = ("title", "document_id", "chunk", "corpus")
    list_filter = (("corpus", admin.RelatedOnlyFieldListFilter),)
    search_fields = ("title", "document_id")
    readonly_fields = ("corpus", "position", "document_id", "title", "chunk", "text")

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).filter(corpus__dataset__in=datasets_for_user(request.user))


class ReviewCampaignForm(forms.ModelForm):
    class Meta:
        model = FactReviewCampaign
        fields = ["name", "run", "raters_per_answer", "annotators", "lease_minutes", "show_evidence", "guidelines"]

    def __init__(self, *args: Any, user: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "run" in self.fields:
            self.fields["run"].queryset = JudgeRun.objects.filter(  # type: ignore[attr-defined]
                method="factscore", dataset__in=datasets_for_user(user)
            )
        if "annotators" in self.fields:
            pool = self.instance.annotators.values_list("pk", flat=True) if self.instance.pk else []
            self.fields["annotators"].queryset = annotator_accounts(user, keep=pool)  # type: ignore[attr-defined]
        self.user = user

    def clean(self) -> dict[str, Any]:
        from judging.factscore import services  # noqa: PLC0415 - see the imports

        data = super().clean() or {}
        if self.errors:
            return data
        if self.instance.pk is not None:
            try:
                services.fact_review_campaign_update(
                    campaign=self.instance, **_review_settings(data, show_evidence_unset=False)
                )
            except services.ReviewError as exc:
                raise forms.ValidationError(str(exc)) from None
            return data
        # Creating builds every task and slot; doing it here turns a refusal into a form error.
        try:
            self.instance = services.fact_review_campaign_create(
                run=data["run"],
                raters_per_answer=data["raters_per_answer"],
                created_by=self.user,
                **_review_settings(data, show_evidence_unset=True),
            )
        except services.ReviewError as exc:
            raise forms.ValidationError(str(exc)) from None
        return data

    def validate_unique(self) -> None:
        if self.instance.pk is None:
            super().validate_unique()


@admin.register(FactReviewCampaign)
class FactReviewCampaignAdmin(UserFormAdmin, WholeObjectDeleteAdmin, StaffAdmin):
    form = ReviewCampaignForm
    list_display = ("name", "run", "raters_per_answer", "is_active", "report_link")
    filter_horizontal = ("annotators",)

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).filter(run__dataset__in=datasets_for_user(request.user))

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # The tasks and slots are built from these at creation; changing them later would not rebuild them.
        return ("run", "raters_per_answer") if obj is not None else ()

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        # The form's clean() already stored the campaign through the service (on add, with its tasks and slots).
        return

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        return

    @admin.display(description="report")
    def report_link(self, obj: FactReviewCampaign) -> str:
        return format_html('<a href="{}">FActScore report</a>', reverse("factscore:report", args=[obj.run_id]))


# Projected from the run's judgments; the run's report and its fact reviews read these rows.
@admin.register(FactAnswer)
class FactAnswerAdmin(ReadOnlyRowsAdmin, StaffAdmin):
    list_display = (
        "response",
        "run",
        "outcome",
        "is_refusal",
        "n_facts",
        "facts_dropped",
        "n_supported",
        "score",
        "detail_link",
    )
    list_filter = ("outcome", "stage", "is_refusal")
    readonly_fields = [f.name for f in FactAnswer._meta.fields]

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return (
            super()
            .get_queryset(request)
            .filter(run__dataset__in=datasets_for_user(request.user))
            .select_related("run__judge", "response__system", "response__turn__item")
        )

    @admin.display(description="facts")
    def detail_link(self, obj: FactAnswer) -> str:
        return format_html('<a href="{}">facts and evidence</a>', reverse("factscore:answer", args=[obj.pk]))

from django import forms
from django.conf import settings
from django.utils.translation import gettext_lazy as _

from annotations.rubrics.specs import PRESETS


class DatasetUploadForm(forms.Form):
    name = forms.CharField(max_length=200, label=_("Name"))
    file = forms.FileField(label=_("File"), help_text=_("JSONL, one item per line"))
    preset = forms.ChoiceField(
        label=_("Preset"),
        choices=[("", _("(infer from data)"))] + [(p, p) for p in sorted(PRESETS)],
        required=False,
    )
    rubric = forms.FileField(label=_("Rubric"), required=False, help_text=_("rubric JSON; overrides the preset"))

    def clean_file(self) -> object:
        upload = self.cleaned_data["file"]
        if upload.size > settings.IMPORT_MAX_UPLOAD_BYTES:
            raise forms.ValidationError(f"the file is larger than {settings.IMPORT_MAX_UPLOAD_BYTES} bytes")
        return upload

    def clean(self) -> dict:
        cleaned = super().clean() or {}
        if cleaned.get("preset") and cleaned.get("rubric"):
            raise forms.ValidationError("choose a preset or upload a rubric, not both")
        return cleaned


class MappedImportForm(forms.Form):
    """The mapped import page: a table, a ready-made mapping or a mapping file, and the dataset's name."""

    file = forms.FileField(label=_("Table"), help_text=_("CSV, TSV, JSONL or Parquet"))
    mapping = forms.ChoiceField(label=_("Ready-made mapping"), required=False)
    mapping_file = forms.FileField(
        label=_("Mapping file"), required=False, help_text=_("TOML or JSON; instead of a ready-made mapping")
    )
    name = forms.CharField(max_length=200, label=_("Dataset name"), required=False)
    duplicates = forms.ChoiceField(
        label=_("Exactly repeated rows"),
        choices=[
            ("refuse", _("refuse the table (name both rows)")),
            ("drop", _("drop them (keep the first)")),
            ("keep", _("keep them all")),
        ],
        required=False,  # the first choice is the import's default
    )

    def __init__(self, *args: object, ready_made: list[str], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["mapping"].choices = [("", _("(use a mapping file)"))] + [(m, m) for m in ready_made]  # type: ignore[attr-defined]

    def clean_file(self) -> object:
        upload = self.cleaned_data["file"]
        if upload.size > settings.IMPORT_MAX_UPLOAD_BYTES:
            raise forms.ValidationError(
                _("the file is larger than %(n)s bytes") % {"n": settings.IMPORT_MAX_UPLOAD_BYTES}
            )
        return upload

    def clean(self) -> dict:
        cleaned = super().clean() or {}
        if bool(cleaned.get("mapping")) == bool(cleaned.get("mapping_file")):
            raise forms.ValidationError(_("choose a ready-made mapping or upload a mapping file (one of the two)"))
        return cleaned

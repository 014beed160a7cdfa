from django import forms
from django.conf import settings
from django.utils.translation import gettext_lazy as _

from annotations.rubrics import PRESETS


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

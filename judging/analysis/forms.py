from __future__ import annotations

from typing import Any, cast

from django import forms
from django.utils.translation import gettext_lazy as _


class CalibrationForm(forms.Form):
    """Choices come from the dataset itself, so a judge or aspect of another dataset is rejected."""

    judge = forms.ChoiceField(label=_("Judge with per-aspect scores"))
    target = forms.ChoiceField(label=_("Target (overall) aspect"))
    inputs = forms.MultipleChoiceField(label=_("Input aspects"), widget=forms.CheckboxSelectMultiple)
    name = forms.CharField(label=_("Name of the derived judge"), max_length=200, required=False)
    seed = forms.IntegerField(label=_("Seed of the 80/20 split"), initial=0, min_value=0, max_value=2**31 - 1)

    def __init__(self, *args: Any, judges: list[str], aspects: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["judge"]).choices = [(name, name) for name in judges]
        cast(forms.ChoiceField, self.fields["target"]).choices = [(name, name) for name in aspects]
        cast(forms.MultipleChoiceField, self.fields["inputs"]).choices = [(name, name) for name in aspects]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        target = cleaned.get("target")
        inputs = cleaned.get("inputs") or []
        if target and target in inputs:
            raise forms.ValidationError(_("The target aspect cannot also be an input."))
        return cleaned

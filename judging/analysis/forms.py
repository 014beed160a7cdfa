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


class AltTestForm(forms.Form):
    """The alternative-annotator test's margin and false discovery rate, from the judges page's query string."""

    epsilon = forms.FloatField(label=_("ε (cost–benefit margin)"), min_value=0.0, max_value=0.99, required=False)
    q = forms.FloatField(label=_("q (false discovery rate)"), min_value=0.001, max_value=0.5, required=False)


class ReferenceSetForm(forms.Form):
    """Name a human reference set: the dataset's ratings (of one origin or all) or one campaign's."""

    name = forms.CharField(label=_("Name of the reference set"), max_length=200)
    source = forms.ChoiceField(label=_("Ratings to freeze"))

    def __init__(self, *args: Any, campaigns: list[tuple[int, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices: list[tuple[str, Any]] = [
            ("all", _("every rating of the dataset")),
            ("import", _("the imported ratings")),
            ("app", _("the ratings made here")),
        ]
        choices += [(f"campaign:{pk}", _("campaign %(name)s") % {"name": name}) for pk, name in campaigns]
        cast(forms.ChoiceField, self.fields["source"]).choices = choices


class _VersionOnReferenceSetForm(forms.Form):
    """A choice of one of the dataset's judge versions and one of its reference sets."""

    version = forms.ChoiceField(label=_("Judge version"))
    reference_set = forms.ChoiceField(label=_("Reference set"))

    def __init__(
        self, *args: Any, versions: list[tuple[str, str]], reference_sets: list[tuple[int, str]], **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["version"]).choices = versions
        cast(forms.ChoiceField, self.fields["reference_set"]).choices = [(str(pk), name) for pk, name in reference_sets]


class CertifyForm(_VersionOnReferenceSetForm):
    """Certify one of the dataset's judge versions on one of its reference sets."""

    epsilon = forms.FloatField(label=_("ε (cost–benefit margin)"), min_value=0.0, max_value=0.99, initial=0.1)
    q = forms.FloatField(label=_("q (false discovery rate)"), min_value=0.001, max_value=0.5, initial=0.05)


class TeachForm(_VersionOnReferenceSetForm):
    """Teach one of the dataset's judge versions rated examples from one of its reference sets."""

    per_level = forms.IntegerField(label=_("Examples per score level"), min_value=1, max_value=10, initial=2)
    seed = forms.IntegerField(label=_("Seed for ties"), min_value=0, max_value=2**31 - 1, initial=0)
    alpha = forms.FloatField(label=_("Significance level α"), min_value=0.001, max_value=0.5, initial=0.05)

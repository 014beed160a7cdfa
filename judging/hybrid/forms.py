"""The hybrid settings form: which judge version, the target agreement, δ and the fewest kept items."""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from judging.hybrid.services import DEFAULT_DELTA, DEFAULT_TARGET
from judging.statistics.trust_escalate import DEFAULT_MIN_KEPT


class VersionField(forms.ModelChoiceField):  # type: ignore[type-arg]
    def label_from_instance(self, obj: Any) -> str:
        return f"{obj.config_name} · {obj.short} · {obj.provider_model}"


class HybridCalibrationForm(forms.Form):
    version = VersionField(queryset=None, label=_("Judge version"), empty_label=None)
    target = forms.FloatField(
        label=_("Target agreement"),
        initial=DEFAULT_TARGET,
        min_value=0.01,
        max_value=0.99,
        help_text=_("The agreement with the human label that the kept tasks must reach."),
    )
    delta = forms.FloatField(
        label=_("δ (risk of missing the target)"),
        initial=DEFAULT_DELTA,
        min_value=0.001,
        max_value=0.5,
        help_text=_("The guarantee holds with probability 1 − δ."),
    )
    min_kept = forms.IntegerField(
        label=_("Fewest calibration items kept"),
        initial=DEFAULT_MIN_KEPT,
        min_value=1,
        max_value=100000,
        help_text=_("No threshold that keeps fewer reference answers is tested."),
    )

    def __init__(self, *args: Any, versions: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["version"].queryset = versions  # type: ignore[attr-defined]
        for name in ("target", "delta"):
            self.fields[name].widget.attrs["step"] = "any"

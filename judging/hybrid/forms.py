"""The hybrid settings forms: which judge version, the target agreement, δ and the fewest kept items; the human
sampling policy and the stopping rule."""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from annotations.models import HumanSampling, SamplingStratum, StopRule
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


class SamplingForm(forms.Form):
    """Which tasks go to the humans, and when the campaign may stop."""

    # The campaign's fields this form edits as they are; the rule's aspect (stop_aspect) is stored by its id.
    campaign_fields = (
        "human_sampling",
        "human_share",
        "sampling_stratum",
        "stop_rule",
        "stop_first",
        "stop_second",
        "stop_width",
    )

    human_sampling = forms.ChoiceField(
        label=_("Human sampling"),
        required=False,
        choices=[("", _("calibrated threshold (Trust or Escalate)")), *HumanSampling.choices],
        help_text=_(
            "Under a policy every task goes to the raters with a known probability, stored on the task and in the "
            "exports; the estimates weight each rating by its inverse."
        ),
    )
    human_share = forms.FloatField(
        label=_("Expected share of tasks for the raters"),
        initial=0.5,
        min_value=0.01,
        max_value=1.0,
    )
    sampling_stratum = forms.ChoiceField(
        label=_("Strata, for the stratified policy"),
        choices=SamplingStratum.choices,
        initial=SamplingStratum.SYSTEM,
        help_text=_(
            "A task's aspect is the one on which the judge is least certain; the confidence bins are the quartiles "
            "of the judge's uncertainty over the campaign's tasks."
        ),
    )
    stop_rule = forms.ChoiceField(
        label=_("Stopping rule"), required=False, choices=[("", _("none: run to the planned size")), *StopRule.choices]
    )
    stop_aspect: forms.ModelChoiceField[Any] = forms.ModelChoiceField(
        queryset=None,
        label=_("Aspect of the rule"),
        required=False,
        help_text=_("For “certified”: the aspect on which the campaign's judge version must pass its certificate."),
    )
    stop_first = forms.ChoiceField(label=_("System (A)"), required=False)
    stop_second = forms.ChoiceField(label=_("Other system (B), for “A beats B”"), required=False)
    stop_width = forms.FloatField(
        label=_("Largest interval width, for “width ≤ w”"), required=False, min_value=0.000001
    )

    def __init__(self, *args: Any, campaign: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["stop_aspect"].queryset = campaign.aspects.order_by("position", "pk")  # type: ignore[attr-defined]
        systems = [
            ("", "—"),
            *((key, key) for key in campaign.dataset.systems.order_by("key").values_list("key", flat=True)),
        ]
        self.fields["stop_first"].choices = systems  # type: ignore[attr-defined]
        self.fields["stop_second"].choices = systems  # type: ignore[attr-defined]

    @classmethod
    def initial_for(cls, campaign: Any) -> dict[str, Any]:
        initial = {name: getattr(campaign, name) for name in cls.campaign_fields}
        return {**initial, "stop_aspect": campaign.stop_aspect_id}

    def sampling_settings(self) -> dict[str, Any]:
        """The cleaned data as `campaign_sampling_set` takes it."""
        aspect = self.cleaned_data["stop_aspect"]
        return {
            **{name: self.cleaned_data[name] for name in self.campaign_fields},
            "stop_aspect_id": aspect.pk if aspect is not None else None,
        }

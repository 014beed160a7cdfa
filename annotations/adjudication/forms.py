"""The researcher's adjudication settings of a campaign."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.models import User
from django.utils.translation import gettext_lazy as _

from annotations.adjudication.selectors import adjudicator_accounts


class AdjudicationRuleForm(forms.Form):
    max_spread = forms.FloatField(
        label=_("Disputed when an answer's ratings of one aspect differ by more than"),
        required=False,
        min_value=0,
        help_text=_("Max minus min of the ratings that count, in scale points. Empty: scores are never disputed."),
    )
    min_span_f1 = forms.FloatField(
        label=_("Disputed when two raters' error spans on an answer agree with a span F1 below"),
        required=False,
        min_value=0,
        max_value=1,
        help_text=_(
            "Span aspects: the span-level F1 between two raters, spans matching when they overlap by a character "
            "and have the same category; 1 when both marked nothing, 0 when only one did. Empty: spans are never "
            "disputed."
        ),
    )
    preference_splits = forms.BooleanField(
        label=_("Disputed when the raters did not all prefer the same answer"), required=False
    )
    adjudicators = forms.ModelMultipleChoiceField(
        label=_("Adjudicators"),
        queryset=User.objects.none(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text=_("People you work with. Naming someone here lets them settle this campaign's disputes."),
    )

    def __init__(self, *args: Any, user: Any, keep: list[int], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["adjudicators"].queryset = adjudicator_accounts(user, keep=keep)  # type: ignore[attr-defined]

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from annotations.campaigns.settings import (
    MAX_CANDIDATES_PER_TASK,
    MAX_LEASE_MINUTES,
    MAX_RATERS_PER_ITEM,
    SETTING_NAMES,
)
from annotations.models import Aspect, Campaign, Dataset, GoldKind
from annotations.recruitment.models import MAX_QUOTA, Platform
from annotations.research.selectors import pool_accounts
from annotations.roles import AnyUser


def minute_input() -> forms.DateTimeInput:
    """The browser's date-and-time picker, read and written in the site's time zone (UTC, as the labels say)."""
    return forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M")


class CampaignBuilderForm(forms.Form):
    """A campaign of one dataset: only that dataset's aspects are offered."""

    name = forms.CharField(label=_("Campaign name"), max_length=200)
    aspects = forms.ModelMultipleChoiceField(
        label=_("Aspects to rate"), queryset=Aspect.objects.none(), widget=forms.CheckboxSelectMultiple
    )
    raters_per_item = forms.IntegerField(
        label=_("Raters per task"),
        min_value=1,
        max_value=MAX_RATERS_PER_ITEM,
        initial=3,
        help_text=_("Distinct annotators per task."),
    )
    candidates_per_task = forms.IntegerField(
        label=_("Answers per task"),
        min_value=1,
        max_value=MAX_CANDIDATES_PER_TASK,
        required=False,
        help_text=_("Empty: every answer of a question in one task."),
    )
    gold_rate = forms.FloatField(
        label=_("Gold rate"),
        min_value=0,
        max_value=0.5,
        initial=0,
        help_text=_("Share of each annotator's tasks drawn from gold items and attention checks (0 to 0.5)."),
    )
    lease_minutes = forms.IntegerField(
        label=_("Minutes to finish a task"),
        min_value=1,
        max_value=MAX_LEASE_MINUTES,
        initial=30,
        help_text=_("1 to 10080 (a week)."),
    )
    opens_at = forms.DateTimeField(
        label=_("Opens at (UTC)"),
        required=False,
        widget=minute_input(),
        help_text=_("No task is handed out before this moment. Empty: open now."),
    )
    closes_at = forms.DateTimeField(
        label=_("Closes at (UTC)"),
        required=False,
        widget=minute_input(),
        help_text=_(
            "No new task is handed out from this moment; a task already started may still be submitted until "
            "its time runs out. Empty: no closing time."
        ),
    )
    guidelines = forms.CharField(
        label=_("Guidelines (Markdown)"), required=False, widget=forms.Textarea(attrs={"rows": 4})
    )
    show_reference = forms.BooleanField(label=_("Show the reference answer"), required=False)
    show_context = forms.BooleanField(label=_("Show the context passages"), required=False, initial=True)
    ask_preference = forms.BooleanField(label=_("Ask which answer they prefer"), required=False, initial=True)
    rationale_required = forms.BooleanField(label=_("Require a reason"), required=False, initial=True)
    scale_dropdowns = forms.BooleanField(label=_("Show every scale as a drop-down"), required=False)
    allow_revisit = forms.BooleanField(label=_("Annotators may correct their answers"), required=False, initial=True)
    annotators = forms.ModelMultipleChoiceField(
        label=_("Annotator pool"), queryset=Aspect.objects.none(), required=False, widget=forms.CheckboxSelectMultiple
    )
    crowd_platform = forms.ChoiceField(
        label=_("Crowd link"),
        required=False,
        choices=[("", _("(no crowd link)")), *Platform.choices],
        help_text=_("A link that admits crowd workers from this platform."),
    )
    tasks_per_session = forms.IntegerField(
        label=_("Tasks per crowd session"), min_value=1, max_value=MAX_QUOTA, required=False
    )
    tasks_per_worker = forms.IntegerField(
        label=_("Tasks per crowd worker"), min_value=1, max_value=MAX_QUOTA, required=False
    )

    def __init__(self, *args: Any, dataset: Dataset, user: AnyUser, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.dataset = dataset
        aspects = self.fields["aspects"]
        aspects.queryset = Aspect.objects.filter(dataset=dataset).order_by("position", "pk")  # type: ignore[attr-defined]
        aspects.label_from_instance = lambda aspect: aspect.display_label  # type: ignore[attr-defined]
        if not self.is_bound:
            aspects.initial = list(aspects.queryset)  # type: ignore[attr-defined]
        self.fields["annotators"].queryset = pool_accounts(user)  # type: ignore[attr-defined]

    def campaign_options(self) -> dict[str, Any]:
        """The settings this form asks for; a new campaign opens active, the one setting it leaves out."""
        return {key: self.cleaned_data[key] for key in SETTING_NAMES if key in self.fields}


class InviteForm(forms.Form):
    username = forms.CharField(label=_("User name"), max_length=150)
    email = forms.EmailField(label=_("Email"), required=False)
    campaign = forms.ModelChoiceField(
        label=_("Add to the pool of"), queryset=Campaign.objects.none(), required=False, empty_label=_("(no campaign)")
    )

    def __init__(self, *args: Any, campaigns: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["campaign"].queryset = campaigns  # type: ignore[attr-defined]


class PoolAddForm(forms.Form):
    annotator = forms.ModelChoiceField(label=_("Annotator"), queryset=Campaign.objects.none())
    campaign = forms.ModelChoiceField(label=_("Campaign"), queryset=Campaign.objects.none())

    def __init__(self, *args: Any, campaigns: Any, annotators: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["campaign"].queryset = campaigns  # type: ignore[attr-defined]
        self.fields["annotator"].queryset = annotators  # type: ignore[attr-defined]


class InviteAcceptForm(forms.Form):
    password1 = forms.CharField(
        label=_("Password"), strip=False, widget=forms.PasswordInput(attrs={"autocomplete": "new-password"})
    )
    password2 = forms.CharField(
        label=_("Password again"), strip=False, widget=forms.PasswordInput(attrs={"autocomplete": "new-password"})
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("password1") and data.get("password1") != data.get("password2"):
            raise forms.ValidationError(_("The two passwords differ."))
        return data


class GoldSettingsForm(forms.Form):
    kind = forms.ChoiceField(label=_("Kind"), choices=GoldKind.choices, initial=GoldKind.GOLD)
    tolerance = forms.FloatField(
        label=_("Tolerance"),
        min_value=0,
        initial=0,
        help_text=_("A rating passes when it lies within this distance of the expected value."),
    )
    instruction = forms.CharField(
        label=_("Instruction shown in the task"),
        required=False,
        max_length=2000,
        help_text=_("Attention checks only, e.g. “Choose 2 for this aspect.”"),
    )


SPAN_LINE = re.compile(r"^(\d{1,9})\s*-\s*(\d{1,9})\s+(\S.*)$")


def expected_span_lines(value: Any, text: str) -> str:
    """A span expectation as the item page's text box shows it: one error a line, "start-end category [severity]",
    with the marked text after a "#" (ignored when read back)."""
    lines = []
    for span in value.get("spans", []) if isinstance(value, dict) else []:
        severity = f" {span['severity']}" if span.get("severity") else ""
        lines.append(
            f"{span['start']}-{span['end']} {span['category']}{severity}  # {text[span['start'] : span['end']]}"
        )
    return "\n".join(lines)


def parse_expected_span_lines(text: str, *, severities: Iterable[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """The expected spans written in the item page's text box (see expected_span_lines), and a problem per line that
    could not be read. A line's last word is its severity when it names one; the category is the rest, so MQM's
    categories with spaces ("Locale convention/Date format") need no quoting. Whether the offsets fit the answer and
    the category is the aspect's is the gold service's check."""
    known = set(severities)
    spans, problems = [], []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = SPAN_LINE.match(line)
        if match is None:
            problems.append(
                _('line %(number)s: expected "start-end category [severity]", found %(line)s')
                % {"number": number, "line": line[:80]}
            )
            continue
        start, end, rest = match.groups()
        words = rest.split()
        entry: dict[str, Any] = {"start": int(start), "end": int(end)}
        if len(words) > 1 and words[-1] in known:
            entry["category"], entry["severity"] = " ".join(words[:-1]), words[-1]
        else:
            entry["category"] = " ".join(words)
        spans.append(entry)
    return spans, problems

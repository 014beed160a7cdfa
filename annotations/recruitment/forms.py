"""Parsing of the researcher's recruitment forms; the rules themselves live in the services."""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from annotations.recruitment.models import MAX_QUOTA

MAX_INVITES = 1000
DEFAULT_MIN_TASKS = 1
DEFAULT_SKIPS = 5
DEFAULT_NO_TASKS_CODE = "NOTASKS"
MAX_LABEL_CHARS = 150


def _first_problem(form: forms.Form) -> str:
    for field, errors in form.errors.items():
        label = form.fields[field].label if field in form.fields else ""
        return f"{label}: {errors[0]}" if label else str(errors[0])
    return _("The form is not valid.")


class LinkSettingsForm(forms.Form):
    tasks_per_session = forms.IntegerField(
        required=False, min_value=1, max_value=MAX_QUOTA, label=gettext_lazy("Tasks per session")
    )
    tasks_per_worker = forms.IntegerField(
        required=False, min_value=1, max_value=MAX_QUOTA, label=gettext_lazy("Tasks per worker")
    )
    completion_code = forms.CharField(required=False, max_length=100, label=gettext_lazy("Completion code"))
    completion_url = forms.CharField(required=False, max_length=500, label=gettext_lazy("Completion URL"))
    min_tasks_to_complete = forms.IntegerField(
        required=False, min_value=1, max_value=MAX_QUOTA, label=gettext_lazy("Tasks needed for the completion code")
    )
    skips_per_session = forms.IntegerField(
        required=False, min_value=0, max_value=MAX_QUOTA, label=gettext_lazy("Skips per session")
    )
    no_tasks_code = forms.CharField(required=False, max_length=100, label=gettext_lazy("No-more-tasks code"))

    def problem(self) -> str:
        return _first_problem(self)

    def settings(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "tasks_per_session": data.get("tasks_per_session"),
            "tasks_per_worker": data.get("tasks_per_worker"),
            "completion_code": data.get("completion_code") or "",
            "completion_url": data.get("completion_url") or "",
            "min_tasks_to_complete": data.get("min_tasks_to_complete") or DEFAULT_MIN_TASKS,
            "skips_per_session": DEFAULT_SKIPS if data.get("skips_per_session") is None else data["skips_per_session"],
            "no_tasks_code": data.get("no_tasks_code") or DEFAULT_NO_TASKS_CODE,
        }


class InviteLabelsForm(forms.Form):
    labels_text = forms.CharField(
        label=gettext_lazy("Participant labels"), max_length=200_000, help_text=gettext_lazy("One label per line.")
    )

    def clean_labels_text(self) -> list[str]:
        labels: list[str] = []
        for line in str(self.cleaned_data["labels_text"]).splitlines():
            label = line.strip()
            if not label:
                continue
            if len(label) > MAX_LABEL_CHARS or any(ord(ch) < 32 for ch in label):
                raise forms.ValidationError(
                    _("Each label must be at most %(n)d characters on one line.") % {"n": MAX_LABEL_CHARS}
                )
            if label not in labels:
                labels.append(label)
        if not labels:
            raise forms.ValidationError(_("Enter at least one label."))
        if len(labels) > MAX_INVITES:
            raise forms.ValidationError(_("At most %(n)d labels at a time.") % {"n": MAX_INVITES})
        return labels

    def problem(self) -> str:
        return _first_problem(self)

    def labels(self) -> list[str]:
        return list(self.cleaned_data["labels_text"])

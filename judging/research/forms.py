"""The judges area's forms: the judge config form of the admin with the research area's templates, and the launch
form with a pilot."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_lazy as _

from judging.admin_forms import METHOD_LABELS, TEMPLATE_MODEL, JudgeConfigForm, config_template
from judging.config import validate_config

# The seed methods a researcher starts from, in the order a newcomer meets them. G-Eval is the single-answer method
# scored from the log-probabilities at the score token; "single" here is the same method read from the reply text.
TEMPLATE_LABELS: dict[str, Any] = {
    "single": _("Single answer"),
    "reference": METHOD_LABELS["reference"],
    "pairwise": METHOD_LABELS["pairwise"],
    "summarize_then_judge": METHOD_LABELS["summarize_then_judge"],
    "geval": _("G-Eval: single answer, scored from log-probabilities"),
    "factscore": METHOD_LABELS["factscore"],
    "metric": METHOD_LABELS["metric"],
    "error_spans": METHOD_LABELS["error_spans"],
}


def research_template(key: str) -> dict[str, Any]:
    """The complete config a template link fills in, with every default the config type gives."""
    if key == "geval":
        return {**config_template("single"), "name": "my-geval-judge"}
    if key == "single":
        raw = {"name": "my-single-judge", "method": "single", "model": TEMPLATE_MODEL}
        return validate_config(raw, check_network=False).stored()
    return config_template(key)


class ResearchJudgeConfigForm(JudgeConfigForm):
    """The admin's config form, unchanged in what it validates and saves, offering the research area's templates."""

    class Meta(JudgeConfigForm.Meta):
        # As the admin builds it from its fieldsets: the model's own field checked against the name in the JSON.
        fields = ["name"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["template"].choices = [("", "—"), *TEMPLATE_LABELS.items()]  # type: ignore[attr-defined]
        self.config_templates = {key: research_template(key) for key in TEMPLATE_LABELS}

    def sections(self) -> list[tuple[Any, list[Any]]]:
        """The fields in the admin's groups, each bound field ready to render."""
        from judging.admin import JudgeConfigAdmin  # noqa: PLC0415 - the admin's groups, read where shown

        return [
            (title, [self[name] for name in options["fields"] if name in self.fields])
            for title, options in JudgeConfigAdmin.fieldsets
        ]

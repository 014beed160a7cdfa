"""What an annotator rates a task on, and the form's sheet drawn from it: the scale of each of the campaign's
aspects, the candidate answers, and one row per candidate with one cell per scale, each scale's help and unselected
control rendered once per page. The task page builds the sheet for a leased task; the MTurk preview for its example
task, so a worker previews exactly the form they will get.

It sits below the campaign package (annotations.campaigns) because adjudication and recruitment, which the campaign
writes use, show scales and the sheet too."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.template.loader import render_to_string
from django.utils.safestring import mark_safe
from django.utils.translation import get_language
from django.utils.translation import gettext_lazy as _

from annotations.models import Aspect, Campaign
from annotations.rubrics.specs import format_number

# Scales with at most this many integer steps get one option per value; wider or fractional ones get a number box.
MAX_DISCRETE_OPTIONS = 11


# A row of one button per value still reads at a glance up to seven values; longer scales stay drop-downs.
MAX_BUTTON_VALUES = 7


def campaign_aspects(campaign: Campaign) -> list[Aspect]:
    return list(campaign.aspects.order_by("position", "pk"))


def rating_field_id(candidate: int, aspect_index: int) -> str:
    return f"r-{candidate}-{aspect_index}"


@dataclass(frozen=True)
class Candidate:
    number: int  # 1-based label shown to the annotator: "Candidate 1"
    response_id: int
    text: str
    earlier_answers: list[str] = field(default_factory=list)
    # An attention check's instruction for this answer ("choose 2 for this aspect"); empty on every other task.
    instruction: str = ""


@dataclass(frozen=True)
class ScaleOption:
    token: str  # the form value
    value: float
    label: str  # "3 · accurate"
    key: str  # keyboard shortcut, "" if none


@dataclass(frozen=True)
class Scale:
    aspect: Aspect
    index: int  # 1-based position among the campaign's aspects, used in field names
    options: list[ScaleOption]
    allows_missing: bool
    missing_token: Any  # what is stored when the annotator picks N/A

    @property
    def is_discrete(self) -> bool:
        return bool(self.options)

    @property
    def fits_button_row(self) -> bool:
        return self.is_discrete and len(self.options) <= MAX_BUTTON_VALUES

    @property
    def is_signed(self) -> bool:
        return self.aspect.min_value < 0

    @property
    def span_categories(self) -> list[tuple[str, str]]:
        """A span aspect's categories as (stored name, name shown in the active language)."""
        scheme = self.aspect.scheme
        language = (get_language() or "").split("-")[0]
        return [(category, scheme.label(category, language)) for category in scheme.categories]

    @property
    def span_severities(self) -> list[tuple[str, str]]:
        scheme = self.aspect.scheme
        language = (get_language() or "").split("-")[0]
        return [
            (severity, (scheme.labels.get(language) or {}).get(severity) or str(SEVERITY_LABELS[severity]))
            for severity in scheme.severities
        ]

    @property
    def range_text(self) -> str:
        return f"{format_number(self.aspect.min_value)}–{format_number(self.aspect.max_value)}"


SEVERITY_LABELS = {"neutral": _("neutral"), "minor": _("minor"), "major": _("major"), "critical": _("critical")}


NA_TOKEN = "na"  # noqa: S105 - a form value, not a secret


NA_KEY = "n"


def _is_whole(value: float) -> bool:
    return float(value).is_integer()


def _option_key(value: int, position: int, values: list[int]) -> str:
    """The key shown on an option. A digit must never mean anything but its own value: on a signed scale "1"
    picking -1 would be a lie, so there "-" and "+" step from 0 (the page script) and only 0 has a key of its
    own; scales that are neither signed nor single-digit pick the n-th option."""
    if values[0] < 0:
        return {0: "0", -1: "-", 1: "+"}.get(value, "")
    if values[-1] <= 9:
        return str(value)
    return str(position) if position <= 9 else ""


def aspect_scale(aspect: Aspect, index: int) -> Scale:
    options: list[ScaleOption] = []
    lo, hi = aspect.min_value, aspect.max_value
    value_labels = aspect.display_value_labels()
    # A span aspect is marked in the text; its score is never chosen from values.
    if not aspect.is_spans and _is_whole(lo) and _is_whole(hi) and hi - lo + 1 <= MAX_DISCRETE_OPTIONS:
        values = list(range(int(lo), int(hi) + 1))
        for position, value in enumerate(values, start=1):
            text = format_number(value)
            meaning = value_labels.get(text) or value_labels.get(f"{value}.0") or ""
            key = _option_key(value, position, values)
            options.append(
                ScaleOption(token=text, value=float(value), label=f"{text} · {meaning}" if meaning else text, key=key)
            )
    missing = list(aspect.missing or [])
    missing_token: Any = None
    if missing:
        missing_token = "NA" if "NA" in missing else next((m for m in missing if m is not None), missing[0])
    return Scale(aspect=aspect, index=index, options=options, allows_missing=bool(missing), missing_token=missing_token)


def campaign_scales(campaign: Campaign) -> list[Scale]:
    """Memoised on the campaign object: a request asks for them in the view and again in the service."""
    cached: list[Scale] | None = getattr(campaign, "_scales_cache", None)
    if cached is None:
        cached = [aspect_scale(aspect, i) for i, aspect in enumerate(campaign_aspects(campaign), start=1)]
        campaign._scales_cache = cached  # type: ignore[attr-defined]
    return cached


@dataclass(frozen=True)
class Cell:
    scale: Scale
    field_id: str
    value: str
    error: str
    popover: str  # the scale's help, rendered once per page (annotate/_scale_popover.html)
    blank_options: str  # the scale's options with none selected, rendered once per page
    buttons: bool  # a row of radio buttons (annotate/_scale_buttons.html) instead of a drop-down
    markup: str = ""  # the whole control (annotate/_rating_cell.html); a span cell has its own template


FIELD_PLACEHOLDER = "__field__"
# Where an empty cell's markup, rendered once per scale, takes its field id and candidate number. Marked safe, they
# reach the markup as they are, while any text of the aspect's with the same characters was escaped: only these
# places match.
CELL_FIELD = mark_safe("<r-field>")  # nosec B308 B703
CELL_ROW = mark_safe("<r-row>")  # nosec B308 B703


@dataclass(frozen=True)
class ScaleFragments:
    popover: str
    blank: str  # unselected options, or a button row whose field name is FIELD_PLACEHOLDER
    buttons: bool
    blank_cell: str = ""  # the empty control, its field id CELL_FIELD and its candidate number CELL_ROW

    def blank_for(self, field_id: str) -> str:
        if not self.buttons:
            return self.blank
        # The row was escaped when it was rendered; the field id is "r-<digits>-<digits>" (rating_field_id).
        return mark_safe(self.blank.replace(FIELD_PLACEHOLDER, field_id))  # noqa: S308  # nosec B308 B703

    def blank_cell_for(self, field_id: str, number: int) -> str:
        # Both stand-ins are replaced by digits and "-" (rating_field_id), which need no escaping.
        markup = self.blank_cell.replace(CELL_FIELD, field_id).replace(CELL_ROW, str(number))
        return mark_safe(markup)  # noqa: S308  # nosec B308 B703


def scale_fragments(scales: list[Scale], *, dropdowns: bool) -> dict[int, ScaleFragments]:
    """Each scale's help and unselected control, rendered (and escaped) by their templates once per page instead
    of once per candidate: they are most of the task page's markup and were most of its rendering time."""
    fragments = {}
    for scale in scales:
        blank: str = ""
        buttons = scale.fits_button_row and not dropdowns
        if buttons:
            template = "annotate/_scale_buttons.html"
            blank = render_to_string(template, {"scale": scale, "field_id": FIELD_PLACEHOLDER, "na_token": NA_TOKEN})
        elif scale.is_discrete:
            blank = render_to_string("annotate/_scale_options.html", {"scale": scale, "na_token": NA_TOKEN})
        popover = render_to_string("annotate/_scale_popover.html", {"scale": scale})
        made = ScaleFragments(popover=popover, blank=blank, buttons=buttons)
        if not scale.aspect.is_spans:
            empty = _cell(scale, made, CELL_FIELD, value="", error="")
            made = dataclasses.replace(made, blank_cell=_cell_markup(empty, CELL_ROW))
        fragments[scale.index] = made
    return fragments


def _cell(scale: Scale, fragments: ScaleFragments, field_id: str, *, value: str, error: str) -> Cell:
    return Cell(
        scale=scale,
        field_id=field_id,
        value=value,
        error=error,
        popover=fragments.popover,
        blank_options=fragments.blank_for(field_id),
        buttons=fragments.buttons,
    )


def _cell_markup(cell: Cell, number: str) -> str:
    return render_to_string("annotate/_rating_cell.html", {"cell": cell, "row_number": number, "na_token": NA_TOKEN})


def sheet_cell(
    scale: Scale, fragments: ScaleFragments, number: int, values: dict[str, str], errors: dict[str, str]
) -> Cell:
    """An empty cell's markup is the scale's, rendered once per page; one with a value or an error is rendered on
    its own."""
    field_id = rating_field_id(number, scale.index)
    cell = _cell(scale, fragments, field_id, value=values.get(field_id, ""), error=errors.get(field_id, ""))
    if scale.aspect.is_spans:
        return cell
    if cell.value or cell.error:
        return dataclasses.replace(cell, markup=_cell_markup(cell, str(number)))
    return dataclasses.replace(cell, markup=fragments.blank_cell_for(field_id, number))


@dataclass(frozen=True)
class SheetRow:
    candidate: Candidate
    cells: list[Cell]

    @property
    def has_spans(self) -> bool:
        """A span cell shows the answer's exact text itself, so the row does not show it a second time."""
        return any(cell.scale.aspect.is_spans for cell in self.cells)


def task_sheet(
    campaign: Campaign,
    scales: list[Scale],
    candidates: Sequence[Candidate],
    *,
    values: dict[str, str],
    errors: dict[str, str],
) -> list[SheetRow]:
    fragments = scale_fragments(scales, dropdowns=campaign.scale_dropdowns)
    return [
        SheetRow(
            candidate=candidate,
            cells=[sheet_cell(scale, fragments[scale.index], candidate.number, values, errors) for scale in scales],
        )
        for candidate in candidates
    ]

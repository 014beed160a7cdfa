"""The task form's sheet: one row per candidate answer, one cell per scale, with each scale's help and unselected
control rendered once per page. The task page builds it for a leased task; the MTurk preview for its example task,
so a worker previews exactly the form they will get."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.template.loader import render_to_string
from django.utils.safestring import mark_safe

from annotations.campaign_selectors import NA_TOKEN, Candidate, Scale, rating_field_id
from annotations.models import Campaign


@dataclass(frozen=True)
class Cell:
    scale: Scale
    field_id: str
    value: str
    error: str
    popover: str  # the scale's help, rendered once per page (annotate/_scale_popover.html)
    blank_options: str  # the scale's options with none selected, rendered once per page
    buttons: bool  # a row of radio buttons (annotate/_scale_buttons.html) instead of a drop-down


FIELD_PLACEHOLDER = "__field__"


@dataclass(frozen=True)
class ScaleFragments:
    popover: str
    blank: str  # unselected options, or a button row whose field name is FIELD_PLACEHOLDER
    buttons: bool

    def blank_for(self, field_id: str) -> str:
        if not self.buttons:
            return self.blank
        # The row was escaped when it was rendered; the field id is "r-<digits>-<digits>" (rating_field_id).
        return mark_safe(self.blank.replace(FIELD_PLACEHOLDER, field_id))  # noqa: S308  # nosec B308 B703


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
        fragments[scale.index] = ScaleFragments(popover=popover, blank=blank, buttons=buttons)
    return fragments


def sheet_cell(
    scale: Scale, fragments: ScaleFragments, number: int, values: dict[str, str], errors: dict[str, str]
) -> Cell:
    field_id = rating_field_id(number, scale.index)
    return Cell(
        scale=scale,
        field_id=field_id,
        value=values.get(field_id, ""),
        error=errors.get(field_id, ""),
        popover=fragments.popover,
        blank_options=fragments.blank_for(field_id),
        buttons=fragments.buttons,
    )


@dataclass(frozen=True)
class SheetRow:
    candidate: Candidate
    cells: list[Cell]


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

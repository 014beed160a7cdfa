"""What a campaign shows and asks, as one typed value: the single list of a campaign's settings, read by the
services that create and change campaigns, the annotator pages' one-query campaign read, and the research area's
campaign builder. Values are checked here, once, whichever door they came in by."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.utils.translation import gettext as _

from annotations.text.storable import NUL, unstorable_character

MAX_GOLD_RATE = 0.5
# A reserved task longer than a week holds its rater slot from everyone else for no purpose.
MAX_LEASE_MINUTES = 7 * 24 * 60
# How a campaign is cut into tasks. A task shows at most MAX_CANDIDATES_PER_TASK answers (the task form numbers
# them in three digits, the column is a smallint); MAX_RATERS_PER_ITEM distinct raters is already far beyond
# any agreement study.
MAX_RATERS_PER_ITEM = 100
MAX_CANDIDATES_PER_TASK = 100
# The settings' annotations are strings (postponed evaluation); each names the Python types a value may have.
_KINDS: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "bool": (bool,),
    "int": (int,),
    "float": (int, float),
    "datetime | None": (datetime, type(None)),
}


class CampaignSettingsError(ValueError):
    """A setting is unknown or out of range; the message names it."""


def check_storable(text: str) -> None:
    """A campaign's text (its name, its guidelines) with a NUL or an unpaired surrogate cannot be stored."""
    bad = unstorable_character(text)
    if bad == NUL:
        raise CampaignSettingsError("text with a NUL character cannot be stored")
    if bad:
        raise CampaignSettingsError("text with an unpaired surrogate cannot be stored")


@dataclasses.dataclass(frozen=True, kw_only=True)
class CampaignSettings:
    guidelines: str = ""
    show_reference: bool = False
    show_context: bool = True
    ask_preference: bool = True
    rationale_required: bool = True
    scale_dropdowns: bool = False
    lease_minutes: int = 30
    is_active: bool = True
    allow_revisit: bool = True
    # The share of each annotator's tasks that are gold items or attention checks.
    gold_rate: float = 0.0
    # The hand-out window (see Campaign.opens_at); None means no limit on that side.
    opens_at: datetime | None = None
    closes_at: datetime | None = None

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            kind = str(field.type)
            # bool is an int to Python; a tick box's True is not a number of minutes.
            if not isinstance(value, _KINDS[kind]) or (kind in ("int", "float") and isinstance(value, bool)):
                raise CampaignSettingsError(f"{field.name} must be a {field.type}, not {value!r}")
        check_storable(self.guidelines)
        if not 1 <= self.lease_minutes <= MAX_LEASE_MINUTES:
            raise CampaignSettingsError(f"the minutes to finish a task must be between 1 and {MAX_LEASE_MINUTES}")
        if not (math.isfinite(self.gold_rate) and 0 <= self.gold_rate <= MAX_GOLD_RATE):
            raise CampaignSettingsError("the gold rate must be between 0 and 0.5")
        for moment in (self.opens_at, self.closes_at):
            if moment is not None and moment.utcoffset() is None:
                raise CampaignSettingsError(_("Opening and closing times need a time zone."))
        if self.opens_at is not None and self.closes_at is not None and self.closes_at <= self.opens_at:
            raise CampaignSettingsError(_("The closing time must be after the opening time."))

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> CampaignSettings:
        """The settings `options` names, the others at their defaults; CampaignSettingsError for a name that is
        not a setting or a value that is not allowed."""
        unknown = set(options) - set(SETTING_NAMES)
        if unknown:
            raise CampaignSettingsError(f"unknown campaign options: {', '.join(sorted(unknown))}")
        return cls(**options)

    def as_options(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


SETTING_NAMES: tuple[str, ...] = tuple(field.name for field in dataclasses.fields(CampaignSettings))

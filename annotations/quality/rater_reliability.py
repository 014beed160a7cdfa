"""Each rater's reliability as a rater model estimates it, for the quality panel.

The rater models live in the judging app, and the annotations domain does not import the judge. So judging registers
its function when its app is ready (`judging.apps`), and the panel reaches it only through here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.core.exceptions import ImproperlyConfigured

if TYPE_CHECKING:
    from annotations.models import Campaign


@dataclass(frozen=True)
class ItemPosterior:
    """One answer's label as the aspect's rater model estimates it: for Dawid–Skene and MACE the posterior label and
    its posterior probability, for the severity model the adjusted score (the item's expected true score)."""

    response_id: int
    item: str  # the item's external id
    turn: int  # counted from 1
    system: str
    label: float | None
    probability: float | None
    score: float | None
    raters: int  # the ratings of this answer the model was fitted on


@dataclass(frozen=True)
class AspectReliability:
    """One aspect's fit: the model used, each rater's estimated reliability keyed by pseudonym (None with the
    reason when the model cannot tell), or the reason the whole fit is undefined; and each answer's posterior."""

    aspect: str
    model: str  # a rater model name of judging.statistics.rater_models.MODELS
    undefined: str | None
    reliability: dict[str, float | None]
    reasons: dict[str, str]
    items: list[ItemPosterior] = field(default_factory=list)


RaterReliability = Callable[["Campaign"], list[AspectReliability]]

_reliability: RaterReliability | None = None


def rater_reliability_register(reliability: RaterReliability) -> None:
    global _reliability
    _reliability = reliability


def rater_reliability(campaign: Campaign) -> list[AspectReliability]:
    """Per aspect of the campaign, in rubric order, from its ratings with the excluded raters left out."""
    if _reliability is None:
        raise ImproperlyConfigured("no rater reliability is registered: is the judging app installed?")
    return _reliability(campaign)

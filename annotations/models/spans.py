"""Error spans a rater marked in an answer: the evidence behind a span aspect's rating, whose value is the MQM score
the aspect's scheme gives them."""

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from annotations.models.datasets import Rating
from annotations.models.parts import known_choice, not_blank
from annotations.spans.error_spans import SEVERITIES
from annotations.spans.schemes import CATEGORY_MAX_LENGTH, SEVERITY_MAX_LENGTH

__all__ = ["ErrorSpan"]


def _offsets_valid(start: str, end: str) -> Q:
    """Both offsets or neither; with both, 0 <= start <= end."""
    return Q(**{f"{start}__isnull": True, f"{end}__isnull": True}) | Q(
        **{f"{start}__isnull": False, f"{end}__isnull": False, f"{start}__gte": 0, f"{end}__gte": models.F(start)}
    )


class MarkedError(models.Model):
    """What an error says, whoever marked it (a rater, or an adjudicator settling a dispute): its category and
    severity under the aspect's scheme, and a note. Each concrete model places it with its own offsets."""

    category = models.CharField(max_length=CATEGORY_MAX_LENGTH)
    severity = models.CharField(max_length=SEVERITY_MAX_LENGTH)
    note = models.TextField(blank=True)

    start: int | None
    end: int | None

    class Meta:
        abstract = True

    def __str__(self) -> str:
        where = "unplaced" if self.start is None else f"{self.start}..{self.end}"
        return f"{self.category}/{self.severity} at {where}"


def marked_error_checks(*, severity_known: str, category_present: str) -> list[models.CheckConstraint]:
    """A severity the schemes know and a category, under the names each model's migrations gave them."""
    return [known_choice("severity", SEVERITIES, severity_known), not_blank("category", category_present)]


class ErrorSpan(MarkedError):
    """One error. Offsets are code-point indices into the answer text as stored (``text[start:end]``); an error with
    no offsets (an omission, a whole-answer problem) counts in the score and is left out of span agreement.
    ``source_start``/``source_end`` locate an omission in the prompt or source, as the WMT files mark it."""

    rating = models.ForeignKey(Rating, on_delete=models.CASCADE, related_name="error_spans")
    position = models.PositiveIntegerField(default=0)
    start = models.PositiveIntegerField(null=True, blank=True)
    end = models.PositiveIntegerField(null=True, blank=True)
    source_start = models.PositiveIntegerField(null=True, blank=True)
    source_end = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        verbose_name = _("error span")
        verbose_name_plural = _("error spans")
        ordering = ["rating", "position"]
        constraints = [
            models.UniqueConstraint(fields=["rating", "position"], name="error_span_position_unique_per_rating"),
            models.CheckConstraint(condition=_offsets_valid("start", "end"), name="error_span_offsets_ordered"),
            models.CheckConstraint(
                condition=_offsets_valid("source_start", "source_end"), name="error_span_source_offsets_ordered"
            ),
            *marked_error_checks(
                severity_known="error_span_severity_known", category_present="error_span_category_present"
            ),
        ]

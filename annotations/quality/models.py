"""Quality storage: exclusions of raters from the statistics, recorded and reversible.

Imported at the end of annotations/models.py, so these are models of the `annotations` app.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from annotations.models.parts import NewestFirst, not_blank, user_or_null


class RaterExclusion(NewestFirst):
    """A researcher left a rater out of the statistics. Revoking keeps the row (revoked_at), so the record of who
    was excluded, why and when stays; at most one exclusion of a rater is in force."""

    rater = models.ForeignKey("annotations.Rater", on_delete=models.CASCADE, related_name="exclusions")
    campaign = models.ForeignKey(
        "annotations.Campaign", null=True, blank=True, on_delete=models.SET_NULL, related_name="rater_exclusions"
    )
    reason = models.TextField()
    excluded_by = user_or_null()
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = user_or_null()

    class Meta(NewestFirst.Meta):
        verbose_name = _("rater exclusion")
        verbose_name_plural = _("rater exclusions")
        constraints = [
            models.UniqueConstraint(
                fields=["rater"], condition=Q(revoked_at__isnull=True), name="rater_excluded_once_at_a_time"
            ),
            not_blank("reason", "rater_exclusion_has_reason"),
            models.CheckConstraint(
                condition=Q(revoked_at__isnull=True) | Q(revoked_at__gte=models.F("created_at")),
                name="rater_exclusion_revoked_after",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.rater} excluded"

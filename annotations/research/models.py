"""Annotator invitations: a single-use, expiring link where an invited annotator sets their own password.

Imported at the end of annotations/models.py, so these are models of the `annotations` app.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from annotations.models.parts import user_or_null


class AnnotatorInvite(models.Model):
    """Only a SHA-256 hash of the link's token is stored: a database dump does not let anyone set a password."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="annotator_invites")
    campaign = models.ForeignKey(
        "annotations.Campaign", on_delete=models.CASCADE, related_name="annotator_invites", null=True, blank=True
    )
    token_hash = models.CharField(max_length=64, unique=True)
    created_by = user_or_null()
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("annotator invitation")
        verbose_name_plural = _("annotator invitations")
        constraints = [
            models.CheckConstraint(condition=Q(expires_at__gt=models.F("created_at")), name="invite_expires_later"),
            models.CheckConstraint(
                condition=Q(used_at__isnull=True) | Q(used_at__gte=models.F("created_at")),
                name="invite_used_after_created",
            ),
        ]

    def __str__(self) -> str:
        return f"invitation of {self.user}"

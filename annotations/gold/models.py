"""Gold storage: what a gold item or an attention check expects.

Imported at the end of annotations/models.py, so these are models of the `annotations` app.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from annotations.models.parts import at_least, user_or_null


class GoldKind(models.TextChoices):
    GOLD = "gold", _("Gold item")
    ATTENTION = "attention", _("Attention check")


class GoldItem(models.Model):
    """An item whose right scores are known. `expected` maps a system key to {aspect name: value}; a rating passes
    when it lies within `tolerance` of the expected value. An attention check also shows `instruction` inside the
    task ("choose 2 for this aspect"); a gold item looks like any other task. Ratings of gold items measure the
    raters and are never counted as ratings of the dataset."""

    item = models.OneToOneField("annotations.Item", on_delete=models.CASCADE, related_name="gold")
    kind = models.CharField(max_length=10, choices=GoldKind.choices, default=GoldKind.GOLD)
    expected = models.JSONField(default=dict)
    tolerance = models.FloatField(default=0)
    instruction = models.TextField(blank=True)
    created_by = user_or_null()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("gold item")
        verbose_name_plural = _("gold items")
        constraints = [
            at_least("tolerance", 0, "gold_tolerance_non_negative"),
            models.CheckConstraint(
                condition=Q(kind="gold") | (Q(kind="attention") & ~Q(instruction="")),
                name="gold_attention_check_has_instruction",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()}: {self.item}"

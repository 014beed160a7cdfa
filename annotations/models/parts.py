"""Columns and database checks that models of both apps declare alike: a user reference that outlives the account,
a bounded number, a text that may not be empty, a choice the database refuses unless it is known, names unique per
owner, and records listed newest first. Each builds exactly what the models spelled out before, so the migrations
see the same schema."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q


def user_or_null(related_name: str = "+") -> models.ForeignKey[Any, Any]:
    """The account that did something; the row stays, without it, when the account is deleted."""
    return models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name=related_name
    )


def within(field: str, low: object, high: object = None, *, low_exclusive: bool = False, nullable: bool = False) -> Q:
    """`field` at least `low` (above it with `low_exclusive`) and, given `high`, at most `high`; empty too when
    `nullable`."""
    bounded = Q(**{f"{field}__{'gt' if low_exclusive else 'gte'}": low})
    if high is not None:
        bounded &= Q(**{f"{field}__lte": high})
    return Q(**{f"{field}__isnull": True}) | bounded if nullable else bounded


def at_least(field: str, low: object, name: str, *, nullable: bool = False) -> models.CheckConstraint:
    """The database refuses a `field` below `low`: a count that must be positive, an amount that cannot be negative;
    empty too when `nullable`."""
    return models.CheckConstraint(condition=within(field, low, nullable=nullable), name=name)


def known_choice(field: str, values: Iterable[str], name: str) -> models.CheckConstraint:
    """The database refuses a value of `field` outside `values`, whatever wrote it."""
    return models.CheckConstraint(condition=Q(**{f"{field}__in": values}), name=name)


def not_blank(field: str, name: str) -> models.CheckConstraint:
    return models.CheckConstraint(condition=~Q(**{field: ""}), name=name)


def unique_per_owner(fields: list[str], *, per_owner: str, without_owner: str) -> list[models.UniqueConstraint]:
    """`fields` unique per owner, not site-wide: a site-wide rule would tell one researcher which names another one
    uses. Ownerless rows share one namespace, said by a partial index on every backend (SQLite has no NULLS NOT
    DISTINCT)."""
    return [
        models.UniqueConstraint(fields=["owner", *fields], name=per_owner),
        models.UniqueConstraint(fields=fields, condition=Q(owner__isnull=True), name=without_owner),
    ]


class NewestFirst(models.Model):
    """A record listed newest first, by when it was made."""

    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True
        ordering = ["-created_at"]

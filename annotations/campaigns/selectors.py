"""Reads of annotation campaigns for their annotators, every one scoped by the requesting user: the campaigns in
their pool, and one campaign with its scales, read in one statement.

Annotators reach campaigns only through their pool membership; the querysets built here never select system keys,
model names, other raters' ratings or judge scores, so a view cannot leak them by accident. An annotator's tasks
(leases, drafts, candidates) are read in annotations.campaigns.tasks, the progress tables in
annotations.campaigns.progress."""

import functools
from typing import Any

from django.contrib.auth.models import User
from django.db import connection
from django.db.models import QuerySet
from django.http import Http404
from django.utils.translation import get_language

from annotations.campaigns.settings import SETTING_NAMES
from annotations.models import (
    Aspect,
    Campaign,
)
from annotations.roles import AnyUser
from annotations.rubrics.task_sheet import (
    Scale,
    aspect_scale,
)
from annotations.slots import slot_pool_has
from annotations.slots.campaign_slots import CAMPAIGN_SLOTS
from annotations.slots.statements import instance_from_row, statement_cursor
from annotations.text.opaque import is_row_key


def campaigns_for_annotator(user: AnyUser) -> QuerySet[Campaign]:
    if not user.is_authenticated:
        return Campaign.objects.none()
    return Campaign.objects.filter(annotators__pk=user.pk, is_active=True).order_by("name")


# Every campaign column the annotator pages and API read; created_at is left out (deferred) because the annotator
# side never shows it and its row repeats once per aspect, each a Python timestamp parse.
CAMPAIGN_COLUMNS = (
    "id",
    "name",
    "dataset_id",
    "raters_per_item",
    "candidates_per_task",
    *SETTING_NAMES,
    "shuffle_seed",
    "created_by_id",
    "stop_rule",
    "stopped_at",
)


ASPECT_COLUMNS = (
    "id",
    "dataset_id",
    "name",
    "label",
    "description",
    "min_value",
    "max_value",
    "ideal",
    "level",
    "labels",
    "missing",
    "position",
    "translations",
    "kind",
    "span_scheme",
)


# The campaign, whether the user is in its pool, and its aspects in display order (one row per aspect).
_CAMPAIGN_FOR_ANNOTATOR_SQL = """
SELECT campaign.id, campaign.name, campaign.dataset_id, campaign.raters_per_item, campaign.candidates_per_task,
       campaign.guidelines, campaign.show_reference, campaign.show_context, campaign.ask_preference,
       campaign.rationale_required, campaign.scale_dropdowns, campaign.lease_minutes, campaign.is_active,
       campaign.allow_revisit, campaign.gold_rate, campaign.opens_at, campaign.closes_at,
       campaign.shuffle_seed, campaign.created_by_id, campaign.stop_rule, campaign.stopped_at,
       EXISTS (
           SELECT 1 FROM annotations_campaign_annotators member
           WHERE member.campaign_id = campaign.id AND member.user_id = %(user)s
       ),
       EXISTS (SELECT 1 FROM annotations_adjudicationrule rule WHERE rule.campaign_id = campaign.id),
       dataset.answer_format,
       aspect.id, aspect.dataset_id, aspect.name, aspect.label, aspect.description, aspect.min_value,
       aspect.max_value, aspect.ideal, aspect.level, aspect.labels, aspect.missing, aspect.position,
       aspect.translations, aspect.kind, aspect.span_scheme
FROM annotations_campaign campaign
JOIN annotations_dataset dataset ON dataset.id = campaign.dataset_id
LEFT JOIN annotations_campaign_aspects shown ON shown.campaign_id = campaign.id
LEFT JOIN annotations_aspect aspect ON aspect.id = shown.aspect_id
WHERE campaign.id = %(campaign)s
ORDER BY aspect.position, aspect.id
"""


def campaign_for_annotator(user: AnyUser, pk: int) -> Campaign:
    """The campaign if the user is in its pool; 404 if it does not exist or the user is not (or no longer)
    one of its annotators. Its scales come with it (campaign_scales needs no further query)."""
    if not is_row_key(pk):
        # The statement below binds the key as is.
        raise Http404("no such campaign")
    with statement_cursor() as cursor:
        cursor.execute(_CAMPAIGN_FOR_ANNOTATOR_SQL, {"campaign": pk, "user": user.pk or 0})
        rows = cursor.fetchall()
    if not rows:
        raise Http404("no such campaign")
    first, width = rows[0], len(CAMPAIGN_COLUMNS)
    campaign = instance_from_row(Campaign, CAMPAIGN_COLUMNS, first[:width])
    if not user.is_authenticated or not (campaign.is_active and first[width]):
        # Outside the pool the campaign is outside the user's scope: 404, so its existence is not revealed.
        raise Http404("no such campaign")
    campaign._adjudicates = bool(first[width + 1])  # type: ignore[attr-defined]
    campaign._answer_format = first[width + 2]  # type: ignore[attr-defined]
    aspect_rows = tuple(tuple(row[width + 3 :]) for row in rows if row[width + 3])
    campaign._scales_cache = list(  # type: ignore[attr-defined]
        _scales_of_rows(aspect_rows, connection.vendor, get_language() or "")
    )
    return campaign


@functools.lru_cache(maxsize=512)
def _scales_of_rows(aspect_rows: tuple[tuple[Any, ...], ...], vendor: str, language: str) -> "tuple[Scale, ...]":
    """Every annotator request reads its campaign's aspects, and building their instances and scales again cost a
    tenth of the request. Keyed on the rows exactly as read, so an edited aspect is a new key, never a stale hit;
    the scales are shared between requests and only read."""
    del vendor, language  # part of the key: converters differ between backends, value labels between languages
    aspects = [instance_from_row(Aspect, ASPECT_COLUMNS, row) for row in aspect_rows]
    return tuple(aspect_scale(aspect, i) for i, aspect in enumerate(aspects, start=1))


def campaign_has_annotator(campaign: Campaign, user: User) -> bool:
    return slot_pool_has(pool=CAMPAIGN_SLOTS, campaign=campaign, user=user)


def campaign_answer_format(campaign: Campaign) -> str:
    """How the campaign's dataset shows its answers (annotations.models.AnswerFormat); read with the campaign on the
    annotator's pages (campaign_for_annotator), else asked here."""
    known: str | None = getattr(campaign, "_answer_format", None)
    if known is None:
        known = campaign.dataset.answer_format
    return known


def closed_campaign_for_annotator(user: AnyUser, pk: int) -> Campaign | None:
    """The campaign when it exists, is closed, and the user is in its pool: the pages then say it is closed instead
    of answering 404 to someone who was working on it."""
    if not user.is_authenticated:
        return None
    return Campaign.objects.filter(pk=pk, is_active=False, annotators__pk=user.pk).first()

"""Reads of the error spans a campaign collected and of the spans its gold items expect, for the raters' span
agreement: scoped as every other read, by the campaign's rating scope, gold answers and the raters excluded now
left out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Max
from django.db.models.functions import Length

from annotations.models import AspectKind, Campaign, ErrorSpan, GoldItem, Rater, Rating, Response
from annotations.spans.error_spans import Span
from judging.analysis.selectors import AspectInfo, ExcludedRater, excluded_raters_among, rating_scope, scope_filter


@dataclass(frozen=True)
class CampaignSpans:
    """The error spans a campaign collected on its span aspects, by the raters who count: per aspect id, per answer
    (response id), per rater pseudonym, the spans in marking order; an answer a rater rated without marking an
    error maps to an empty list. Gold items and attention checks are left out, and so are the raters excluded now
    (named in ``excluded``)."""

    aspects: list[AspectInfo]
    lengths: dict[int, int]  # response id -> length of the answer in code points
    spans: dict[int, dict[int, dict[str, list[Span]]]]
    excluded: tuple[ExcludedRater, ...]


def campaign_spans(campaign: Campaign) -> CampaignSpans:
    """Reads in a fixed number of queries whatever the campaign's size: aspects, ratings, spans, lengths, raters
    and exclusions."""
    scope = rating_scope(campaign=campaign)
    aspects = [
        AspectInfo(*row)
        for row in campaign.aspects.filter(kind=AspectKind.SPANS)
        .order_by("position", "id")
        .values_list("id", "name", "label", "level", "min_value", "max_value", "ideal")
    ]
    if not aspects:
        return CampaignSpans(aspects=[], lengths={}, spans={}, excluded=())
    ratings = (
        Rating.objects.filter(aspect_id__in=[aspect.id for aspect in aspects], is_missing=False)
        .filter(scope_filter(scope))
        .exclude(response__turn__item__gold__isnull=False)
    )
    rows = list(ratings.values_list("id", "aspect_id", "response_id", "rater_id"))
    present = {rater_id for _, _, _, rater_id in rows}
    excluded = excluded_raters_among(campaign.dataset, present)
    left_out = {rater.rater_id for rater in excluded}
    rows = [row for row in rows if row[3] not in left_out]
    pseudonyms = dict(Rater.objects.filter(pk__in=present - left_out).values_list("id", "pseudonym"))
    lengths = dict(
        Response.objects.filter(pk__in={row[2] for row in rows})
        .annotate(length=Length("text"))
        .values_list("id", "length")
    )
    spans: dict[int, dict[int, dict[str, list[Span]]]] = {aspect.id: {} for aspect in aspects}
    of_rating: dict[int, list[Span]] = {}
    for rating_id, aspect_id, response_id, rater_id in sorted(rows, key=lambda row: (row[2], row[3])):
        marked: list[Span] = []
        spans[aspect_id].setdefault(response_id, {})[pseudonyms[rater_id]] = marked
        of_rating[rating_id] = marked
    for rating_id, start, end, category, severity in (
        ErrorSpan.objects.filter(rating__in=ratings)
        .order_by("rating_id", "position")
        .values_list("rating_id", "start", "end", "category", "severity")
    ):
        if rating_id in of_rating:
            of_rating[rating_id].append(Span(start, end, category, severity))
    return CampaignSpans(
        aspects=aspects, lengths={pk: length or 0 for pk, length in lengths.items()}, spans=spans, excluded=excluded
    )


@dataclass(frozen=True)
class GoldSpanAnswer:
    """One rater's spans on a gold answer that expects spans, with the spans the gold expects."""

    length: int  # of the answer, in code points
    given: list[Span]
    expected: list[Span]


@dataclass(frozen=True)
class CampaignGoldSpans:
    """Per span aspect id, per rater pseudonym, the gold answers the rater answered in the campaign whose gold
    expects spans on that aspect (N/A and unanswered left out); the raters excluded now are left out and named."""

    answers: dict[int, dict[str, list[GoldSpanAnswer]]]
    excluded: tuple[ExcludedRater, ...]
    expecting: frozenset[int] = frozenset()  # the aspect ids some gold item of the dataset expects spans on


def campaign_gold_spans(campaign: Campaign, aspects: list[AspectInfo]) -> CampaignGoldSpans:
    """Reads in at most three queries whatever the campaign's size: the gold fields of the dataset, the campaign's
    ratings of their answers on the span aspects (with each answer's length, system and rater), and the exclusions.
    The rater's spans are read from the rating's stored answer, as the gold verdict reads them."""
    from annotations.gold.rules import expected_span_pairs  # noqa: PLC0415 - span aspects only
    from annotations.spans.answers import token_spans  # noqa: PLC0415 - span aspects only

    answers: dict[int, dict[str, list[GoldSpanAnswer]]] = {aspect.id: {} for aspect in aspects}
    if not aspects:
        return CampaignGoldSpans(answers=answers, excluded=())
    names = {aspect.name: aspect.id for aspect in aspects}
    expected: dict[tuple[int, str, int], list[Span]] = {}  # (item id, system key, aspect id) -> gold spans
    for item_id, gold in GoldItem.objects.filter(item__dataset_id=campaign.dataset_id).values_list(
        "item_id", "expected"
    ):
        if not isinstance(gold, dict):
            continue
        for (system, name), spans in expected_span_pairs(gold, systems=set(gold), aspects=set(names)).items():
            # Severity is never compared in the figures.
            expected[(item_id, system, names[name])] = [
                Span(span.start, span.end, span.category, "neutral") for span in spans
            ]
    if not expected:
        return CampaignGoldSpans(answers=answers, excluded=())
    rows = list(
        Rating.objects.filter(
            aspect_id__in=list(names.values()),
            is_missing=False,
            response__turn__item_id__in={item_id for item_id, _s, _a in expected},
        )
        .filter(scope_filter(rating_scope(campaign=campaign)))
        .annotate(length=Length("response__text"))
        .order_by("rater__pseudonym", "response_id", "aspect_id")
        .values_list(
            "aspect_id", "response__turn__item_id", "response__system__key", "rater_id", "rater__pseudonym", "raw",
            "length",
        )
    )  # fmt: skip
    present = {row[3] for row in rows}
    excluded = excluded_raters_among(campaign.dataset, present)
    left_out = {rater.rater_id for rater in excluded}
    expecting = frozenset(aspect_id for _i, _s, aspect_id in expected)
    for aspect_id, item_id, system, rater_id, pseudonym, raw, length in rows:
        wanted = expected.get((item_id, system, aspect_id))
        if wanted is None or rater_id in left_out:
            continue
        answers[aspect_id].setdefault(pseudonym, []).append(
            GoldSpanAnswer(length=length or 0, given=token_spans(raw), expected=wanted)
        )
    return CampaignGoldSpans(answers=answers, excluded=excluded, expecting=expecting)


def campaign_gold_expectations(campaign: Campaign) -> list[tuple[int, Any]]:
    """The gold fields of the campaign's dataset: editing what a gold item expects changes the span figures."""
    return list(
        GoldItem.objects.filter(item__dataset_id=campaign.dataset_id)
        .order_by("item_id")
        .values_list("item_id", "expected")
    )


def campaign_has_span_aspects(campaign: Campaign) -> bool:
    return campaign.aspects.filter(kind=AspectKind.SPANS).exists()


def campaign_spans_version(campaign: Campaign) -> dict[str, Any]:
    """The count and last id of the error spans on the campaign's aspects: a correction replaces a rating's spans,
    which can move them without changing its score."""
    return ErrorSpan.objects.filter(rating__aspect__campaigns=campaign).aggregate(count=Count("id"), last=Max("id"))

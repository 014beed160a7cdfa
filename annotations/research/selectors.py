"""Reads of the research area: the item browser and an item's page, annotators' load, invitations."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db.models import Count, Exists, F, Max, Min, OuterRef, Q, QuerySet
from django.shortcuts import get_object_or_404
from django.utils import timezone

from annotations.datasets import judge_scores
from annotations.models import (
    AnnotatorInvite,
    Aspect,
    Assignment,
    AssignmentStatus,
    Campaign,
    Dataset,
    GoldItem,
    Item,
    Rater,
    Rating,
    Response,
    SubmissionRevision,
    System,
    Turn,
)
from annotations.roles import AnyUser
from annotations.selectors import annotator_accounts, counts_by, datasets_for_user

ITEMS_PER_PAGE = 25


def invite_token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def invite_for_token(token: str) -> AnnotatorInvite | None:
    """The invitation the link names while it can still be used: not used yet, not expired, and for an account that
    was not deactivated."""
    return (
        AnnotatorInvite.objects.filter(
            token_hash=invite_token_hash(token),
            used_at__isnull=True,
            expires_at__gt=timezone.now(),
            user__is_active=True,
        )
        .select_related("user")
        .first()
    )


# --- annotators -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AnnotatorLoad:
    user: User
    campaigns: list[str]
    assigned: int  # slots held now or submitted, in the researcher's campaigns
    done: int  # of those, submitted
    invited_by_me: bool
    invite_pending: bool


def researcher_campaigns(user: AnyUser) -> QuerySet[Campaign]:
    return Campaign.objects.filter(dataset__in=datasets_for_user(user)).select_related("dataset")


def pool_accounts(user: AnyUser) -> QuerySet[User]:
    """Annotators a researcher may put in a campaign: their pool, plus the active accounts they invited."""
    invited = AnnotatorInvite.objects.filter(created_by_id=user.pk).values("user_id")
    return User.objects.filter(
        Q(pk__in=annotator_accounts(user).values("pk")) | Q(pk__in=invited, is_active=True, is_staff=False)
    ).order_by("username")


def annotator_loads(user: AnyUser) -> list[AnnotatorLoad]:
    """Every annotator in the researcher's pool, with their load in the researcher's campaigns. Accounts the
    researcher invited count as theirs even before they join a campaign."""
    invited = set(AnnotatorInvite.objects.filter(created_by_id=user.pk).values_list("user_id", flat=True))
    pending = set(AnnotatorInvite.objects.filter(used_at__isnull=True).values_list("user_id", flat=True))
    accounts = (
        annotator_accounts(user, keep=invited) | User.objects.filter(pk__in=invited, is_active=False)
    ).distinct()
    campaigns = researcher_campaigns(user)
    counts: dict[int, dict[str, int]] = defaultdict(dict)
    for annotator_id, status, n in (
        Assignment.objects.filter(campaign__in=campaigns, annotator__isnull=False)
        .values("annotator_id", "status")
        .annotate(n=Count("pk"))
        .values_list("annotator_id", "status", "n")
    ):
        counts[annotator_id][status] = n
    memberships: dict[int, list[str]] = defaultdict(list)
    for annotator_id, name in campaigns.filter(annotators__isnull=False).values_list("annotators", "name"):
        memberships[annotator_id].append(name)
    return [
        AnnotatorLoad(
            user=account,
            campaigns=sorted(memberships.get(account.pk, [])),
            assigned=sum(counts[account.pk].values()) if account.pk in counts else 0,
            done=counts[account.pk].get(AssignmentStatus.SUBMITTED, 0) if account.pk in counts else 0,
            invited_by_me=account.pk in invited,
            invite_pending=account.pk in pending,
        )
        for account in accounts.order_by("username")
    ]


def annotator_manageable(user: AnyUser, pk: int) -> User:
    """An account the researcher may deactivate: an annotator they invited (any annotator for a superuser)."""
    accounts = User.objects.filter(is_staff=False, is_superuser=False)
    if not getattr(user, "is_superuser", False):
        accounts = accounts.filter(annotator_invites__created_by_id=user.pk)
    return get_object_or_404(accounts.distinct(), pk=pk)


# --- the item browser -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ItemFilters:
    text: str = ""
    system: str = ""
    aspect: str = ""
    value: float | None = None
    min_spread: float | None = None
    min_gap: float | None = None

    @property
    def active(self) -> bool:
        numbers = (self.value, self.min_spread, self.min_gap)
        return bool(self.text or self.system or self.aspect) or any(n is not None for n in numbers)


def _human_means(ratings: Iterable[tuple[int, str, float | None]]) -> dict[tuple[int, str], float]:
    sums: dict[tuple[int, str], list[float]] = defaultdict(list)
    for response_id, aspect_name, value in ratings:
        if value is not None:
            sums[(response_id, aspect_name)].append(value)
    return {key: sum(values) / len(values) for key, values in sums.items()}


def judge_scores_of(response_ids: Iterable[int]) -> list[tuple[int, str, str, float]]:
    """(response id, judge name, aspect name, value): the judge runs' scores and those imported with the file,
    read through the store the judging app registers (this app never imports the judge)."""
    ids = list(response_ids)
    return list(
        judge_scores.score_model()
        .objects.filter(response_id__in=ids)
        .order_by("judge__name", "aspect_name", "response_id")
        .values_list("response_id", "judge__name", "aspect_name", "value")
    )


def item_gaps(dataset: Dataset, item_ids: Iterable[int] | None = None) -> dict[int, float]:
    """The judge-vs-human gap of each item: over its answers, aspects and judges, the largest absolute difference
    between a judge's score and the mean of the human ratings of that answer on that aspect, in scale points.
    Items with no answer that both humans and a judge scored are absent."""
    responses = Response.objects.filter(turn__item__dataset=dataset)
    if item_ids is not None:
        responses = responses.filter(turn__item_id__in=list(item_ids))
    item_of = dict(responses.values_list("pk", "turn__item_id"))
    means = _human_means(
        Rating.objects.filter(response_id__in=list(item_of), is_missing=False).values_list(
            "response_id", "aspect__name", "value"
        )
    )
    gaps: dict[int, float] = {}
    for response_id, _judge, aspect_name, score in judge_scores_of(item_of):
        mean = means.get((response_id, aspect_name))
        if mean is None:
            continue
        item_id = item_of[response_id]
        gaps[item_id] = max(gaps.get(item_id, 0.0), abs(score - mean))
    return gaps


def item_spreads(item_ids: Iterable[int]) -> dict[int, float]:
    """The disagreement of each item: over its answers and aspects, the largest spread (highest minus lowest
    rating) of the ratings of one answer on one aspect, in scale points. Items with no answer rated twice on an
    aspect are absent."""
    spreads: dict[int, float] = {}
    for item_id, spread in (
        Rating.objects.filter(response__turn__item_id__in=list(item_ids), is_missing=False)
        .values("response_id", "aspect_id")
        .annotate(n=Count("pk"), spread=Max("value") - Min("value"), item_id=F("response__turn__item_id"))
        .filter(n__gte=2)
        .values_list("item_id", "spread")
    ):
        spreads[item_id] = max(spreads.get(item_id, 0.0), spread)
    return spreads


def items_browse(dataset: Dataset, filters: ItemFilters) -> QuerySet[Item]:
    items = Item.objects.filter(dataset=dataset)
    if filters.text:
        items = items.filter(
            Q(turns__prompt__icontains=filters.text)
            | Q(turns__responses__text__icontains=filters.text)
            | Q(external_id__icontains=filters.text)
        )
    if filters.system:
        items = items.filter(turns__responses__system__key=filters.system)
    if filters.aspect:
        rated = Rating.objects.filter(response__turn__item=OuterRef("pk"), aspect__name=filters.aspect)
        if filters.value is not None:
            rated = rated.filter(value=filters.value, is_missing=False)
        items = items.filter(Exists(rated))
    if filters.min_spread is not None:
        spreads = item_spreads(items.values_list("pk", flat=True))
        items = items.filter(pk__in=[pk for pk, spread in spreads.items() if spread >= filters.min_spread])
    if filters.min_gap is not None:
        gaps = item_gaps(dataset, items.values_list("pk", flat=True))
        items = items.filter(pk__in=[pk for pk, gap in gaps.items() if gap >= filters.min_gap])
    return items.distinct().order_by("position")


@dataclass(frozen=True)
class ItemRow:
    item: Item
    prompt: str
    answers: int
    ratings: int
    spread: float | None
    gap: float | None
    gold: bool


def item_rows(dataset: Dataset, items: list[Item]) -> list[ItemRow]:
    ids = [item.pk for item in items]
    prompts: dict[int, str] = {}
    for item_id, prompt in Turn.objects.filter(item_id__in=ids).order_by("index").values_list("item_id", "prompt"):
        prompts.setdefault(item_id, prompt)
    answers = counts_by(Response.objects.filter(turn__item_id__in=ids), "turn__item_id")
    ratings = counts_by(Rating.objects.filter(response__turn__item_id__in=ids), "response__turn__item_id")
    spreads = item_spreads(ids)
    gaps = item_gaps(dataset, ids)
    gold = set(GoldItem.objects.filter(item_id__in=ids).values_list("item_id", flat=True))
    return [
        ItemRow(
            item=item,
            prompt=prompts.get(item.pk, ""),
            answers=answers.get(item.pk, 0),
            ratings=ratings.get(item.pk, 0),
            spread=spreads.get(item.pk),
            gap=gaps.get(item.pk),
            gold=item.pk in gold,
        )
        for item in items
    ]


def dataset_systems(dataset: Dataset) -> list[str]:
    return list(System.objects.filter(dataset=dataset).order_by("position", "pk").values_list("key", flat=True))


def dataset_aspects(dataset: Dataset) -> list[Aspect]:
    return list(Aspect.objects.filter(dataset=dataset).order_by("position", "pk"))


def item_for_researcher(user: AnyUser, dataset_id: int, item_id: int) -> Item:
    return get_object_or_404(
        Item.objects.filter(dataset__in=datasets_for_user(user)).select_related("dataset"),
        dataset_id=dataset_id,
        pk=item_id,
    )


# --- an item's page ---------------------------------------------------------------------------------------------


@dataclass
class AnswerView:
    response: Response
    ratings: list[Rating] = field(default_factory=list)
    judge_scores: list[tuple[str, str, float]] = field(default_factory=list)
    judge_rationales: list[tuple[str, str, float | None, str]] = field(default_factory=list)


@dataclass
class TurnView:
    turn: Turn
    answers: list[AnswerView]


@dataclass(frozen=True)
class RevisionView:
    version: int
    rater: str
    system_values: list[tuple[str, str, Any]]
    rationale: str
    submitted_at: datetime
    replaced_at: datetime


def item_turns(item: Item) -> list[TurnView]:
    turns = list(Turn.objects.filter(item=item).order_by("index"))
    responses = list(
        Response.objects.filter(turn__item=item).select_related("system").order_by("turn__index", "system__position")
    )
    answers = {response.pk: AnswerView(response=response) for response in responses}
    for rating in (
        Rating.objects.filter(response__in=responses)
        .select_related("rater", "aspect")
        .order_by("response_id", "aspect__position", "rater__pseudonym")
    ):
        answers[rating.response_id].ratings.append(rating)
    for response_id, judge, aspect_name, value in judge_scores_of(answers):
        answers[response_id].judge_scores.append((judge, aspect_name, value))
    for response_id, judge, aspect_name, score, rationale in judge_scores.run_rationales(list(answers)):
        answers[response_id].judge_rationales.append((judge, aspect_name, score, rationale))
    by_turn: dict[int, list[AnswerView]] = defaultdict(list)
    for response in responses:
        by_turn[response.turn_id].append(answers[response.pk])
    return [TurnView(turn=turn, answers=by_turn[turn.pk]) for turn in turns]


def item_history(item: Item) -> list[RevisionView]:
    """Earlier versions of the answers submitted on the item's tasks, oldest first: who (their pseudonym in the
    dataset), which values they then gave, and when the next version replaced them."""
    revisions = list(
        SubmissionRevision.objects.filter(submission__assignment__task__turn__item=item)
        .select_related("submission__assignment")
        .order_by("submitted_at", "pk")
    )
    users = {
        revision.submission.assignment.annotator_id
        for revision in revisions
        if revision.submission.assignment.annotator_id is not None
    }
    pseudonyms = dict(
        Rater.objects.filter(dataset_id=item.dataset_id, user_id__in=users).values_list("user_id", "pseudonym")
    )
    systems = dict(Response.objects.filter(turn__item=item).values_list("pk", "system__key"))
    aspects = dict(Aspect.objects.filter(dataset_id=item.dataset_id).values_list("pk", "name"))
    return [
        RevisionView(
            version=revision.version,
            rater=pseudonyms.get(revision.submission.assignment.annotator_id or 0, "?"),
            system_values=[
                (systems.get(row.get("response_id"), "?"), aspects.get(row.get("aspect_id"), "?"), row.get("raw"))
                for row in revision.ratings
            ],
            rationale=revision.rationale,
            submitted_at=revision.submitted_at,
            replaced_at=revision.replaced_at,
        )
        for revision in revisions
    ]

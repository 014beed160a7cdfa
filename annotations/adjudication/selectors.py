"""Reads of adjudication: the ratings of a task that count, how far they disagree, the adjudicator's queue and
one dispute with the raters' answers, and the adjudicated values that exports and statistics read."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.http import Http404
from django.utils.translation import get_language, gettext, ngettext

from annotations.adjudication.rules import lowest_pair_span_f1
from annotations.models import (
    Adjudication,
    AdjudicationRule,
    Aspect,
    AspectKind,
    AssignmentStatus,
    Campaign,
    Dispute,
    DisputeClosure,
    Rater,
    RaterExclusion,
    Rating,
    Response,
    Submission,
    Task,
)
from annotations.roles import AnyUser, is_adjudicator
from annotations.rubrics.task_sheet import Scale, aspect_scale
from annotations.selectors import annotator_accounts, campaigns_for_researcher, researcher_accounts, shown_system_keys
from annotations.spans.answers import token_spans
from annotations.spans.error_spans import Span


@dataclass(frozen=True)
class CountingAnswers:
    """The submitted answers of a task that count: not from an excluded rater. `values` holds per (answer, aspect)
    the non-missing rating values; `preferences` the preferred answer of each counting submission; `spans` per
    (answer, span aspect) each counting rater's error spans."""

    submissions: int
    values: dict[tuple[int, int], list[float]]
    preferences: list[int | None]
    spans: dict[tuple[int, int], list[list[Span]]] = field(default_factory=dict)


def _excluded_users(dataset_id: int) -> set[int]:
    return set(
        RaterExclusion.objects.filter(
            rater__dataset_id=dataset_id, revoked_at__isnull=True, rater__user__isnull=False
        ).values_list("rater__user_id", flat=True)
    )


def task_counting_answers(*, task: Task, campaign: Campaign) -> CountingAnswers:
    excluded = _excluded_users(campaign.dataset_id)
    submitted = [
        (annotator_id, preferred)
        for annotator_id, preferred in Submission.objects.filter(
            assignment__task=task, assignment__status=AssignmentStatus.SUBMITTED
        ).values_list("assignment__annotator_id", "preferred_response_id")
        if annotator_id not in excluded
    ]
    users = [annotator_id for annotator_id, _ in submitted]
    values: dict[tuple[int, int], list[float]] = defaultdict(list)
    spans: dict[tuple[int, int], list[list[Span]]] = defaultdict(list)
    for response_id, aspect_id, value, kind, raw in Rating.objects.filter(
        rater__dataset_id=campaign.dataset_id,
        rater__user_id__in=users,
        response__in=task.responses.all(),
        aspect__in=campaign.aspects.all(),
        is_missing=False,
    ).values_list("response_id", "aspect_id", "value", "aspect__kind", "raw"):
        if value is not None:  # a rating that is not missing has a value (a database constraint)
            values[(response_id, aspect_id)].append(value)
        if kind == AspectKind.SPANS:
            spans[(response_id, aspect_id)].append(token_spans(raw))
    return CountingAnswers(
        submissions=len(submitted),
        values=dict(values),
        preferences=[preferred for _, preferred in submitted],
        spans=dict(spans),
    )


@dataclass(frozen=True)
class Disagreement:
    spreads: list[dict[str, Any]]  # [{response_id, aspect_id, spread}] beyond the rule's spread
    preference_split: bool

    @property
    def disputed(self) -> bool:
        return bool(self.spreads) or self.preference_split


def disagreement(*, answers: CountingAnswers, rule: AdjudicationRule, ask_preference: bool) -> Disagreement:
    """The spread of an answer's aspect is max minus min of its counting ratings (missing ones left out; fewer
    than two values have no spread); on a span aspect the ratings are MQM scores. A span aspect's answer is also
    disputed when two counting raters' spans agree with an F1 below the rule's `min_span_f1`
    (annotations.adjudication.rules); its entry then carries that lowest F1 as "span_f1". A preference is split
    when the counting raters did not all prefer the same answer."""
    found: dict[tuple[int, int], dict[str, Any]] = {}
    for key, values in answers.values.items():
        spread = max(values) - min(values) if len(values) >= 2 else 0.0
        if rule.max_spread is not None and len(values) >= 2 and spread > rule.max_spread:
            found[key] = {"response_id": key[0], "aspect_id": key[1], "spread": spread}
    if rule.min_span_f1 is not None:
        for key, sets in answers.spans.items():
            f1 = lowest_pair_span_f1(sets)
            if f1 is not None and f1 < rule.min_span_f1:
                values = answers.values.get(key, [])
                spread = max(values) - min(values) if len(values) >= 2 else 0.0
                found.setdefault(key, {"response_id": key[0], "aspect_id": key[1], "spread": spread})
                found[key]["span_f1"] = f1
    spreads = [found[key] for key in sorted(found)]
    split = rule.preference_splits and ask_preference and len(set(answers.preferences)) > 1
    return Disagreement(spreads=spreads, preference_split=split)


def campaign_rule(campaign: Campaign) -> AdjudicationRule | None:
    return AdjudicationRule.objects.filter(campaign=campaign).first()


# --- the adjudicator's pages --------------------------------------------------------------------------------------


def _adjudicable_campaigns(user: AnyUser) -> QuerySet[Campaign]:
    """Campaigns whose disputes the user may settle: those whose rule names them as adjudicator (while they hold
    the role), and, for a researcher, the campaigns of the datasets they see."""
    if not user.is_authenticated:
        return Campaign.objects.none()
    named = Q(adjudication_rule__adjudicators=user) if is_adjudicator(user) else Q(pk__in=[])
    own = Q(pk__in=campaigns_for_researcher(user).values("pk")) if getattr(user, "is_staff", False) else Q(pk__in=[])
    return Campaign.objects.filter(named | own).distinct()


def may_adjudicate(user: AnyUser) -> bool:
    return bool(user.is_authenticated and (getattr(user, "is_staff", False) or is_adjudicator(user)))


def _rated_by(user: AnyUser) -> Q:
    """Disputes over tasks the user rated themselves: nobody settles their own disagreement."""
    return Q(task__assignments__annotator_id=user.pk)


@dataclass(frozen=True)
class QueueRow:
    dispute: Dispute
    aspects: list[str]
    preference_split: bool


def dispute_queue(user: AnyUser, *, resolved: bool = False) -> list[QueueRow]:
    if not may_adjudicate(user):
        raise PermissionDenied("adjudicator access is required")
    disputes = (
        Dispute.objects.filter(campaign__in=_adjudicable_campaigns(user), resolved_at__isnull=not resolved)
        .exclude(_rated_by(user))
        .select_related("campaign", "task__turn__item")
        .order_by("campaign__name", "found_at", "id")
    )
    aspect_labels = {
        aspect.pk: aspect.display_label
        for aspect in Aspect.objects.filter(pk__in={entry["aspect_id"] for d in disputes for entry in d.spreads})
    }
    return [
        QueueRow(
            dispute=d,
            aspects=sorted({aspect_labels.get(entry["aspect_id"], "?") for entry in d.spreads}),
            preference_split=d.preference_split,
        )
        for d in disputes
    ]


def dispute_for_adjudicator(user: AnyUser, pk: int) -> Dispute:
    """403 without the role, 404 for a dispute outside the user's campaigns or over a task they rated."""
    if not may_adjudicate(user):
        raise PermissionDenied("adjudicator access is required")
    dispute = (
        Dispute.objects.filter(pk=pk, campaign__in=_adjudicable_campaigns(user))
        .exclude(_rated_by(user))
        .select_related("campaign", "campaign__dataset", "task__turn__item", "resolved_by", "preferred_response")
        .first()
    )
    if dispute is None:
        closure = (
            DisputeClosure.objects.filter(dispute_number=pk, campaign__in=_adjudicable_campaigns(user))
            .exclude(task__assignments__annotator_id=user.pk)
            .select_related("campaign", "exclusion__rater", "task__turn__item")
            .first()
        )
        if closure is not None:
            raise DisputeClosed(closure)
        raise Http404("no such dispute")
    return dispute


class DisputeClosed(Http404):
    """The dispute asked for was open once and an exclusion closed it; `closure` says which and when."""

    def __init__(self, closure: DisputeClosure) -> None:
        super().__init__("this dispute was closed when one of its raters was excluded")
        self.closure = closure


@dataclass(frozen=True)
class RaterAnswer:
    """One rater's answer to the disputed task, as the adjudicator sees it: by pseudonym, never by account."""

    pseudonym: str
    values: dict[tuple[int, int], Any]  # (response id, aspect id) -> raw token
    preferred_response_id: int | None
    none_appropriate: bool
    rationale: str
    comment: str


@dataclass(frozen=True)
class Segment:
    """A stretch of an answer and the errors of one rater that cover it, for a read-only highlight."""

    text: str
    severity: str  # of the last covering span, as the task page colours it; "" for unmarked text
    overlap: bool
    title: str


@dataclass(frozen=True)
class MarkedError:
    quote: str  # the marked text, "—" for an error that marks none
    category: str
    severity: str
    note: str


@dataclass(frozen=True)
class RaterSpans:
    """One rater's errors on a disputed span answer: the text cut into highlighted segments, and the list."""

    pseudonym: str
    segments: list[Segment]
    errors: list[MarkedError]
    token: str  # the rater's span token as JSON, for "start from these errors"


@dataclass(frozen=True)
class DisputedCell:
    response_id: int
    system_number: int  # "Answer 2": the answers are shown in the dataset's order, without system names
    aspect: Aspect
    scale: Scale
    spread: float
    rater_values: list[Any]
    adjudicated: Adjudication | None
    span_f1: float | None = None  # a span aspect: the lowest span F1 between two raters when it was found
    text: str = ""  # a span aspect: the answer text the spans point into
    rater_spans: list[RaterSpans] = field(default_factory=list)
    final_errors: list[MarkedError] = field(default_factory=list)  # a settled span aspect: the final set
    span_cell: Any = None  # a span aspect: the editor of the final set (annotate/_span_cell.html), set by the view

    @property
    def field_id(self) -> str:
        return f"v-{self.response_id}-{self.aspect.pk}"


def _segments(text: str, spans: list[Span]) -> list[Segment]:
    located = [(span.start, span.end, span) for span in spans if span.start is not None and span.end is not None]
    cuts = sorted({0, len(text), *(a for a, _b, _s in located), *(b for _a, b, _s in located)})
    segments = []
    for start, end in pairwise(cuts):
        covering = [s for a, b, s in located if a <= start and b >= end]
        segments.append(
            Segment(
                text=text[start:end],
                severity=covering[-1].severity if covering else "",
                overlap=len(covering) > 1,
                title="\n".join(f"{s.category} · {s.severity}" for s in covering),
            )
        )
    return segments


def _marked_errors(aspect: Aspect, text: str, raw: Any, language: str) -> list[MarkedError]:
    scheme = aspect.scheme
    notes = [entry.get("note", "") for entry in (raw.get("spans") or [])] if isinstance(raw, dict) else []
    return [
        MarkedError(
            quote="—" if span.start is None else text[span.start : span.end],
            category=scheme.label(span.category, language),
            severity=scheme.label(span.severity, language),
            note=notes[index] if index < len(notes) and isinstance(notes[index], str) else "",
        )
        for index, span in enumerate(token_spans(raw))
    ]


def _rater_spans(aspect: Aspect, text: str, answers: list[RaterAnswer], response_id: int) -> list[RaterSpans]:
    language = get_language() or "en"
    found = []
    for answer in answers:
        raw = answer.values.get((response_id, aspect.pk))
        spans = token_spans(raw)
        found.append(
            RaterSpans(
                pseudonym=answer.pseudonym,
                segments=_segments(text, spans),
                errors=_marked_errors(aspect, text, raw, language),
                token=json.dumps(
                    raw if isinstance(raw, dict) else {"no_error": False, "spans": []}, ensure_ascii=False
                ),
            )
        )
    return found


@dataclass(frozen=True)
class AnswerGrid:
    """One answer of the disputed task with every rater's rating of each aspect (columns in `raters` order)."""

    number: int
    response: Response
    rows: list[tuple[Aspect, list[Any], bool]]  # (aspect, the raters' raw tokens, disputed)
    preferred_by: list[str]


@dataclass
class DisputeView:
    dispute: Dispute
    responses: list[Response]
    raters: list[RaterAnswer]
    cells: list[DisputedCell] = field(default_factory=list)
    answers: list[AnswerGrid] = field(default_factory=list)
    answer_numbers: dict[int, int] = field(default_factory=dict)


def _shown_token(aspect: Aspect, raw: Any) -> Any:
    """A rating as the grid shows it: a span aspect's token as how many errors it marks (the errors themselves are
    shown on the answer below), any other as it is."""
    if not aspect.is_spans or not isinstance(raw, dict):
        return raw
    count = len(raw.get("spans") or [])
    if not count:
        return gettext("no error")
    return ngettext("%(n)d error", "%(n)d errors", count) % {"n": count}


def dispute_view(dispute: Dispute) -> DisputeView:
    task = dispute.task
    campaign = dispute.campaign
    responses = list(task.responses.order_by("position").select_related("system"))
    number = {response.pk: i for i, response in enumerate(responses, start=1)}
    excluded = _excluded_users(campaign.dataset_id)
    submissions = list(
        Submission.objects.filter(assignment__task=task, assignment__status=AssignmentStatus.SUBMITTED)
        .exclude(assignment__annotator_id__in=excluded)
        .order_by("created_at", "id")
        .values("assignment__annotator_id", "preferred_response_id", "none_appropriate", "rationale", "comment")
    )
    raters = {
        rater.user_id: rater
        for rater in Rater.objects.filter(
            dataset_id=campaign.dataset_id, user_id__in=[s["assignment__annotator_id"] for s in submissions]
        )
    }
    ratings: dict[int, dict[tuple[int, int], Any]] = defaultdict(dict)
    for rater_id, response_id, aspect_id, raw in Rating.objects.filter(
        rater__in=raters.values(), response__in=responses
    ).values_list("rater_id", "response_id", "aspect_id", "raw"):
        ratings[rater_id][(response_id, aspect_id)] = raw
    answers = [
        RaterAnswer(
            pseudonym=raters[s["assignment__annotator_id"]].pseudonym,
            values=ratings[raters[s["assignment__annotator_id"]].pk],
            preferred_response_id=s["preferred_response_id"],
            none_appropriate=s["none_appropriate"],
            rationale=s["rationale"],
            comment=s["comment"],
        )
        for s in submissions
        if s["assignment__annotator_id"] in raters
    ]
    aspects = {aspect.pk: aspect for aspect in campaign.aspects.all()}
    index = {pk: i for i, pk in enumerate(sorted(aspects, key=lambda pk: aspects[pk].position), start=1)}
    recorded = {(a.response_id, a.aspect_id): a for a in Adjudication.objects.filter(task=task)}
    texts = {response.pk: response.text for response in responses}
    language = get_language() or "en"
    cells = []
    for entry in dispute.spreads:
        aspect = aspects.get(entry["aspect_id"])
        if aspect is None:
            continue
        response_id = entry["response_id"]
        adjudicated = recorded.get((response_id, aspect.pk))
        text = texts.get(response_id, "")
        cells.append(
            DisputedCell(
                response_id=response_id,
                system_number=number.get(response_id, 0),
                aspect=aspect,
                scale=aspect_scale(aspect, index[aspect.pk]),
                spread=entry["spread"],
                rater_values=[answer.values.get((response_id, aspect.pk)) for answer in answers],
                adjudicated=adjudicated,
                span_f1=entry.get("span_f1"),
                text=text if aspect.is_spans else "",
                rater_spans=_rater_spans(aspect, text, answers, response_id) if aspect.is_spans else [],
                final_errors=(
                    _marked_errors(aspect, text, adjudicated.raw, language)
                    if aspect.is_spans and adjudicated is not None
                    else []
                ),
            )
        )
    disputed = {(cell.response_id, cell.aspect.pk) for cell in cells}
    ordered_aspects = sorted(aspects.values(), key=lambda aspect: aspect.position)
    grid = [
        AnswerGrid(
            number=number[response.pk],
            response=response,
            rows=[
                (
                    aspect,
                    [_shown_token(aspect, answer.values.get((response.pk, aspect.pk))) for answer in answers],
                    (response.pk, aspect.pk) in disputed,
                )
                for aspect in ordered_aspects
            ],
            preferred_by=[answer.pseudonym for answer in answers if answer.preferred_response_id == response.pk],
        )
        for response in responses
    ]
    return DisputeView(
        dispute=dispute, responses=responses, raters=answers, cells=cells, answers=grid, answer_numbers=number
    )


# --- what exports and statistics read -----------------------------------------------------------------------------


def consensus_values(response_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """Per answer, the adjudicated raw token of each aspect that was disputed: {response id: {aspect name: raw}}.
    An answer adjudicated in two campaigns keeps the later adjudication."""
    found: dict[int, dict[str, Any]] = defaultdict(dict)
    for response_id, aspect_name, raw in (
        Adjudication.objects.filter(response_id__in=list(response_ids))
        .order_by("created_at", "id")
        .values_list("response_id", "aspect__name", "raw")
    ):
        found[response_id][aspect_name] = raw
    return dict(found)


def consensus_numbers(*, response_ids: Iterable[int]) -> dict[tuple[int, int], float]:
    """The adjudicated value per (answer, aspect), the later one where an answer was adjudicated twice."""
    return {
        (response_id, aspect_id): value
        for response_id, aspect_id, value in Adjudication.objects.filter(response_id__in=list(response_ids))
        .order_by("created_at", "id")
        .values_list("response_id", "aspect_id", "value")
    }


def settled_preferences(turn_ids: Iterable[int]) -> dict[int, list[dict[str, Any]]]:
    """Per turn, the adjudicated preferences of its settled split tasks, with the system keys of the answers the
    task showed (a preference among a chunk is meaningless without them)."""
    disputes = list(
        Dispute.objects.filter(task__turn_id__in=list(turn_ids), resolved_at__isnull=False, preference_split=True)
        .order_by("task__turn_id", "resolved_at", "id")
        .values("task_id", "task__turn_id", "campaign__name", "preferred_response__system__key", "none_appropriate",
                "reason")
    )  # fmt: skip
    shown = shown_system_keys({d["task_id"] for d in disputes})
    found: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for d in disputes:
        found[d["task__turn_id"]].append(
            {
                "campaign": d["campaign__name"],
                "candidates": shown[d["task_id"]],
                "preferred": d["preferred_response__system__key"],
                "none_appropriate": d["none_appropriate"],
                "reason": d["reason"],
            }
        )
    return dict(found)


def adjudicator_accounts(user: AnyUser, *, keep: Iterable[int] = ()) -> QuerySet[User]:
    """Accounts a researcher may name as a campaign's adjudicators: the active people they work with (see
    annotations.selectors), plus those already named. Naming someone gives them the adjudicator role, which opens
    nothing by itself: what an adjudicator sees is decided per campaign."""
    pool = Q(pk__in=annotator_accounts(user).values("pk")) | Q(pk__in=researcher_accounts(user).values("pk"))
    # The campaign's own researchers settle its disputes without being named.
    pool &= ~Q(pk=getattr(user, "pk", None))
    return User.objects.filter((pool & Q(is_active=True)) | Q(pk__in=list(keep))).distinct().order_by("username")

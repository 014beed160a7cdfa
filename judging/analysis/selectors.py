"""ORM reads that feed the pure statistics: a handful of values_list queries per dataset, no per-row queries.

Scoping: the dashboard and API reach a dataset only through ``dataset_for_stats_or_404`` (the requesting
user's datasets); management commands run with operator rights and use ``annotations.selectors.dataset_by_name``.

A ``RatingScope`` picks which human ratings the statistics read: all of them, the imported raters' only, the app
raters' only, or the ratings one annotation campaign collected. Whatever the scope, the raters a researcher excluded
(annotations.quality) are left out unless the scope asks to include them, for comparison, and ratings of gold items
and attention checks never count: they measure the raters, not the dataset.

Every read of ratings and scores goes through one rating scope (origin, campaign, exclusions, gold, adjudication), and
`stats_version`, part of every report's cache key, must change with every row these reads see, the preferences of
`judging.analysis.preference_selectors` included (they are counted here).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Count, Exists, F, Max, OuterRef, Q, QuerySet, Sum
from django.db.models.functions import Length
from django.http import Http404
from django.utils.translation import gettext

from annotations.models import (
    Adjudication,
    Aspect,
    Assignment,
    AssignmentStatus,
    Campaign,
    Dataset,
    GoldItem,
    Rater,
    RaterExclusion,
    Rating,
    RatingOrigin,
    Response,
    Submission,
    System,
)
from annotations.selectors import campaigns_for_researcher, dataset_for_user_or_404, datasets_for_user
from judging.certification.selectors import standing_of_judge_ids
from judging.models import Judge, JudgeExemplar, JudgeRun, JudgeScore, Judgment, JudgmentStatus

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

ORIGINS = ("all", "imported", "app")
# The `excluded` parameter: leave the excluded raters out (the default) or include them for comparison.
EXCLUDED_CHOICES = ("leave-out", "include")
_RATING_ORIGINS = {"imported": RatingOrigin.IMPORT, "app": RatingOrigin.APP}


class ScopeError(ValueError):
    """A scope asked for with a value that names no scope; the message says which values exist."""


@dataclass(frozen=True)
class RatingScope:
    """Which ratings the statistics read. A campaign's scope holds only app ratings, so its origin is "app".
    `include_excluded` brings the excluded raters' ratings back in. `adjudicated` makes an answer's human score its
    adjudicated value where it has one (agreement always reads the raw ratings)."""

    origin: str = "all"
    campaign_id: int | None = None
    campaign_name: str | None = None
    include_excluded: bool = False
    adjudicated: bool = False
    # "none", or a rater model (judging.statistics.rater_models.MODELS) whose per-answer estimate is the human score.
    rater_model: str = "none"

    def as_json(self) -> dict[str, str | None]:
        found: dict[str, str | None] = {
            "origin": self.origin,
            "campaign": self.campaign_name,
            "human_score": "adjudicated" if self.adjudicated else "raw",
        }
        if self.rater_model != "none":
            found.update(human_score="rater-model", rater_model=self.rater_model)
        return found

    def cache_key(self) -> tuple[str, int | None, str | None, bool, bool, str]:
        # The name is part of the key because the reports print it: a renamed campaign must not show the old one.
        # Which raters are excluded is part of stats_version, so a new or revoked exclusion changes the key too.
        return (
            self.origin,
            self.campaign_id,
            self.campaign_name,
            self.include_excluded,
            self.adjudicated,
            self.rater_model,
        )

    def parameter(self) -> tuple[str, str]:
        """The one URL parameter that selects this scope's ratings (origin or campaign)."""
        if self.campaign_id is not None:
            return ("campaign", str(self.campaign_id))
        return ("origin", self.origin)

    def query(self) -> dict[str, str]:
        """The URL parameters that select this scope; none for the default (all ratings, exclusions applied)."""
        params = {} if replace(self, include_excluded=False) == ALL_RATINGS else dict([self.parameter()])
        if self.include_excluded:
            params["excluded"] = "include"
        if self.adjudicated:
            params["human"] = "adjudicated"
        return params

    def with_excluded(self, include: bool) -> RatingScope:
        return replace(self, include_excluded=include)

    def with_adjudicated(self, adjudicated: bool) -> RatingScope:
        return replace(self, adjudicated=adjudicated)

    def with_rater_model(self, model: str) -> RatingScope:
        return replace(self, rater_model=model)

    @property
    def label(self) -> str:
        if self.campaign_name is not None:
            text = gettext("Campaign: %(name)s") % {"name": self.campaign_name}
        else:
            text = {
                "imported": gettext("Imported raters only"),
                "app": gettext("App raters only"),
            }.get(self.origin, gettext("All ratings"))
        if self.include_excluded:
            text = gettext("%(scope)s, excluded raters included") % {"scope": text}
        if self.adjudicated:
            text = gettext("%(scope)s, adjudicated human scores") % {"scope": text}
        if self.rater_model != "none":
            text = gettext("%(scope)s, human scores from the %(model)s rater model") % {
                "scope": text,
                "model": self.rater_model,
            }
        return text


@dataclass(frozen=True)
class ExcludedRater:
    """A rater with an exclusion in force whose ratings the scope holds: left out unless the scope includes them."""

    rater_id: int
    pseudonym: str
    reason: str


def exclusions_json(scope: RatingScope, excluded: tuple[ExcludedRater, ...]) -> dict[str, Any]:
    """The scope as the reports state it: origin, campaign and which excluded raters it leaves out (or includes)."""
    return {
        **scope.as_json(),
        "exclusions": {
            "left_out": not scope.include_excluded,
            "raters": [{"rater": rater.pseudonym, "reason": rater.reason} for rater in excluded],
        },
    }


ALL_RATINGS = RatingScope()


@dataclass(frozen=True)
class AspectInfo:
    id: int
    name: str
    label: str
    level: str
    min_value: float
    max_value: float
    ideal: float


@dataclass(frozen=True)
class Answers:
    """Every answer of a dataset, sorted by response id; row i describes ``response_ids[i]``."""

    response_ids: IntArray
    turn_ids: IntArray
    system_keys: list[str]
    lengths: IntArray

    def rows_of(self, response_ids: IntArray) -> IntArray:
        return np.searchsorted(self.response_ids, response_ids).astype(np.int64)


@dataclass(frozen=True)
class RatingRows:
    """Non-missing ratings of a dataset; ``answer`` indexes ``Answers`` rows."""

    aspect_id: IntArray
    answer: IntArray
    rater_id: IntArray
    value: FloatArray
    rater_pseudonyms: dict[int, str]
    positional_raters: frozenset[int]
    # The excluded raters whose ratings this scope holds: left out of the rows above unless the scope includes them.
    excluded: tuple[ExcludedRater, ...] = field(default=())


def researcher_datasets(user: AbstractBaseUser | AnonymousUser) -> list[Dataset]:
    return list(datasets_for_user(user).order_by("name"))


def dataset_for_stats_or_404(user: AbstractBaseUser | AnonymousUser, pk: int) -> Dataset:
    return dataset_for_user_or_404(user, pk)


def rating_scope(
    origin: str | None = None, campaign: Campaign | None = None, *, include_excluded: bool = False
) -> RatingScope:
    """The scope of an origin (default "all") and an optional campaign, whose ratings are app ratings: asking for
    a campaign's imported ratings is a contradiction, not an empty scope."""
    chosen = origin or "all"
    if chosen not in ORIGINS:
        raise ScopeError(f"origin must be one of {', '.join(ORIGINS)}, not {chosen!r}")
    if campaign is None:
        return RatingScope(origin=chosen, include_excluded=include_excluded)
    if chosen == "imported":
        raise ScopeError("a campaign's ratings are app ratings: with a campaign, origin must be app or all")
    return RatingScope(
        origin="app", campaign_id=campaign.pk, campaign_name=campaign.name, include_excluded=include_excluded
    )


HUMAN_SCORE_CHOICES = ("raw", "adjudicated")


def adjudicated_choice(value: str | None) -> bool:
    """Whether the `human` parameter asks for adjudicated human scores; ScopeError for an unknown value."""
    chosen = value or "raw"
    if chosen not in HUMAN_SCORE_CHOICES:
        raise ScopeError(f"human must be one of {', '.join(HUMAN_SCORE_CHOICES)}, not {chosen!r}")
    return chosen == "adjudicated"


def stats_adjudicated(answers: Answers) -> dict[int, dict[int, float]]:
    """Per aspect id, the adjudicated value of each answer row that has one (the later one where an answer was
    adjudicated twice)."""
    found: dict[int, dict[int, float]] = {}
    rows = Adjudication.objects.filter(response_id__in=answers.response_ids.tolist()).order_by("created_at", "id")
    for response_id, aspect_id, value in rows.values_list("response_id", "aspect_id", "value"):
        row = int(answers.rows_of(np.asarray([response_id], dtype=np.int64))[0])
        found.setdefault(aspect_id, {})[row] = value
    return found


def excluded_choice(value: str | None) -> bool:
    """Whether the `excluded` parameter asks to include the excluded raters; ScopeError for an unknown value."""
    chosen = value or "leave-out"
    if chosen not in EXCLUDED_CHOICES:
        raise ScopeError(f"excluded must be one of {', '.join(EXCLUDED_CHOICES)}, not {chosen!r}")
    return chosen == "include"


def campaign_by_name(dataset: Dataset, name: str) -> Campaign | None:
    """For management commands (operator rights)."""
    return Campaign.objects.filter(dataset=dataset, name=name).first()


def stats_scopes(user: AbstractBaseUser | AnonymousUser, dataset: Dataset) -> list[RatingScope]:
    """Every scope the user may pick on this dataset: each origin, then each of its campaigns the user may see."""
    campaigns = campaigns_for_researcher(user).filter(dataset=dataset).order_by("name").values_list("pk", "name")
    return [RatingScope(origin=origin) for origin in ORIGINS] + [
        RatingScope(origin="app", campaign_id=pk, campaign_name=name) for pk, name in campaigns
    ]


def stats_campaign_or_404(user: AbstractBaseUser | AnonymousUser, dataset: Dataset, pk: int) -> Campaign:
    """A campaign of this dataset among the user's; any other id is not found, so its existence is not revealed."""
    campaign = campaigns_for_researcher(user).filter(dataset=dataset, pk=pk).first()
    if campaign is None:
        raise Http404("no such campaign on this dataset")
    return campaign


def scope_filter(scope: RatingScope) -> Q:
    """Ratings carry no campaign: a campaign's are the app ratings its submitted assignments produced, i.e. by the
    assignment's annotator, on an answer of the assignment's task and an aspect the campaign asks for. An annotator
    cannot rate the same answer and aspect in two campaigns, so no rating is claimed by two."""
    if scope.campaign_id is None:
        origin = _RATING_ORIGINS.get(scope.origin)
        return Q() if origin is None else Q(origin=origin)
    submitted = Assignment.objects.filter(
        campaign_id=scope.campaign_id,
        status=AssignmentStatus.SUBMITTED,
        annotator_id=OuterRef("rater__user_id"),
        task__responses=OuterRef("response_id"),
    )
    asked = Campaign.aspects.through.objects.filter(campaign_id=scope.campaign_id).values("aspect_id")
    return Q(origin=RatingOrigin.APP, aspect_id__in=asked) & Q(Exists(submitted))


def campaign_ratings(campaign: Campaign) -> QuerySet[Rating]:
    """The ratings a campaign collected, as its statistics read them: the app ratings its submitted assignments
    produced, the raters excluded now left out. An answer rated in another campaign of the dataset, or imported,
    is not this campaign's rating, whatever campaign its task also belongs to."""
    excluded = RaterExclusion.objects.filter(rater__dataset_id=campaign.dataset_id, revoked_at__isnull=True)
    return Rating.objects.filter(scope_filter(rating_scope(campaign=campaign))).exclude(
        rater_id__in=excluded.values("rater_id")
    )


def stats_aspects(dataset: Dataset) -> list[AspectInfo]:
    rows = (
        Aspect.objects.filter(dataset=dataset)
        .order_by("position", "id")
        .values_list("id", "name", "label", "level", "min_value", "max_value", "ideal")
    )
    return [AspectInfo(*row) for row in rows]


def stats_answers(dataset: Dataset) -> Answers:
    rows = list(
        Response.objects.filter(turn__item__dataset=dataset)
        .order_by("id")
        .values_list("id", "turn_id", "system__key", Length("text"))
    )
    return Answers(
        response_ids=np.asarray([row[0] for row in rows], dtype=np.int64),
        turn_ids=np.asarray([row[1] for row in rows], dtype=np.int64),
        system_keys=[row[2] for row in rows],
        lengths=np.asarray([row[3] or 0 for row in rows], dtype=np.int64),
    )


def exclusions_in_force(dataset: Dataset) -> list[tuple[int, int | None, str, str]]:
    """(rater id, the rater's account id, pseudonym, reason) of each rater of the dataset excluded now."""
    return list(
        RaterExclusion.objects.filter(rater__dataset=dataset, revoked_at__isnull=True)
        .order_by("rater__pseudonym")
        .values_list("rater_id", "rater__user_id", "rater__pseudonym", "reason")
    )


def excluded_raters_among(dataset: Dataset, present: set[int]) -> tuple[ExcludedRater, ...]:
    """The raters of `present` (rater ids) excluded now, in pseudonym order."""
    return tuple(
        ExcludedRater(rater_id=rater_id, pseudonym=pseudonym, reason=reason)
        for rater_id, _user_id, pseudonym, reason in exclusions_in_force(dataset)
        if rater_id in present
    )


def gold_response_ids(dataset: Dataset) -> list[int]:
    """The answers of the dataset's gold items and attention checks, whose ratings measure the raters."""
    return list(
        Response.objects.filter(turn__item__dataset=dataset, turn__item__gold__isnull=False).values_list(
            "id", flat=True
        )
    )


def stats_ratings(dataset: Dataset, answers: Answers, scope: RatingScope = ALL_RATINGS) -> RatingRows:
    aspect_ids = list(Aspect.objects.filter(dataset=dataset).values_list("id", flat=True))
    rows = list(
        Rating.objects.filter(aspect_id__in=aspect_ids, is_missing=False, value__isnull=False)
        .filter(scope_filter(scope))
        .values_list("aspect_id", "response_id", "rater_id", "value")
    )
    raters = list(Rater.objects.filter(dataset=dataset).values_list("id", "pseudonym", "is_positional"))
    table = np.asarray(rows, dtype=np.float64).reshape(-1, 4)
    gold = gold_response_ids(dataset)
    if gold:
        table = table[~np.isin(table[:, 1], np.asarray(gold, dtype=np.float64))]
    excluded = excluded_raters_among(dataset, set(np.unique(table[:, 2]).astype(np.int64).tolist()))
    if excluded and not scope.include_excluded:
        table = table[~np.isin(table[:, 2], np.asarray([rater.rater_id for rater in excluded], dtype=np.float64))]
    return RatingRows(
        aspect_id=table[:, 0].astype(np.int64),
        answer=answers.rows_of(table[:, 1].astype(np.int64)),
        rater_id=table[:, 2].astype(np.int64),
        value=table[:, 3],
        rater_pseudonyms={rater_id: pseudonym for rater_id, pseudonym, _ in raters},
        positional_raters=frozenset(rater_id for rater_id, _, positional in raters if positional),
        excluded=excluded,
    )


def system_models(dataset: Dataset) -> dict[str, str]:
    return dict(System.objects.filter(dataset=dataset).values_list("key", "model_name"))


def dataset_judges(dataset: Dataset) -> list[dict[str, Any]]:
    """The dataset's judges with their certification standing (certified, suspended or uncertified) and version."""
    rows: list[dict[str, Any]] = [
        dict(row)
        for row in Judge.objects.filter(dataset=dataset)
        .annotate(n_scores=Count("scores"), version=F("run__version__fingerprint"))
        .order_by("name")
        .values("id", "name", "kind", "n_scores", "created_at", "version")
    ]
    standing = standing_of_judge_ids([int(row["id"]) for row in rows])
    for row in rows:
        row["certification"] = standing[int(row["id"])]
    return rows


def judge_by_name(dataset: Dataset, name: str) -> Judge | None:
    return Judge.objects.filter(dataset=dataset, name=name).first()


def judge_scores(judge: Judge, answers: Answers) -> dict[str, FloatArray]:
    """Per aspect name, the judge's score for every answer row (NaN where it gave none)."""
    # Answers the judge's version shows as rated examples never count in its statistics.
    shown = JudgeExemplar.objects.filter(version__runs__judge=judge).values("response_id")
    scores = JudgeScore.objects.filter(judge=judge).exclude(response_id__in=shown)
    rows = list(scores.values_list("aspect_name", "response_id", "value"))
    by_aspect: dict[str, FloatArray] = {}
    for aspect_name in sorted({row[0] for row in rows}):
        by_aspect[aspect_name] = np.full(answers.response_ids.size, np.nan)
    if rows:
        names = [row[0] for row in rows]
        response_ids = np.asarray([row[1] for row in rows], dtype=np.int64)
        values = np.asarray([row[2] for row in rows], dtype=np.float64)
        answer_rows = answers.rows_of(response_ids)
        for aspect_name, column in by_aspect.items():
            selected = np.asarray([name == aspect_name for name in names])
            column[answer_rows[selected]] = values[selected]
    return by_aspect


def judge_error_spans(judge_id: int, aspect_name: str) -> dict[int, Any]:
    """The errors an error-span judge stored for each answer of an aspect (its first sample), by response id."""
    rows = Judgment.objects.filter(
        run__judge_id=judge_id, aspect_name=aspect_name, sample=0, status=JudgmentStatus.DONE, spans__isnull=False
    ).values_list("response_id", "spans")
    return dict(rows)


def answer_details(response_ids: list[int]) -> dict[int, dict[str, Any]]:
    """Prompt, answer text and item id of a few answers, for the drill-down."""
    rows = Response.objects.filter(id__in=response_ids).values_list(
        "id", "text", "turn__prompt", "turn__index", "turn__item__external_id", "system__key"
    )
    return {
        row[0]: {"text": row[1], "prompt": row[2], "turn": row[3], "item": row[4], "system": row[5]} for row in rows
    }


def stats_version(dataset: Dataset, scope: RatingScope = ALL_RATINGS) -> str:
    """Changes whenever a rating or a judge score of the dataset is added, edited or removed.

    Ratings carry ``updated_at``; judge scores have no timestamp, so their count, id range and value sum
    stand in for one. Aspect scales and levels, judge parameters (model, pairwise consistency) and system model
    names are included because they change the statistics too. A campaign's scope also depends on its submitted
    assignments and its aspects, which can change without any rating changing. Preferences come from submissions
    and, for imported ones, from the turns, which only an import writes.
    """
    judges = list(Judge.objects.filter(dataset=dataset).order_by("id").values_list("id", "name", "kind", "params"))
    systems = list(System.objects.filter(dataset=dataset).order_by("id").values_list("id", "key", "model_name"))
    aspects = list(
        Aspect.objects.filter(dataset=dataset)
        .order_by("id")
        .values_list("id", "name", "level", "min_value", "max_value", "ideal")
    )
    # By the ids read above, not joined to their tables (a third slower); the sum catches queryset.update() too.
    ratings = Rating.objects.filter(aspect_id__in=[row[0] for row in aspects]).aggregate(
        count=Count("id"), last_id=Max("id"), last_update=Max("updated_at"), total=Sum("value")
    )
    scores = JudgeScore.objects.filter(judge_id__in=[row[0] for row in judges]).aggregate(
        count=Count("id"), last_id=Max("id"), total=Sum("value")
    )
    # Preferences: submissions are only ever added; pairwise runs write their scores only when they finish, so
    # the judgments they have done so far stand in for them.
    submissions = Submission.objects.filter(assignment__campaign__dataset=dataset).aggregate(
        count=Count("id"),
        last_id=Max("id"),
        preferred=Sum("preferred_response_id"),
        none_appropriate=Count("id", filter=Q(none_appropriate=True)),
    )
    pairwise = list(
        JudgeRun.objects.filter(dataset=dataset, method="pairwise").order_by("id").values_list("id", "status", "done")
    )
    # Who is excluded and which items are gold change the statistics without any rating changing.
    exclusions = list(
        RaterExclusion.objects.filter(rater__dataset=dataset, revoked_at__isnull=True)
        .order_by("id")
        .values_list("id", "rater_id", "reason")
    )
    gold = sorted(GoldItem.objects.filter(item__dataset=dataset).values_list("item_id", flat=True))
    adjudicated = Adjudication.objects.filter(aspect__dataset=dataset).aggregate(
        count=Count("id"), last_id=Max("id"), total=Sum("value")
    )
    campaign: list[Any] = []
    if scope.campaign_id is not None:
        submitted = Assignment.objects.filter(campaign_id=scope.campaign_id, status=AssignmentStatus.SUBMITTED)
        asked = Campaign.aspects.through.objects.filter(campaign_id=scope.campaign_id)
        campaign = [
            submitted.aggregate(count=Count("id"), last=Max("submitted_at")),
            sorted(asked.values_list("aspect_id", flat=True)),
        ]
    payload = json.dumps(
        [ratings, scores, judges, aspects, systems, submissions, pairwise, exclusions, gold, adjudicated, *campaign],
        default=str,
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:24]


def stats_ratings_in_order(dataset: Dataset, scope: RatingScope) -> list[tuple[int, int, float]]:
    """The scope's ratings as (aspect id, response id, value) in the order they were given (the rating's creation,
    which is the submission of the task it belongs to), gold answers and, unless the scope includes them, the
    excluded raters left out as in ``stats_ratings``."""
    rows = Rating.objects.filter(aspect__dataset=dataset, is_missing=False, value__isnull=False).filter(
        scope_filter(scope)
    )
    gold = gold_response_ids(dataset)
    if gold:
        rows = rows.exclude(response_id__in=gold)
    if not scope.include_excluded:
        rows = rows.exclude(
            rater_id__in=RaterExclusion.objects.filter(rater__dataset=dataset, revoked_at__isnull=True).values(
                "rater_id"
            )
        )
    ordered = rows.order_by("created_at", "id").values_list("aspect_id", "response_id", "value")
    return [(int(aspect), int(response), float(value or 0.0)) for aspect, response, value in ordered]

"""ORM reads that feed the pure statistics: a handful of values_list queries per dataset, no per-row queries.

Scoping: the dashboard and API reach a dataset only through ``dataset_for_stats_or_404`` (the requesting
user's datasets); management commands run with operator rights and use ``dataset_by_name``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Count, Max, Sum
from django.db.models.functions import Length

from annotations.models import Aspect, Dataset, Rater, Rating, Response, System
from annotations.selectors import dataset_for_user_or_404, datasets_for_user
from judging.models import Judge, JudgeScore

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


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


def researcher_datasets(user: AbstractBaseUser | AnonymousUser) -> list[Dataset]:
    return list(datasets_for_user(user).order_by("name"))


def dataset_for_stats_or_404(user: AbstractBaseUser | AnonymousUser, pk: int) -> Dataset:
    return dataset_for_user_or_404(user, pk)


def dataset_by_name(name: str) -> Dataset | None:
    """For management commands (operator rights)."""
    return Dataset.objects.filter(name=name).first()


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


def stats_ratings(dataset: Dataset, answers: Answers) -> RatingRows:
    aspect_ids = list(Aspect.objects.filter(dataset=dataset).values_list("id", flat=True))
    rows = list(
        Rating.objects.filter(aspect_id__in=aspect_ids, is_missing=False, value__isnull=False).values_list(
            "aspect_id", "response_id", "rater_id", "value"
        )
    )
    raters = list(Rater.objects.filter(dataset=dataset).values_list("id", "pseudonym", "is_positional"))
    table = np.asarray(rows, dtype=np.float64).reshape(-1, 4)
    return RatingRows(
        aspect_id=table[:, 0].astype(np.int64),
        answer=answers.rows_of(table[:, 1].astype(np.int64)),
        rater_id=table[:, 2].astype(np.int64),
        value=table[:, 3],
        rater_pseudonyms={rater_id: pseudonym for rater_id, pseudonym, _ in raters},
        positional_raters=frozenset(rater_id for rater_id, _, positional in raters if positional),
    )


def system_models(dataset: Dataset) -> dict[str, str]:
    return dict(System.objects.filter(dataset=dataset).values_list("key", "model_name"))


def dataset_judges(dataset: Dataset) -> list[dict[str, Any]]:
    rows = (
        Judge.objects.filter(dataset=dataset)
        .annotate(n_scores=Count("scores"))
        .order_by("name")
        .values("id", "name", "kind", "n_scores", "created_at")
    )
    return [dict(row) for row in rows]


def judge_by_name(dataset: Dataset, name: str) -> Judge | None:
    return Judge.objects.filter(dataset=dataset, name=name).first()


def judge_scores(judge: Judge, answers: Answers) -> dict[str, FloatArray]:
    """Per aspect name, the judge's score for every answer row (NaN where it gave none)."""
    rows = list(JudgeScore.objects.filter(judge=judge).values_list("aspect_name", "response_id", "value"))
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


def answer_details(response_ids: list[int]) -> dict[int, dict[str, Any]]:
    """Prompt, answer text and item id of a few answers, for the drill-down."""
    rows = Response.objects.filter(id__in=response_ids).values_list(
        "id", "text", "turn__prompt", "turn__index", "turn__item__external_id", "system__key"
    )
    return {
        row[0]: {"text": row[1], "prompt": row[2], "turn": row[3], "item": row[4], "system": row[5]} for row in rows
    }


def stats_version(dataset: Dataset) -> str:
    """Changes whenever a rating or a judge score of the dataset is added, edited or removed.

    Ratings carry ``updated_at``; judge scores have no timestamp, so their count, id range and value sum
    stand in for one. Aspect scales and levels, judge parameters (model, pairwise consistency) and system model
    names are included because they change the statistics too.
    """
    # The value sum also catches queryset.update(), which leaves updated_at alone.
    ratings = Rating.objects.filter(aspect__dataset=dataset).aggregate(
        count=Count("id"), last_id=Max("id"), last_update=Max("updated_at"), total=Sum("value")
    )
    scores = JudgeScore.objects.filter(judge__dataset=dataset).aggregate(
        count=Count("id"), last_id=Max("id"), total=Sum("value")
    )
    judges = list(Judge.objects.filter(dataset=dataset).order_by("id").values_list("id", "name", "kind", "params"))
    systems = list(System.objects.filter(dataset=dataset).order_by("id").values_list("id", "key", "model_name"))
    aspects = list(
        Aspect.objects.filter(dataset=dataset)
        .order_by("id")
        .values_list("id", "name", "level", "min_value", "max_value", "ideal")
    )
    payload = json.dumps([ratings, scores, judges, aspects, systems], default=str, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:24]

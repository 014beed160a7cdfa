"""Storing the Rating rows of an answer through the ORM, for the portable submit and for corrections; the
one-statement submit inserts the same rows in its own SQL (annotations.campaigns.submissions)."""

from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError
from django.db.models import Max

from annotations.campaigns.answers import TaskAnswer, rating_values
from annotations.campaigns.errors import already_rated
from annotations.models import Campaign, Rating, RatingOrigin, Submission
from annotations.rubrics.task_sheet import Candidate, Scale
from annotations.services import error_spans_write, rater_for_user


def ratings_store(
    *,
    campaign: Campaign,
    user: User,
    candidates: list[Candidate],
    scales: list[Scale],
    answer: TaskAnswer,
    submission: Submission,
) -> None:
    entered = rating_values(candidates=candidates, scales=scales, answer=answer)
    ratings_insert(rater=rater_for_user(dataset=campaign.dataset, user=user), entered=entered, submission=submission)


def ratings_insert(
    *, rater: Any, entered: list[tuple[int, int, Any, float | None, bool]], submission: Submission
) -> None:
    response_ids = {row[0] for row in entered}
    aspect_ids = {row[1] for row in entered}
    # App ratings go after every existing rating of the same answer and aspect, as extra raters on export.
    next_position = {
        (row["response_id"], row["aspect_id"]): row["top"] + 1
        for row in Rating.objects.filter(response_id__in=response_ids, aspect_id__in=aspect_ids)
        .values("response_id", "aspect_id")
        .annotate(top=Max("position"))
    }
    rows = [
        Rating(
            response_id=response_id,
            aspect_id=aspect_id,
            rater=rater,
            position=next_position.get((response_id, aspect_id), 0),
            raw=raw,
            value=value,
            is_missing=is_missing,
            rationale=submission.rationale,
            comment=submission.comment,
            seconds_spent=submission.seconds_spent,
            origin=RatingOrigin.APP,
        )
        for response_id, aspect_id, raw, value, is_missing in entered
    ]
    try:
        # No savepoint: a failure here aborts the whole submission, which is what the caller's atomic block wants.
        Rating.objects.bulk_create(rows)
        error_spans_write(ratings=[rating for rating in rows if isinstance(rating.raw, dict)])
    except IntegrityError:
        # The annotator already rated one of these answers (in another campaign on the same dataset).
        raise already_rated() from None

"""Rating writes: a person's pseudonymous rater in a dataset, and a rating checked against its aspect's scale. The
campaign writes store their ratings through these rules."""

import secrets

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from annotations.errors import RatingOutOfRange
from annotations.models import Aspect, Dataset, ErrorSpan, Rater, Rating, RatingOrigin, Response
from annotations.rubrics.specs import AspectSpec, is_json_number


def aspect_spec(aspect: Aspect) -> AspectSpec:
    return AspectSpec(
        name=aspect.name,
        min_value=aspect.min_value,
        max_value=aspect.max_value,
        ideal=aspect.ideal,
        level=aspect.level,
        label=aspect.label,
        description=aspect.description,
        labels=aspect.labels,
        missing=aspect.missing,
        kind=aspect.kind,
        span_scheme=aspect.scheme if aspect.is_spans else None,
    )


def rating_value_from_token(*, aspect: Aspect, raw: object) -> tuple[float | None, bool]:
    """(value, is_missing) for a token, or RatingOutOfRange naming the aspect and its scale."""
    spec = aspect_spec(aspect)
    if spec.is_missing_token(raw):
        return None, True
    if is_json_number(raw) and spec.min_value <= raw <= spec.max_value:  # type: ignore[operator]
        return float(raw), False  # type: ignore[arg-type]
    raise RatingOutOfRange(f"{aspect.display_label}: expected {spec.describe_range()}, found {raw!r}")


def rater_for_user(*, dataset: Dataset, user: User) -> Rater:
    """The pseudonymous rater standing for an app user in one dataset; the pseudonym hides the account name."""
    existing = Rater.objects.filter(dataset=dataset, user=user).first()
    if existing is not None:
        return existing
    for _ in range(5):
        pseudonym = f"annotator-{secrets.token_hex(4)}"
        try:
            with transaction.atomic():
                return Rater.objects.create(dataset=dataset, user=user, pseudonym=pseudonym)
        except IntegrityError:
            existing = Rater.objects.filter(dataset=dataset, user=user).first()
            if existing is not None:
                return existing
    raise RuntimeError("could not allocate a unique rater pseudonym")


def rating_create(
    *,
    response: Response,
    aspect: Aspect,
    rater: Rater,
    raw: object,
    rationale: str = "",
    comment: str = "",
    seconds_spent: float | None = None,
    origin: str = RatingOrigin.APP,
) -> Rating:
    if aspect.dataset_id != rater.dataset_id or response.system.dataset_id != aspect.dataset_id:
        raise RatingOutOfRange("the answer, aspect and rater must belong to the same dataset")
    value, is_missing = rating_value_from_token(aspect=aspect, raw=raw)
    if seconds_spent is not None and seconds_spent < 0:
        raise RatingOutOfRange("seconds spent cannot be negative")
    position = 1 + max(
        Rating.objects.filter(response=response, aspect=aspect).values_list("position", flat=True), default=-1
    )
    return Rating.objects.create(
        response=response,
        aspect=aspect,
        rater=rater,
        position=position,
        raw=raw,
        value=value,
        is_missing=is_missing,
        rationale=rationale,
        comment=comment,
        seconds_spent=seconds_spent,
        origin=origin,
    )


def error_spans_write(*, ratings: list[Rating]) -> None:
    """Makes the ErrorSpan rows of these ratings what their raw tokens say: a span aspect's token is
    {"no_error": ..., "spans": [{"start", "end", "category", "severity", "note"?}]} in code points, already checked
    against the answer (annotations.spans.answers). A rating whose token holds no spans keeps none."""
    ErrorSpan.objects.filter(rating__in=[rating.pk for rating in ratings]).delete()
    rows = [
        ErrorSpan(
            rating_id=rating.pk,
            position=position,
            start=entry.get("start"),
            end=entry.get("end"),
            source_start=entry.get("source_start"),
            source_end=entry.get("source_end"),
            category=entry["category"],
            severity=entry["severity"],
            note=entry.get("note", ""),
        )
        for rating in ratings
        if isinstance(rating.raw, dict)
        for position, entry in enumerate(rating.raw.get("spans") or [])
    ]
    ErrorSpan.objects.bulk_create(rows)

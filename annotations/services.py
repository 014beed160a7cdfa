import secrets
from collections.abc import Iterable

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from annotations.errors import DatasetEditError, RatingOutOfRange
from annotations.models import Aspect, Dataset, Rater, Rating, RatingOrigin, Response
from annotations.rubrics import AspectSpec, is_json_number


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


def _check_text(text: str, what: str) -> None:
    # Postgres text cannot hold U+0000 and UTF-8 output cannot hold lone surrogates; the importer refuses both.
    if "\x00" in text:
        raise DatasetEditError(f"{what} contains a NUL character")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise DatasetEditError(f"{what} contains an unpaired surrogate") from None


def dataset_update(*, dataset: Dataset, name: str, owner: User | None, members: Iterable[User]) -> Dataset:
    """Renames a dataset and sets who owns and shares it, with the importer's rules for names. Only researchers
    (staff) can own or share: a dataset shared with anyone else would be seen by no one new."""
    if not name or len(name) > 200:
        raise DatasetEditError(f"invalid dataset name: expected 1 to 200 characters, found {name!r}")
    _check_text(name, "the dataset name")
    if Dataset.objects.filter(owner=owner, name=name).exclude(pk=dataset.pk).exists():
        # Names are unique per owner; the message names no one, so it says nothing of datasets outside the
        # requester's scope beyond what the refusal itself must.
        raise DatasetEditError(f"its owner already has another dataset named {name!r}; choose another name")
    chosen = list(members)
    # Only newcomers are checked: a dataset whose owner left can still be renamed.
    present = {dataset.owner_id, *dataset.members.values_list("pk", flat=True)}
    for user in [owner, *chosen]:
        if user is not None and user.pk not in present and not (user.is_active and user.is_staff):
            raise DatasetEditError(f"{user.get_username()} is not an active researcher account")
    with transaction.atomic():
        dataset.name = name
        dataset.owner = owner
        dataset.save(update_fields=["name", "owner"])
        dataset.members.set(chosen)
    return dataset


def dataset_delete(*, dataset: Dataset) -> None:
    """Deletes a dataset with everything under it (items, answers, raters, ratings, campaigns, judges, runs)."""
    with transaction.atomic():
        dataset.delete()

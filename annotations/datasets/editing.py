"""Editing a dataset as a whole: renaming it, setting who owns and shares it, and deleting it with everything under
it. Names follow the importer's rules."""

from collections.abc import Iterable

from django.contrib.auth.models import User
from django.db import transaction

from annotations.errors import DatasetEditError
from annotations.models import AnswerFormat, Dataset
from annotations.text.storable import NUL, unstorable_character


def _check_text(text: str, what: str) -> None:
    bad = unstorable_character(text)
    if bad == NUL:
        raise DatasetEditError(f"{what} contains a NUL character")
    if bad:
        raise DatasetEditError(f"{what} contains an unpaired surrogate")


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


def dataset_answer_format_set(*, dataset: Dataset, answer_format: str) -> Dataset:
    """Chooses how the dataset's answers are shown on the task page, the campaign builder's preview and the item
    page: plain text or Markdown, line breaks kept in both."""
    if answer_format not in AnswerFormat.values:
        raise DatasetEditError(
            f"unknown answer format {answer_format!r}: expected one of {', '.join(AnswerFormat.values)}"
        )
    dataset.answer_format = answer_format
    dataset.save(update_fields=["answer_format"])
    return dataset


def dataset_delete(*, dataset: Dataset) -> None:
    """Deletes a dataset with everything under it (items, answers, raters, ratings, campaigns, judges, runs)."""
    with transaction.atomic():
        dataset.delete()

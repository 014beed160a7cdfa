"""Finding a dataset by name from the command line, where names are unique per owner only."""

from django.core.management.base import CommandError, CommandParser

from annotations.models import Dataset
from annotations.selectors import DatasetLookupError, dataset_by_name


def add_owner_argument(parser: CommandParser) -> None:
    parser.add_argument(
        "--owner", help="username of the dataset's owner, needed when several owners have a dataset of that name"
    )


def dataset_or_error(name: str, owner: object = None) -> Dataset:
    try:
        return dataset_by_name(name, str(owner) if owner is not None else None)
    except DatasetLookupError as exc:
        raise CommandError(str(exc)) from None

"""The --owner option of the import commands."""

from django.contrib.auth.models import User
from django.core.management.base import CommandError


def owner_option(username: object) -> User | None:
    """The user an import names as the dataset's owner, None when it names none; CommandError for an unknown name."""
    if not username:
        return None
    owner = User.objects.filter(username=username).first()
    if owner is None:
        raise CommandError(f"no user named {username!r}")
    return owner

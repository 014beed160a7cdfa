from collections.abc import Iterable

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, User
from django.db.models import Q, QuerySet
from django.shortcuts import get_object_or_404

from annotations.models import Dataset


def datasets_for_user(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Dataset]:
    """Datasets a researcher may see: all for superusers, owned or shared for staff, none for anyone else."""
    if not user.is_authenticated or not getattr(user, "is_staff", False):
        return Dataset.objects.none()
    if getattr(user, "is_superuser", False):
        return Dataset.objects.all()
    return Dataset.objects.filter(Q(owner=user) | Q(members=user)).distinct()


def dataset_for_user_or_404(user: AbstractBaseUser | AnonymousUser, pk: int) -> Dataset:
    return get_object_or_404(datasets_for_user(user), pk=pk)


def dataset_by_name(name: str) -> Dataset:
    """For management commands, which run with operator rights."""
    return Dataset.objects.get(name=name)


def researcher_accounts() -> QuerySet[User]:
    """Accounts a dataset can be owned by or shared with: only staff see datasets at all."""
    return User.objects.filter(is_active=True, is_staff=True).order_by("username")


def annotator_accounts(*, keep: Iterable[int] = ()) -> QuerySet[User]:
    """Accounts offered for an annotation pool: active annotators (not researchers or operators), plus whoever is
    already in the pool, so saving a pool someone filled from the command line does not drop them."""
    return User.objects.filter(Q(is_active=True, is_staff=False) | Q(pk__in=list(keep))).order_by("username")

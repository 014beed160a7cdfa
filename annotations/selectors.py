from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
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

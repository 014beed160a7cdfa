from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, Group, User
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q, QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404

from annotations.models import Campaign, Dataset, ErrorSpan, Rating, Task
from annotations.roles import ROLE_GROUPS, AnyUser
from annotations.spans.error_spans import Span


def datasets_for_user(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Dataset]:
    """Datasets a researcher may see: all for superusers, owned or shared for staff, none for anyone else."""
    if not user.is_authenticated or not getattr(user, "is_staff", False):
        return Dataset.objects.none()
    if getattr(user, "is_superuser", False):
        return Dataset.objects.all()
    return Dataset.objects.filter(Q(owner=user) | Q(members=user)).distinct()


def dataset_for_user_or_404(user: AbstractBaseUser | AnonymousUser, pk: int) -> Dataset:
    return get_object_or_404(datasets_for_user(user), pk=pk)


class DatasetLookupError(LookupError):
    pass


def dataset_by_name(name: str, owner: str | None = None) -> Dataset:
    """For management commands, which run with operator rights. Names are unique per owner, so a name that
    several owners use is refused until the owner's username settles it, rather than picking one of them."""
    datasets = Dataset.objects.filter(name=name).select_related("owner").order_by("owner__username", "pk")
    if owner is not None:
        datasets = datasets.filter(owner__username=owner)
    found = list(datasets[:10])
    if not found:
        whose = f" owned by {owner!r}" if owner is not None else ""
        raise DatasetLookupError(f"no dataset named {name!r}{whose}")
    if len(found) > 1:
        owners = ", ".join(d.owner.get_username() if d.owner else "(no owner)" for d in found)
        raise DatasetLookupError(
            f"several datasets are named {name!r} (owners: {owners}); choose one with --owner USERNAME"
        )
    return found[0]


def _in_pool_of(user: AbstractBaseUser | AnonymousUser) -> Q:
    """The people a researcher works with: those an operator put in one of the researcher's groups, and those who
    already rate, own or share a dataset the researcher sees. Offering every account instead would show every
    researcher every username on the site. A role group (researchers, adjudicators) holds everyone with the role,
    so it is no pool."""
    visible = datasets_for_user(user)
    groups = user.groups.exclude(name__in=ROLE_GROUPS) if isinstance(user, User) else Group.objects.none()
    return (
        Q(groups__in=groups)
        | Q(annotation_campaigns__dataset__in=visible)
        | Q(fact_review_campaigns__run__dataset__in=visible)
        | Q(owned_datasets__in=visible)
        | Q(shared_datasets__in=visible)
    )


def _offered(user: AbstractBaseUser | AnonymousUser, accounts: Q, keep: Iterable[int]) -> QuerySet[User]:
    if not getattr(user, "is_superuser", False):
        pool = User.objects.filter(_in_pool_of(user)).values("pk")
        accounts &= Q(pk__in=pool) | Q(pk=user.pk)
    return User.objects.filter(accounts | Q(pk__in=list(keep))).order_by("username")


def researcher_accounts(user: AbstractBaseUser | AnonymousUser, *, keep: Iterable[int] = ()) -> QuerySet[User]:
    """Accounts a dataset can be owned by or shared with (only staff see datasets at all): every researcher for a
    superuser, the researcher's own pool for anyone else."""
    return _offered(user, Q(is_active=True, is_staff=True), keep)


def annotator_accounts(user: AbstractBaseUser | AnonymousUser, *, keep: Iterable[int] = ()) -> QuerySet[User]:
    """Accounts offered for an annotation pool: active annotators (not researchers or operators) in the
    requester's pool (every one for a superuser), plus whoever is already in the pool, so saving a pool someone
    filled from the command line does not drop them."""
    return _offered(user, Q(is_active=True, is_staff=False), keep)


def campaigns_for_researcher(user: AnyUser) -> QuerySet[Campaign]:
    return Campaign.objects.filter(dataset__in=datasets_for_user(user)).select_related("dataset").order_by("name")


def campaign_for_researcher(user: AnyUser, pk: int) -> Campaign:
    """403 for anyone who is not a researcher, 404 for a campaign outside the researcher's datasets."""
    if not user.is_authenticated or not getattr(user, "is_staff", False):
        raise PermissionDenied("researcher access is required")
    campaign = campaigns_for_researcher(user).filter(pk=pk).first()
    if campaign is None:
        raise Http404("no such campaign")
    return campaign


def human_error_spans(*, aspect_id: int) -> dict[tuple[int, int], list[Span]]:
    """Every rater's error spans on every answer of one span aspect, by (response id, rater id), in marking order.

    An answer a rater rated without marking an error (a "no error" confirmation) maps to an empty list, so agreement
    counts it as a rater who found nothing; a rating left missing is absent.
    """
    found: dict[tuple[int, int], list[Span]] = {
        key: []
        for key in Rating.objects.filter(aspect_id=aspect_id, is_missing=False)
        .order_by("response_id", "rater_id")
        .values_list("response_id", "rater_id")
    }
    rows = (
        ErrorSpan.objects.filter(rating__aspect_id=aspect_id, rating__is_missing=False)
        .order_by("rating__response_id", "rating__rater_id", "position")
        .values_list("rating__response_id", "rating__rater_id", "start", "end", "category", "severity")
    )
    for response_id, rater_id, start, end, category, severity in rows:
        found[(response_id, rater_id)].append(Span(start, end, category, severity))
    return found


def shown_system_keys(task_ids: Iterable[int]) -> defaultdict[int, list[str]]:
    """The system keys of each task's answers in the order the task showed them; a task not asked for has none."""
    shown: defaultdict[int, list[str]] = defaultdict(list)
    for task_id, key in (
        Task.responses.through.objects.filter(task_id__in=task_ids)
        .order_by("task_id", "response__position")
        .values_list("task_id", "response__system__key")
    ):
        shown[task_id].append(key)
    return shown


def counts_by(rows: QuerySet[Any], field: str) -> dict[Any, int]:
    """How many of the rows have each value of `field` (values no row has are absent), in one grouped query."""
    return dict(rows.values(field).annotate(n=Count("pk")).values_list(field, "n"))

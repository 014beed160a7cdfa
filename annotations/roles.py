"""Who is a researcher: a staff account in the "Researchers" group; who is an adjudicator: an account in the
"Adjudicators" group.

The group holds every permission of the research apps (datasets, campaigns, judge configs and runs, corpora, fact
reviews). Rows stay scoped by the admin classes and selectors: a permission lets a researcher add a dataset or open a
campaign at all, ownership decides which rows they see. A site administrator makes someone a researcher by ticking
"staff status" and adding them to the group, or with ``manage.py create_researcher``.

An adjudicator settles the disputed tasks of the campaigns whose adjudication rule names them; the group holds no
permission, because what an adjudicator may open is decided per campaign, never by the admin.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, Group, Permission, User
from django.db import DEFAULT_DB_ALIAS, transaction

# The requesting user as a view has it: signed in, or not.
AnyUser = AbstractBaseUser | AnonymousUser

RESEARCHERS_GROUP = "Researchers"
ADJUDICATORS_GROUP = "Adjudicators"
RESEARCH_APPS = ("annotations", "judging")
# Groups that stand for a role rather than a team: they hold everyone with the role, so they are nobody's pool.
ROLE_GROUPS = (RESEARCHERS_GROUP, ADJUDICATORS_GROUP)


def researchers_group_sync(*, using: str = DEFAULT_DB_ALIAS, **_: Any) -> Group:
    """Creates the group and gives it every permission of the research apps; run after each migrate, so a model
    added later is covered without a hand-written grant."""
    group, _created = Group.objects.using(using).get_or_create(name=RESEARCHERS_GROUP)
    group.permissions.add(*Permission.objects.using(using).filter(content_type__app_label__in=RESEARCH_APPS))
    return group


@transaction.atomic
def researcher_grant(*, user: User) -> User:
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    user.groups.add(researchers_group_sync())
    return user


@transaction.atomic
def adjudicator_grant(*, user: User) -> User:
    group, _created = Group.objects.get_or_create(name=ADJUDICATORS_GROUP)
    user.groups.add(group)
    return user


def is_adjudicator(user: Any) -> bool:
    return bool(getattr(user, "is_authenticated", False) and user.groups.filter(name=ADJUDICATORS_GROUP).exists())

"""Who is a researcher: a staff account in the "Researchers" group.

The group holds every permission of the research apps (datasets, campaigns, judge configs and runs, corpora, fact
reviews). Rows stay scoped by the admin classes and selectors: a permission lets a researcher add a dataset or open a
campaign at all, ownership decides which rows they see. A site administrator makes someone a researcher by ticking
"staff status" and adding them to the group, or with ``manage.py create_researcher``.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group, Permission, User
from django.db import DEFAULT_DB_ALIAS, transaction

RESEARCHERS_GROUP = "Researchers"
RESEARCH_APPS = ("annotations", "judging")


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

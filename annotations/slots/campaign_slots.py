"""Where annotation campaigns keep their slots for the slot engine (annotations.slots), and the one rule that bars a
person from a task: they already rated one of its answers on one of the campaign's aspects.

A module of its own, below the campaign selectors, so that the crowd-study packages (gold, quality) can use the pool
without importing the campaign selectors, which read gold items to serve them."""

# The rule is assembled from table and column names read from model metadata, never from input.
# ruff: noqa: S608

import functools

from django.db.models import BooleanField
from django.db.models.expressions import RawSQL

from annotations.models import Assignment, Campaign, Rater, Rating, Skip, Task
from annotations.slots.rules import SlotPool


@functools.cache
def _rated_before_template() -> str:
    shown = Task._meta.get_field("responses")
    asked = Campaign._meta.get_field("aspects")
    return (
        f"EXISTS (SELECT 1 FROM {shown.m2m_db_table()} shown"  # type: ignore[union-attr]  # nosec B608 - model-metadata names, bound values
        f" JOIN {Rating._meta.db_table} rated ON rated.response_id = shown.{shown.m2m_reverse_name()}"  # type: ignore[union-attr]
        f" JOIN {Rater._meta.db_table} rater ON rater.id = rated.rater_id"
        f" JOIN {asked.m2m_db_table()} asked ON asked.{asked.m2m_reverse_name()} = rated.aspect_id"  # type: ignore[union-attr]
        f" WHERE shown.{shown.m2m_column_name()} = {{task}} AND rater.user_id = {{user}}"  # type: ignore[union-attr]
        f" AND asked.{asked.m2m_column_name()} = {{campaign}})"  # type: ignore[union-attr]
    )


def rated_before_sql(task: str, *, user: str = "%(user)s", campaign: str = "%(campaign)s") -> str:
    """True when the user's rater already holds a rating of one of the task's answers on one of the campaign's
    aspects. A rater keeps one rating per answer and aspect across every campaign of a dataset (a database
    constraint), so such a task could never be submitted: the claim never hands it out, an open lease on it is given
    back, and the submit refuses it, all by this one condition. `task` is an SQL expression for the task id."""
    return _rated_before_template().format(task=task, user=user, campaign=campaign)


def rated_before_expression(*, campaign: Campaign, user_id: int, task_column: str) -> RawSQL:
    """The rule above as an ORM expression, for a queryset whose table has the task id in `task_column` (a
    "table.column" read from model metadata), so a read the caller makes anyway answers it too."""
    rule = rated_before_sql(task_column, user="%s", campaign="%s")
    return RawSQL(rule, (user_id, campaign.pk), output_field=BooleanField())  # noqa: S611  # nosec B611 - metadata names, bound values


def tasks_open_to(*, campaign: Campaign, user_id: int) -> RawSQL:
    """The rule above as a filter on a Task queryset (true for the tasks the user may still rate)."""
    rule = rated_before_sql(f"{Task._meta.db_table}.id", user="%s", campaign="%s")
    return RawSQL(f"NOT {rule}", (user_id, campaign.pk), output_field=BooleanField())  # noqa: S611  # nosec B611 - metadata names, bound values


# Gold tasks get a personal slot per annotator they are handed to (annotations.gold.selectors decides when).
CAMPAIGN_SLOTS = SlotPool(
    campaign=Campaign,
    task=Task,
    slot=Assignment,
    skip=Skip,
    personal="is_gold",
    barred=rated_before_sql("{task}"),
    opens="opens_at",
    closes="closes_at",
    stopped="stopped_at",
)

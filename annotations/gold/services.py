"""Writes for gold items and attention checks: marking an item, changing what it expects, unmarking it.

Marking after a campaign was built: the item's tasks in that campaign become gold tasks (their N rater slots go,
each annotator gets a personal slot when their queue reaches gold) as long as nobody holds or submitted one of those
slots yet; once someone did, marking is refused, because those ratings were collected as ratings of the dataset.
Unmarking is the same in reverse: refused once anyone was handed the gold task, otherwise the tasks get their N
slots back.
"""

from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils.translation import gettext as _

from annotations.gold.rules import gold_problem, gold_spec
from annotations.models import Aspect, AspectKind, Assignment, GoldItem, Item, Response, Task
from annotations.roles import AnyUser
from annotations.selectors import datasets_for_user
from annotations.slots import slots_build
from annotations.slots.campaign_slots import CAMPAIGN_SLOTS
from annotations.spans.schemes import SpanScheme


class GoldError(ValueError):
    """A gold item cannot be stored or removed as asked; `field` names the part of the gold field at fault."""

    def __init__(self, message: str, *, field: str = "") -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message


def item_systems(item: Item) -> list[str]:
    """The keys of the systems that answered the item, in the dataset's order."""
    return list(
        Response.objects.filter(turn__item=item)
        .order_by("system__position")
        .values_list("system__key", flat=True)
        .distinct()
    )


def dataset_aspect_ranges(dataset_id: int) -> dict[str, tuple[float, float]]:
    return {
        name: (low, high)
        for name, low, high in Aspect.objects.filter(dataset_id=dataset_id)
        .order_by("position", "pk")
        .values_list("name", "min_value", "max_value")
    }


def dataset_span_schemes(dataset_id: int) -> dict[str, SpanScheme]:
    """The span aspects of the dataset by name, with their schemes: the aspects whose gold may be expected spans."""
    return {
        name: SpanScheme.from_json(scheme)
        for name, scheme in Aspect.objects.filter(dataset_id=dataset_id, kind=AspectKind.SPANS).values_list(
            "name", "span_scheme"
        )
    }


def item_answer_texts(item: Item) -> dict[str, str]:
    """Each system's answer text when the item has one turn (expected spans point into it); empty otherwise."""
    rows = list(Response.objects.filter(turn__item=item).values_list("turn_id", "system__key", "text"))
    if len({turn_id for turn_id, _key, _text in rows}) != 1:
        return {}
    return {key: text for _turn, key, text in rows}


def _check_access(item: Item, by: AnyUser) -> None:
    if not datasets_for_user(by).filter(pk=item.dataset_id).exists():
        raise GoldError(_("This item is not in one of your datasets."))


def _item_tasks(item: Item, *, is_gold: bool) -> list[Task]:
    return list(
        Task.objects.select_for_update(of=("self",)).filter(turn__item=item, is_gold=is_gold).select_related("campaign")
    )


def _handed_out(tasks: list[Task]) -> Task | None:
    """The first of the tasks whose slot somebody holds or submitted, if any. Locks every slot of the tasks, so a
    claim racing this change waits for it and then finds the slot gone."""
    slots = Assignment.objects.select_for_update().filter(task__in=tasks).values_list("task_id", "annotator_id")
    held = {task_id for task_id, annotator_id in slots if annotator_id is not None}
    return next((task for task in tasks if task.pk in held), None)


def gold_item_set(
    *, item: Item, kind: str, expected: Any, tolerance: Any = 0, instruction: Any = "", by: User
) -> GoldItem:
    """Marks the item as a gold item or an attention check, or changes what it expects. GoldError names the
    problem; nothing is written then."""
    _check_access(item, by)
    fields: dict[str, Any] = {"kind": kind, "expected": expected, "tolerance": tolerance}
    if instruction:
        fields["instruction"] = instruction
    problem = gold_problem(
        fields,
        systems=item_systems(item),
        aspects=dataset_aspect_ranges(item.dataset_id),
        schemes=dataset_span_schemes(item.dataset_id),
        texts=item_answer_texts(item),
    )
    if problem is not None:
        raise GoldError(
            _("expected %(expected)s, found %(found)s") % {"expected": problem.expected, "found": problem.found},
            field=problem.field,
        )
    spec = gold_spec(fields)
    with transaction.atomic():
        regular = _item_tasks(item, is_gold=False)
        started = _handed_out(regular)
        if started is not None:
            raise GoldError(
                _(
                    "Campaign %(campaign)s already handed out this item as a regular task; its ratings count as "
                    "the dataset's, so it cannot become gold there."
                )
                % {"campaign": started.campaign.name}
            )
        if regular:
            Assignment.objects.filter(task__in=regular).delete()
            Task.objects.filter(pk__in=[task.pk for task in regular]).update(is_gold=True)
        values = {
            "kind": spec.kind,
            "expected": spec.expected,
            "tolerance": spec.tolerance,
            "instruction": spec.instruction,
        }
        gold, _created = GoldItem.objects.update_or_create(
            item=item, defaults=values, create_defaults={**values, "created_by": by}
        )
    return gold


def gold_item_remove(*, item: Item, by: User) -> None:
    """Unmarks the item: its tasks become regular ones with N rater slots again. Refused once a campaign handed its
    gold task to anyone, whose answers measure them and would otherwise turn into ratings of the dataset."""
    _check_access(item, by)
    with transaction.atomic():
        gold_tasks = _item_tasks(item, is_gold=True)
        started = _handed_out(gold_tasks)
        if started is not None:
            raise GoldError(
                _("Campaign %(campaign)s already handed out this gold item; it stays gold.")
                % {"campaign": started.campaign.name}
            )
        # Personal slots left free by a skip or a release belong to nobody; the task gets N ordinary ones instead.
        Assignment.objects.filter(task__in=gold_tasks).delete()
        Task.objects.filter(pk__in=[task.pk for task in gold_tasks]).update(is_gold=False)
        for task in gold_tasks:
            task.is_gold = False
            slots_build(
                pool=CAMPAIGN_SLOTS, campaign=task.campaign, tasks=[task], per_task=task.campaign.raters_per_item
            )
        GoldItem.objects.filter(item=item).delete()

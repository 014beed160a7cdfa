"""Creating and changing campaigns: their tasks, the N rater slots of each, and the annotator pool.

Every turn of the dataset becomes one task, or several when the campaign sets `candidates_per_task` K (the turn's
answers are shuffled with the campaign seed, then cut into chunks of at most K, so a chunk mixes systems instead of
always pairing the same neighbours). Each task gets exactly N rater slots (`Assignment` rows, slot 1..N). The tasks
are put in one seeded random order (`Task.position`) shared by all annotators: random, so that a campaign stopped
early is still a random sample of the dataset rather than its first, often homogeneous, part; shared, so that
annotators converge on the same tasks."""

import secrets
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from annotations.campaigns.errors import CampaignError
from annotations.campaigns.settings import (
    MAX_CANDIDATES_PER_TASK,
    MAX_RATERS_PER_ITEM,
    CampaignSettings,
    CampaignSettingsError,
    check_storable,
)
from annotations.models import Aspect, AssignmentDraft, Campaign, Dataset, Response, Task, Turn
from annotations.slots import hand_out_order, seeded_random, slots_build, slots_release_outside_pool
from annotations.slots.campaign_slots import CAMPAIGN_SLOTS


def _resolve_aspects(dataset: Dataset, aspects: Iterable[Aspect | str] | None) -> list[Aspect]:
    available = list(dataset.aspects.order_by("position", "pk"))
    if aspects is None:
        if not available:
            raise CampaignError(f"dataset {dataset.name!r} has no aspects to rate")
        return available
    by_name = {a.name: a for a in available}
    chosen: list[Aspect] = []
    for wanted in aspects:
        if isinstance(wanted, Aspect):
            if wanted.dataset_id != dataset.pk:
                raise CampaignError(f"aspect {wanted.name!r} belongs to another dataset")
            chosen.append(wanted)
        elif wanted in by_name:
            chosen.append(by_name[wanted])
        else:
            raise CampaignError(f"dataset {dataset.name!r} has no aspect {wanted!r}; it has {', '.join(by_name)}")
    if not chosen:
        raise CampaignError("a campaign needs at least one aspect")
    return chosen


def _resolve_users(annotators: Iterable[User | str]) -> list[User]:
    users: list[User] = []
    for entry in annotators:
        if isinstance(entry, User):
            users.append(entry)
            continue
        user = User.objects.filter(username=entry).first()
        if user is None:
            raise CampaignError(f"no user named {entry!r}")
        users.append(user)
    return users


def campaign_create(
    *,
    name: str,
    dataset: Dataset,
    raters_per_item: int = 3,
    candidates_per_task: int | None = None,
    annotators: Iterable[User | str] = (),
    aspects: Iterable[Aspect | str] | None = None,
    created_by: User | None = None,
    **options: Any,
) -> Campaign:
    """Opens a campaign and builds its tasks and rater slots in one transaction.

    options: any of the settings of annotations.campaigns.settings.CampaignSettings; the others keep their
    defaults."""
    _check_settings(name, options)
    _check_closing_time(options, kept=None)
    if not 1 <= raters_per_item <= MAX_RATERS_PER_ITEM:
        raise CampaignError(f"raters per item must be between 1 and {MAX_RATERS_PER_ITEM}")
    if candidates_per_task is not None and not 1 <= candidates_per_task <= MAX_CANDIDATES_PER_TASK:
        raise CampaignError(f"candidates per task must be between 1 and {MAX_CANDIDATES_PER_TASK}, or empty for all")
    if Campaign.objects.filter(dataset=dataset, name=name).exists():
        raise CampaignError(f"this dataset already has a campaign named {name!r}")
    chosen_aspects = _resolve_aspects(dataset, aspects)
    users = _resolve_users(annotators)
    with transaction.atomic():
        campaign = Campaign.objects.create(
            name=name,
            dataset=dataset,
            raters_per_item=raters_per_item,
            candidates_per_task=candidates_per_task,
            created_by=created_by,
            shuffle_seed=secrets.token_hex(16),
            **options,
        )
        campaign.aspects.set(chosen_aspects)
        campaign.annotators.set(users)
        campaign_tasks_build(campaign=campaign)
    return campaign


def _check_closing_time(options: Mapping[str, Any], *, kept: datetime | None) -> None:
    """A closing time set to a moment already past is almost always a typo (a wrong year or day), and would close
    the campaign without anyone noticing; "Open to annotators" is the way to stop handing out tasks at once. A past
    closing time the campaign already has (it closed) is kept when other settings change."""
    closes_at = options.get("closes_at")
    if closes_at is None or closes_at == kept:
        return
    if closes_at <= timezone.now():
        raise CampaignError(
            _('The closing time %(when)s is in the past. To stop handing out tasks now, untick "Open to annotators".')
            % {"when": closes_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")}
        )


def _check_settings(name: str, options: Mapping[str, Any]) -> None:
    if not name.strip() or len(name) > 200:
        raise CampaignError("a campaign needs a name of 1 to 200 characters")
    try:
        check_storable(name)
        CampaignSettings.from_options(options)
    except CampaignSettingsError as exc:
        raise CampaignError(str(exc)) from None


def campaign_update(
    *,
    campaign: Campaign,
    name: str,
    annotators: Iterable[User | str],
    aspects: Iterable[Aspect | str] | None = None,
    **options: Any,
) -> Campaign:
    """Changes what a campaign shows and who rates. Its dataset and N and K stay as created: its tasks and rater
    slots were built from them. Someone taken out of the pool loses their open task at once."""
    _check_settings(name, options)
    _check_closing_time(options, kept=campaign.closes_at)
    if Campaign.objects.filter(dataset_id=campaign.dataset_id, name=name).exclude(pk=campaign.pk).exists():
        raise CampaignError(f"this dataset already has a campaign named {name!r}")
    chosen_aspects = _resolve_aspects(campaign.dataset, aspects)
    users = _resolve_users(annotators)
    with transaction.atomic():
        campaign.name = name
        for key, value in options.items():
            setattr(campaign, key, value)
        campaign.save(update_fields=["name", *options])
        campaign.aspects.set(chosen_aspects)
        campaign.annotators.set(users)
        campaign_leases_release_outside_pool(campaign=campaign)
    return campaign


def campaign_tasks_build(*, campaign: Campaign) -> int:
    """Creates the tasks and their N slots; called once, by campaign_create or the admin after adding. The tasks
    of gold items and attention checks are marked gold and get no slots here (see assignment_claim)."""
    if campaign.tasks.exists():
        raise CampaignError("this campaign already has tasks")
    responses_by_turn: dict[int, list[int]] = {}
    for turn_id, response_id in (
        Response.objects.filter(turn__item__dataset=campaign.dataset)
        .order_by("turn__item__position", "turn__index", "position")
        .values_list("turn_id", "pk")
    ):
        responses_by_turn.setdefault(turn_id, []).append(response_id)
    turn_ids = [
        pk
        for pk in Turn.objects.filter(item__dataset=campaign.dataset)
        .order_by("item__position", "index")
        .values_list("pk", flat=True)
        if pk in responses_by_turn
    ]
    if not turn_ids:
        raise CampaignError(f"dataset {campaign.dataset.name!r} has no answers to rate")
    chunks: list[tuple[int, int, list[int]]] = []
    for turn_id in turn_ids:
        response_ids = responses_by_turn[turn_id]
        size = campaign.candidates_per_task or len(response_ids)
        if size < len(response_ids):
            seeded_random(campaign.shuffle_seed, "chunks", turn_id).shuffle(response_ids)
        for chunk_index, start in enumerate(range(0, len(response_ids), size)):
            chunks.append((turn_id, chunk_index, response_ids[start : start + size]))
    order = hand_out_order(campaign.shuffle_seed, len(chunks))
    gold_turns = set(
        Turn.objects.filter(item__dataset=campaign.dataset, item__gold__isnull=False).values_list("pk", flat=True)
    )
    tasks = Task.objects.bulk_create(
        [
            Task(
                campaign=campaign,
                turn_id=turn_id,
                chunk=chunk_index,
                position=order[i],
                is_gold=turn_id in gold_turns,
            )
            for i, (turn_id, chunk_index, _) in enumerate(chunks)
        ]
    )
    Through = Task.responses.through
    Through.objects.bulk_create(
        [
            Through(task_id=task.pk, response_id=response_id)
            for task, (_, _, response_ids) in zip(tasks, chunks, strict=True)
            for response_id in response_ids
        ],
        batch_size=5000,
    )
    # Gold tasks start without slots: each annotator gets a personal one when their queue reaches gold.
    regular = [task for task in tasks if not task.is_gold]
    slots_build(pool=CAMPAIGN_SLOTS, campaign=campaign, tasks=regular, per_task=campaign.raters_per_item)
    return len(tasks)


def campaign_leases_release_outside_pool(*, campaign: Campaign) -> int:
    """Frees the open leases of people who left the pool, so their slots go to someone who may still rate; their
    drafts go with the leases."""
    with transaction.atomic():
        released = slots_release_outside_pool(pool=CAMPAIGN_SLOTS, campaign=campaign)
        AssignmentDraft.objects.filter(assignment__campaign=campaign).exclude(
            annotator__in=campaign.annotators.all()
        ).delete()
    return released


def campaign_annotator_remove(*, campaign: Campaign, user: User) -> None:
    """Removal revokes access at once: every view re-checks the pool, and the open lease is released here."""
    with transaction.atomic():
        campaign.annotators.remove(user)
        campaign_leases_release_outside_pool(campaign=campaign)

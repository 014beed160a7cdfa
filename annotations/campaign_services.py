"""Writes for annotation campaigns: creating them, handing out tasks, skips and submissions.

How tasks are handed out (the order is part of the contract; README "Annotation campaigns" repeats it)
--------------------------------------------------------------------------------------------------------
* When a campaign is created, every turn of the dataset becomes one task, or several when the campaign sets
  `candidates_per_task` K (the turn's answers are shuffled with the campaign seed, then cut into chunks of at most
  K, so a chunk mixes systems instead of always pairing the same neighbours). Each task gets exactly N rater slots
  (`Assignment` rows, slot 1..N).
* The tasks are put in one **seeded random order** (`Task.position`) shared by all annotators. Random, so that a
  campaign stopped early is still a random sample of the dataset rather than its first, often homogeneous, part;
  shared, so that annotators converge on the same tasks.
* "Next task" first **resumes** the annotator's open lease, if any (at most one per campaign, a DB constraint).
  Otherwise it takes the **lowest-positioned free slot** of a task the annotator has not rated, leased or skipped.
  Slots whose lease expired count as free. Filling the front of the queue first means tasks are completed one after
  another: at any moment only a few tasks are partly rated, so a stopped campaign leaves whole items with N ratings
  (what agreement statistics need) instead of many items with one. An expired or skipped slot sits near the front
  and is therefore redone first.

Why it cannot over-fill
-----------------------
Slots, leases, the claim rule, skips and completing belong to the slot engine (annotations.slots), which fact
review shares; its docstring gives the guarantees. This module adds what is particular to rating answers.

On Postgres the submission runs as one SQL statement (data-modifying CTEs) in autocommit, built on the engine's
completing UPDATE: one round trip instead of a transaction of five to fifteen ORM queries, with the same locks, the
same conditional updates and the same constraints; the statement is atomic on its own. The ORM version serves the
other databases (SQLite in development) and defines the semantics.

Why one module of this size: the draft save and the submit each have an SQL form and an ORM form here, and the SQL
forms are built on fragments of `annotations.slots` and `annotations.statements`, where the claim's two forms are.
Splitting this module by concern (setup, drafts, submissions, corrections) only pays once each rule's two forms move
together with their fragments, so it stays whole until the slot engine is split with it.
"""

import hashlib
import json
import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, connection, transaction
from django.db.models import Max
from django.utils import timezone
from django.utils.translation import gettext as _

from annotations.adjudication.services import dispute_find
from annotations.campaign_selectors import (
    CAMPAIGN_SLOTS,
    NA_TOKEN,
    Candidate,
    Scale,
    campaign_has_annotator,
    campaign_scales,
    candidate_order,
    draftable_assignment,
    rating_field_id,
    task_candidates,
)
from annotations.campaign_settings import CampaignSettings, CampaignSettingsError
from annotations.errors import RatingOutOfRange
from annotations.gold.selectors import gold_is_due, gold_task_next
from annotations.models import (
    AdjudicationRule,
    Aspect,
    Assignment,
    AssignmentDraft,
    AssignmentStatus,
    Campaign,
    Dataset,
    Rating,
    RatingOrigin,
    Response,
    Skip,
    SkipReason,
    Submission,
    SubmissionRevision,
    Task,
    Turn,
)
from annotations.recruitment.selectors import is_crowd_account, worker_skips_left, worker_tasks_left
from annotations.rubrics import format_number
from annotations.services import rater_for_user, rating_value_from_token
from annotations.slots import (
    Claim,
    ClaimDetails,
    NotInPool,
    NotLeased,
    hand_out_order,
    seeded_random,
    slot_claim,
    slot_complete,
    slot_complete_sql,
    slot_personal_claim,
    slot_personal_lease,
    slot_personal_state,
    slot_pool_sql,
    slot_reclaim,
    slot_release,
    slot_skip,
    slots_build,
    slots_release_outside_pool,
)
from annotations.statements import instance_from_row, statement_cursor, statement_rows

MAX_TEXT_CHARS = 10_000
MAX_VALUE_CHARS = 50  # a rating cell or the preference, as the form sends it
DRAFT_TEXT_FIELDS = ("rationale", "comment")
DRAFT_CHOICE_FIELDS = ("preference", "none_appropriate")
IDEMPOTENCY_KEY_RE = re.compile(r"^[A-Za-z0-9_-]{8,64}$")


class CampaignError(ValueError):
    """A campaign cannot be created or changed as asked; the message says why."""


class DraftInvalid(ValueError):
    """A draft was refused as sent; the message says why and nothing was stored."""


@dataclass(frozen=True)
class FieldProblem:
    field: str  # the form field id, e.g. "r-2-1", "preference", "rationale"
    message: str


class RevisitRefused(Exception):
    """A changed answer to a task the user already submitted, refused because the campaign does not let annotators
    correct their work (any more). Nothing was changed."""


class LeaseLost(NotLeased):
    """The lease expired and the task went to someone else with no slot left for the user; their answer was kept
    as a draft of the task, not stored as ratings."""


class QuotaReached(Exception):
    """A crowd worker sent a new answer after submitting every task their link allows (for instance a page left
    open, sent after its lease expired). Nothing was stored and their open lease, if any, went back to the pool."""


class SubmissionInvalid(Exception):
    def __init__(self, problems: list[FieldProblem]) -> None:
        super().__init__("; ".join(p.message for p in problems))
        self.problems = problems


MISSING = object()  # the annotator chose "N/A"


@dataclass
class TaskAnswer:
    """What an annotator entered, keyed by the labels they saw: (candidate number, aspect index) -> value,
    where a value is a float, MISSING, or None when nothing was chosen."""

    ratings: Mapping[tuple[int, int], Any]
    preference: int | None = None
    none_appropriate: bool = False
    rationale: str = ""
    comment: str = ""


@dataclass(frozen=True)
class SubmitResult:
    submission: Submission
    replayed: bool
    revised: bool = False  # a correction of a submitted answer, whose earlier version went to its history
    reclaimed: bool = False  # the lease had passed to someone else; the answer took another free slot of the task


# --- creating campaigns -----------------------------------------------------------------------------------------


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

    options: any of the settings of annotations.campaign_settings.CampaignSettings; the others keep their
    defaults."""
    _check_settings(name, options)
    if not 1 <= raters_per_item <= 100:
        raise CampaignError("raters per item must be between 1 and 100")
    if candidates_per_task is not None and candidates_per_task < 1:
        raise CampaignError("candidates per task must be at least 1")
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


def _check_settings(name: str, options: Mapping[str, Any]) -> None:
    if not name.strip() or len(name) > 200:
        raise CampaignError("a campaign needs a name of 1 to 200 characters")
    # Postgres text cannot hold U+0000; the importer refuses it in every string for the same reason.
    if "\x00" in name:
        raise CampaignError("text with a NUL character cannot be stored")
    try:
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


# --- the pool ---------------------------------------------------------------------------------------------------


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


# --- handing out tasks ------------------------------------------------------------------------------------------


_TASK_COLUMNS = ("id", "campaign_id", "turn_id", "chunk", "position", "is_gold")
_TURN_COLUMNS = ("id", "item_id", "index", "prompt", "reference", "context")
# What showing a claimed task needs, read by the claim itself: its task, turn and candidates. The columns are
# spelled out here (no string building from input); keep them in step with the tuples above.
_CLAIM_DETAILS = ClaimDetails(
    related=("task__turn", "campaign"),
    columns=""",
       task.id, task.campaign_id, task.turn_id, task.chunk, task.position, task.is_gold,
       turn.id, turn.item_id, turn.index, turn.prompt, turn.reference, turn.context,
       candidates.ids, candidates.texts""",
    joins="""
JOIN annotations_task task ON task.id = held.task_id
JOIN annotations_turn turn ON turn.id = task.turn_id
CROSS JOIN LATERAL (
    SELECT array_agg(response.id ORDER BY response.id) AS ids, array_agg(response.text ORDER BY response.id) AS texts
    FROM annotations_task_responses shown
    JOIN annotations_response response ON response.id = shown.response_id
    WHERE shown.task_id = held.task_id
) candidates""",
)


def assignment_claim(*, campaign: Campaign, user: User, now: datetime | None = None) -> Assignment | None:
    """The annotator's next task (see the module docstring for the order), or None when nothing is left for them.

    Resumes an open lease (and extends it); otherwise leases the first claimable slot. Safe under concurrency.
    The returned assignment carries its task, turn and campaign, so showing it needs no further lookups.
    With a gold rate, some positions of the annotator's queue get a gold task instead (annotations.gold.selectors
    says which): a personal slot appended for them, which the claim rule never hands to anyone else."""
    if worker_tasks_left(campaign, user) == 0:
        return None  # a crowd worker's quota is used up, whichever page or API asks; gold tasks count toward it
    gold = _gold_assignment_lease(campaign=campaign, user=user, now=now)
    if gold is not None:
        return gold
    claim = slot_claim(pool=CAMPAIGN_SLOTS, campaign=campaign, user=user, now=now, details=_CLAIM_DETAILS)
    if claim is None:
        return None
    return _claimed_assignment(campaign=campaign, claim=claim)


def _claimed_assignment(*, campaign: Campaign, claim: Claim) -> Assignment:
    assignment: Assignment = claim.slot
    if claim.details:
        row, t = claim.details, len(_TASK_COLUMNS)
        task = instance_from_row(Task, _TASK_COLUMNS, row[:t])
        task.turn = instance_from_row(Turn, _TURN_COLUMNS, row[t:-2])
        task.candidate_texts = dict(zip(row[-2] or [], row[-1] or [], strict=True))  # type: ignore[attr-defined]
        task.campaign = campaign
        assignment.task = task
    assignment.campaign = campaign
    return assignment


def _gold_assignment_lease(*, campaign: Campaign, user: User, now: datetime | None) -> Assignment | None:
    if campaign.gold_rate <= 0:
        return None
    state = slot_personal_state(pool=CAMPAIGN_SLOTS, campaign=campaign, user=user, now=now)
    if state.leased or not state.regular_available:
        return None
    if not gold_is_due(campaign=campaign, user_id=user.pk, handed_out=state.held):
        return None
    if connection.vendor == "postgresql":
        # One statement like the regular claim, so that handing out gold costs what a regular task costs.
        claim = slot_personal_claim(pool=CAMPAIGN_SLOTS, campaign=campaign, user=user, now=now, details=_CLAIM_DETAILS)
        return _claimed_assignment(campaign=campaign, claim=claim) if claim is not None else None
    task = gold_task_next(campaign=campaign, user=user)
    if task is None:
        return None
    assignment: Assignment | None = slot_personal_lease(
        pool=CAMPAIGN_SLOTS, campaign=campaign, task=task, user=user, now=now, related=_CLAIM_DETAILS.related
    )
    return assignment


def assignment_skip(*, assignment: Assignment, user: User, reason: str, note: str = "") -> Skip:
    """Records why the annotator declined and returns the slot to the pool; they will not see the task again."""
    if reason not in SkipReason.values:
        raise CampaignError(_("Choose a reason for skipping."))
    if len(note) > MAX_TEXT_CHARS:
        raise CampaignError(_("The note is too long."))
    skips_left = worker_skips_left(assignment.campaign, user)
    if skips_left == 0:
        raise CampaignError(_("You have used every skip this session allows; please answer this task."))
    with transaction.atomic():
        skip: Skip = slot_skip(pool=CAMPAIGN_SLOTS, slot=assignment, user=user, reason=reason, note=note)
        _drafts_drop(task_id=assignment.task_id, user=user)
    return skip


# --- drafts -----------------------------------------------------------------------------------------------------


def _draft_problem(*, values: Mapping[str, Any], known_fields: set[str]) -> str | None:
    unknown = set(values) - known_fields
    if unknown:
        return _("The draft names fields that are not on this form.")
    for name, value in values.items():
        if not isinstance(value, str) or "\x00" in value:
            return _("The draft holds a value that is not text.")
        limit = MAX_TEXT_CHARS if name in DRAFT_TEXT_FIELDS else MAX_VALUE_CHARS
        if len(value) > limit:
            return _("The draft holds a value that is too long.")
    return None


def assignment_draft_save(*, campaign: Campaign, task_id: int, user: User, values: Mapping[str, Any]) -> None:
    """Keeps what the annotator has entered so far on their leased task, replacing their earlier draft of it.

    `values` are the form's own fields (the rating cells of this task, preference, none_appropriate, rationale,
    comment) as text; anything else, or a value over the form's limits, raises DraftInvalid and stores nothing.
    A submitted task takes drafts of its correction while the campaign allows corrections. Outside the pool
    NotInPool; for a task not leased to the user, what the task page answers (404 or 403)."""
    if connection.vendor == "postgresql" and _draft_save_in_one_statement(
        campaign=campaign, task_id=task_id, user=user, values=values
    ):
        return
    _draft_save_portable(campaign=campaign, task_id=task_id, user=user, values=values)


def _draft_save_portable(*, campaign: Campaign, task_id: int, user: User, values: Mapping[str, Any]) -> None:
    if not campaign_has_annotator(campaign, user):
        raise NotInPool()
    with transaction.atomic():
        # Locked: a submit of the same lease that finished first leaves no lease to find here, and one that started
        # meanwhile waits for this draft and deletes it with the lease. On Postgres the exception is the first draft
        # of a lease saved while the submit's statement is already running (its snapshot cannot see the new row):
        # that draft stays on a submitted slot, where nothing reads it.
        assignment = draftable_assignment(campaign=campaign, task_id=task_id, user=user, lock=True)
        candidates = Task.responses.through.objects.filter(task_id=task_id).count()
        known_fields = {
            rating_field_id(number, scale.index)
            for number in range(1, candidates + 1)
            for scale in campaign_scales(campaign)
        } | {*DRAFT_TEXT_FIELDS, *DRAFT_CHOICE_FIELDS}
        problem = _draft_problem(values=values, known_fields=known_fields)
        if problem:
            raise DraftInvalid(problem)
        kept = {name: value for name, value in values.items() if value}
        AssignmentDraft.objects.update_or_create(assignment=assignment, annotator=user, defaults={"values": kept})


_DRAFT_FIELD = re.compile(r"^r-([0-9]{1,3})-([0-9]{1,3})$")

# assignment_draft_save in one statement: the slot (the user's lease, or their submitted slot while corrections are
# allowed) is locked as in the portable code, the pool and the number of candidates the draft names are checked, and
# the draft replaced. No row back means a refusal, which the portable code then names.
_DRAFT_SQL = f"""
WITH target AS (
    SELECT slot.id FROM annotations_assignment slot
    WHERE slot.campaign_id = %(campaign)s AND slot.task_id = %(task)s AND slot.annotator_id = %(user)s
      AND (slot.status = 'leased' OR (slot.status = 'submitted' AND %(revisit)s))
      AND (SELECT count(*) FROM annotations_task_responses shown WHERE shown.task_id = %(task)s) >= %(candidates)s
      AND {slot_pool_sql(CAMPAIGN_SLOTS)}
    FOR UPDATE OF slot
)
INSERT INTO annotations_assignmentdraft (assignment_id, annotator_id, "values", updated_at)
SELECT id, %(user)s, %(values)s::jsonb, %(now)s FROM target
ON CONFLICT (assignment_id, annotator_id) DO UPDATE SET "values" = EXCLUDED."values", updated_at = EXCLUDED.updated_at
RETURNING 1
"""  # noqa: S608  # nosec B608 - the pool fragment is built from model metadata


def _draft_save_in_one_statement(*, campaign: Campaign, task_id: int, user: User, values: Mapping[str, Any]) -> bool:
    """True when the draft was stored; False sends the request to the portable code, which stores it or says why
    not. Field names and limits are checked here first, against the largest candidate number the draft names."""
    scales = len(campaign_scales(campaign))
    candidates = 0
    for name in values:
        match = _DRAFT_FIELD.match(str(name))
        if match and 1 <= int(match[2]) <= scales and int(match[1]) >= 1:
            candidates = max(candidates, int(match[1]))
        elif name not in DRAFT_TEXT_FIELDS and name not in DRAFT_CHOICE_FIELDS:
            return False
    if _draft_problem(values=values, known_fields=set(values)):
        return False
    params = {
        "campaign": campaign.pk,
        "task": task_id,
        "user": user.pk,
        "revisit": campaign.allow_revisit,
        "candidates": candidates,
        "values": json.dumps({name: value for name, value in values.items() if value}),
        "now": timezone.now(),
    }
    return bool(statement_rows(_DRAFT_SQL, params))


# --- submitting -------------------------------------------------------------------------------------------------


def _check_answer(
    *, campaign: Campaign, candidates: list[Candidate], scales: list[Scale], answer: TaskAnswer
) -> list[FieldProblem]:
    problems: list[FieldProblem] = []
    known = {(c.number, s.index) for c in candidates for s in scales}
    if set(answer.ratings) - known:
        problems.append(FieldProblem("ratings", _("The form contains ratings for candidates that are not here.")))
    for candidate in candidates:
        for scale in scales:
            field_id = rating_field_id(candidate.number, scale.index)
            value = answer.ratings.get((candidate.number, scale.index))
            label = scale.aspect.display_label
            if value is None:
                problems.append(
                    FieldProblem(
                        field_id,
                        _("Candidate %(n)s: choose a value for %(aspect)s.") % {"n": candidate.number, "aspect": label},
                    )
                )
            elif value is MISSING:
                if not scale.allows_missing:
                    problems.append(
                        FieldProblem(
                            field_id,
                            _("Candidate %(n)s: %(aspect)s cannot be N/A.") % {"n": candidate.number, "aspect": label},
                        )
                    )
            elif not _value_allowed(scale, value):
                problems.append(
                    FieldProblem(
                        field_id,
                        _("Candidate %(n)s: %(aspect)s must be within %(range)s.")
                        % {"n": candidate.number, "aspect": label, "range": scale.range_text},
                    )
                )
    if campaign.ask_preference:
        if answer.preference is None:
            problems.append(FieldProblem("preference", _("Preference: choose the candidate you prefer.")))
        elif answer.preference not in {c.number for c in candidates}:
            problems.append(FieldProblem("preference", _("Preference: choose one of the candidates shown.")))
    if campaign.rationale_required and not answer.rationale.strip():
        problems.append(FieldProblem("rationale", _("Reason: explain your ratings in a few words.")))
    if len(answer.rationale) > MAX_TEXT_CHARS:
        problems.append(FieldProblem("rationale", _("Reason: keep it under 10,000 characters.")))
    if len(answer.comment) > MAX_TEXT_CHARS:
        problems.append(FieldProblem("comment", _("Comment: keep it under 10,000 characters.")))
    # Postgres text cannot hold U+0000 and UTF-8 cannot encode lone surrogates; the token API refuses both too.
    if not _storable(answer.rationale):
        problems.append(FieldProblem("rationale", _("Reason: remove the characters that cannot be saved.")))
    if not _storable(answer.comment):
        problems.append(FieldProblem("comment", _("Comment: remove the characters that cannot be saved.")))
    return problems


def _storable(text: str) -> bool:
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _value_allowed(scale: Scale, value: Any) -> bool:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value != value:
        return False
    if scale.is_discrete:
        return any(option.value == value for option in scale.options)
    return scale.aspect.min_value <= value <= scale.aspect.max_value


def _raw_token(scale: Scale, value: Any) -> Any:
    if value is MISSING:
        return scale.missing_token
    return int(value) if float(value).is_integer() else float(value)


def _replay(*, idempotency_key: str, user: User, task_id: int) -> Submission | None:
    existing = Submission.objects.filter(idempotency_key=idempotency_key).select_related("assignment").first()
    if existing is None:
        return None
    if existing.assignment.annotator_id != user.pk or existing.assignment.task_id != task_id:
        raise NotLeased()
    return existing


def _drafts_drop(*, task_id: int, user: User) -> None:
    AssignmentDraft.objects.filter(assignment__task_id=task_id, annotator=user).delete()


def submission_create(
    *,
    campaign: Campaign,
    task_id: int,
    user: User,
    idempotency_key: str,
    answer: TaskAnswer,
    now: datetime | None = None,
    former_slot_id: int | None = None,
) -> SubmitResult:
    """Stores a completed task: one Rating per candidate and aspect under the annotator's pseudonymous Rater, plus
    the preference, reason and comment. The seconds spent are measured by the server, from the lease to this call,
    like MTurk's work time.

    A repeat of a stored request (the same key and the same answer), or the same answer sent again, changes nothing.
    A different answer to a task the user already submitted (a correction, or a stale page sent again) replaces the
    current answer and keeps the earlier one in its history, or raises RevisitRefused when the campaign does not
    allow corrections. A lease that expired still counts while the slot is the user's; once it went to someone
    else, the answer takes another open slot of the task (only when `former_slot_id`, the slot the user's page was
    built for, is given), or it is kept as a draft and LeaseLost raised.

    A stored answer in a campaign with an adjudication rule is then checked for disagreement (see
    annotations/adjudication): in its own transaction, after the answer is safe, so a failure there never loses it;
    `manage.py find_disputes` finds what such a failure missed."""
    submit = _submit_in_one_statement if connection.vendor == "postgresql" else _submission_create_portable
    result = submit(
        campaign=campaign,
        task_id=task_id,
        user=user,
        idempotency_key=idempotency_key,
        answer=answer,
        now=now,
        former_slot_id=former_slot_id,
    )
    if not result.replayed and _campaign_adjudicates(campaign):
        dispute_find(task_id=task_id, now=now)
    return result


def _campaign_adjudicates(campaign: Campaign) -> bool:
    """Read with the campaign on the annotator's hot path (campaign_for_annotator), else asked here."""
    known: bool | None = getattr(campaign, "_adjudicates", None)
    if known is None:
        known = AdjudicationRule.objects.filter(campaign_id=campaign.pk).exists()
    return known


def _submission_create_portable(
    *,
    campaign: Campaign,
    task_id: int,
    user: User,
    idempotency_key: str,
    answer: TaskAnswer,
    now: datetime | None,
    former_slot_id: int | None,
) -> SubmitResult:
    if not campaign_has_annotator(campaign, user):
        raise NotInPool()
    if not IDEMPOTENCY_KEY_RE.match(idempotency_key or ""):
        raise _outdated_form()
    try:
        return _submission_create_locked(
            campaign=campaign, task_id=task_id, user=user, idempotency_key=idempotency_key, answer=answer, now=now,
            former_slot_id=former_slot_id,
        )  # fmt: skip
    except QuotaReached:
        leased = Assignment.objects.filter(campaign=campaign, annotator=user, status=AssignmentStatus.LEASED)
        for slot_id in leased.values_list("pk", flat=True):
            slot_release(pool=CAMPAIGN_SLOTS, slot_id=slot_id, user=user)
        raise


def _submission_create_locked(
    *,
    campaign: Campaign,
    task_id: int,
    user: User,
    idempotency_key: str,
    answer: TaskAnswer,
    now: datetime | None,
    former_slot_id: int | None,
) -> SubmitResult:
    with transaction.atomic():
        # The worker's row first (crowd accounts only): their quota is counted and their answer stored under it.
        tasks_left = worker_tasks_left(campaign, user, lock=True)
        assignment = (
            Assignment.objects.select_for_update()
            .select_related("task__turn", "campaign")
            .filter(campaign=campaign, task_id=task_id, annotator=user)
            .first()
        )
        # Read under the lock: a correction that waited for another one must be stamped after it, or its history
        # row would say the version it replaces was replaced before it was written.
        moment = now or timezone.now()
        submission = None
        if assignment is not None and assignment.status == AssignmentStatus.SUBMITTED:
            submission = Submission.objects.select_for_update().get(assignment=assignment)
        if submission is None or submission.idempotency_key != idempotency_key:
            _check_key_owner(idempotency_key=idempotency_key, assignment=assignment)
        if assignment is not None and submission is not None:
            return _submission_revise(
                campaign=campaign, submission=submission, assignment=assignment, user=user,
                idempotency_key=idempotency_key, answer=answer, moment=moment,
            )  # fmt: skip
        if tasks_left == 0:
            raise QuotaReached()
        former: Assignment | None = None
        if assignment is None or assignment.status != AssignmentStatus.LEASED:
            former = _former_slot(campaign=campaign, task_id=task_id, slot_id=former_slot_id)
            assignment = slot_reclaim(pool=CAMPAIGN_SLOTS, campaign=campaign, task_id=task_id, user=user, now=moment)
        if assignment is not None:
            submission = _submission_insert(
                campaign=campaign, assignment=assignment, user=user, idempotency_key=idempotency_key, answer=answer,
                moment=moment,
            )  # fmt: skip
            return SubmitResult(submission=submission, replayed=False, reclaimed=former is not None)
    assert former is not None  # only a lost lease leaves no slot to submit
    _answer_keep_as_draft(slot=former, user=user, answer=answer)
    raise LeaseLost()


def _submission_insert(
    *,
    campaign: Campaign,
    assignment: Assignment,
    user: User,
    idempotency_key: str,
    answer: TaskAnswer,
    moment: datetime,
) -> Submission:
    """The portable submit of a slot leased to the user, inside the caller's transaction."""
    candidates = task_candidates(assignment=assignment, user_id=user.pk)
    scales = campaign_scales(campaign)
    problems = _check_answer(campaign=campaign, candidates=candidates, scales=scales, answer=answer)
    if problems:
        raise SubmissionInvalid(problems)
    spent = max(0.0, (moment - assignment.leased_at).total_seconds()) if assignment.leased_at else 0.0
    by_number = {c.number: c.response_id for c in candidates}
    entered = _rating_values(candidates=candidates, scales=scales, answer=answer)
    submission = Submission.objects.create(
        assignment=assignment,
        idempotency_key=idempotency_key,
        answer_digest=_answer_digest(
            _wanted_version(campaign=campaign, candidates=candidates, answer=answer, entered=entered)
        ),
        preferred_response_id=by_number.get(answer.preference) if answer.preference else None,
        none_appropriate=answer.none_appropriate and campaign.ask_preference,
        rationale=answer.rationale.strip(),
        comment=answer.comment.strip(),
        seconds_spent=spent,
    )
    _ratings_store(
        campaign=campaign, user=user, candidates=candidates, scales=scales, answer=answer, submission=submission
    )
    if not slot_complete(pool=CAMPAIGN_SLOTS, slot=assignment, user=user, now=moment, seconds_spent=spent):
        raise NotLeased()  # the annotator left the pool since the check above
    _drafts_drop(task_id=assignment.task_id, user=user)
    return submission


def _check_key_owner(*, idempotency_key: str, assignment: Assignment | None) -> None:
    """NotLeased when the key already stored an answer to another slot: a replay must repeat its own task."""
    owners = set(Submission.objects.filter(idempotency_key=idempotency_key).values_list("assignment_id", flat=True))
    if not owners:
        owners = set(
            SubmissionRevision.objects.filter(idempotency_key=idempotency_key).values_list(
                "submission__assignment_id", flat=True
            )
        )
    if owners and (assignment is None or owners != {assignment.pk}):
        raise NotLeased()


def _former_slot(*, campaign: Campaign, task_id: int, slot_id: int | None) -> Assignment:
    """The slot the user's page was built for, when the page says so; without it there is nothing to reclaim."""
    former = Assignment.objects.filter(pk=slot_id, campaign=campaign, task_id=task_id).first() if slot_id else None
    if former is None:
        raise NotLeased()
    return former


def answer_form_values(answer: TaskAnswer) -> dict[str, str]:
    """A TaskAnswer as the task form's field values, the shape a draft keeps."""
    values: dict[str, str] = {}
    for (number, index), value in answer.ratings.items():
        if value is MISSING:
            values[rating_field_id(number, index)] = NA_TOKEN
        elif isinstance(value, (int, float)) and value == value:
            values[rating_field_id(number, index)] = format_number(value)
    if answer.preference:
        values["preference"] = str(answer.preference)
    if answer.none_appropriate:
        values["none_appropriate"] = "1"
    values["rationale"] = answer.rationale[:MAX_TEXT_CHARS]
    values["comment"] = answer.comment[:MAX_TEXT_CHARS]
    return {name: value for name, value in values.items() if value and "\x00" not in value}


def _answer_keep_as_draft(*, slot: Assignment, user: User, answer: TaskAnswer) -> None:
    AssignmentDraft.objects.update_or_create(
        assignment=slot, annotator=user, defaults={"values": answer_form_values(answer)}
    )


# --- correcting a submitted answer ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Version:
    """One version of an answer, comparable: the task-level fields and (response, aspect, raw, value, missing)."""

    preferred_response_id: int | None
    none_appropriate: bool
    rationale: str
    comment: str
    ratings: tuple[tuple[int, int, Any, float | None, bool], ...]


def _wanted_version(
    *, campaign: Campaign, candidates: list[Candidate], answer: TaskAnswer, entered: list[tuple[Any, ...]]
) -> _Version:
    by_number = {c.number: c.response_id for c in candidates}
    return _Version(
        preferred_response_id=by_number.get(answer.preference) if answer.preference else None,
        none_appropriate=answer.none_appropriate and campaign.ask_preference,
        rationale=answer.rationale.strip(),
        comment=answer.comment.strip(),
        ratings=tuple(sorted(entered)),
    )


def _answer_digest(version: _Version) -> str:
    fields = [version.preferred_response_id, version.none_appropriate, version.rationale, version.comment]
    return hashlib.sha256(json.dumps([*fields, version.ratings]).encode()).hexdigest()


def _version_of_revision(revision: SubmissionRevision) -> _Version:
    return _Version(
        preferred_response_id=revision.preferred_response_id,
        none_appropriate=revision.none_appropriate,
        rationale=revision.rationale,
        comment=revision.comment,
        ratings=tuple(
            sorted((r["response_id"], r["aspect_id"], r["raw"], r["value"], r["is_missing"]) for r in revision.ratings)
        ),
    )


def _submission_revise(
    *,
    campaign: Campaign,
    submission: Submission,
    assignment: Assignment,
    user: User,
    idempotency_key: str,
    answer: TaskAnswer,
    moment: datetime,
) -> SubmitResult:
    """A second answer to a submitted task, whose submission the caller's transaction holds locked: a replay when it
    repeats the current version or the version its key stored, else a correction (when allowed) that moves the
    current version to the history and rewrites the Rating rows in place, so exports and statistics read the
    corrected answer."""
    through = Task.responses.through.objects
    shown = list(through.filter(task_id=assignment.task_id).values_list("response_id", flat=True))
    order = candidate_order(campaign=campaign, task=assignment.task, user_id=user.pk, response_ids=shown)
    candidates = [Candidate(number=i + 1, response_id=pk, text="") for i, pk in enumerate(order)]
    scales = campaign_scales(campaign)
    problems = _check_answer(campaign=campaign, candidates=candidates, scales=scales, answer=answer)
    if problems:
        raise SubmissionInvalid(problems)
    by_number = {c.number: c.response_id for c in candidates}
    entered = _rating_values(candidates=candidates, scales=scales, answer=answer)
    wanted = _wanted_version(campaign=campaign, candidates=candidates, answer=answer, entered=entered)
    if submission.answer_digest and submission.answer_digest == _answer_digest(wanted):
        return SubmitResult(submission=submission, replayed=True)  # the current answer again: a double click
    rater = rater_for_user(dataset=campaign.dataset, user=user)
    stored = {
        (rating.response_id, rating.aspect_id): rating
        for rating in Rating.objects.select_for_update().filter(
            rater=rater, response_id__in=list(by_number.values()), aspect_id__in=[s.aspect.pk for s in scales]
        )
    }
    current = _Version(
        preferred_response_id=submission.preferred_response_id,
        none_appropriate=submission.none_appropriate,
        rationale=submission.rationale,
        comment=submission.comment,
        ratings=tuple(sorted((r.response_id, r.aspect_id, r.raw, r.value, r.is_missing) for r in stored.values())),
    )
    if wanted == current:
        return SubmitResult(submission=submission, replayed=True)
    earlier = submission.revisions.filter(idempotency_key=idempotency_key).order_by("-version").first()
    if earlier is not None and _version_of_revision(earlier) == wanted:
        return SubmitResult(submission=submission, replayed=True)  # a late repeat of a request already applied
    if not campaign.allow_revisit:
        raise RevisitRefused()
    SubmissionRevision.objects.create(
        submission=submission,
        version=submission.version,
        idempotency_key=submission.idempotency_key,
        preferred_response_id=current.preferred_response_id,
        none_appropriate=current.none_appropriate,
        rationale=current.rationale,
        comment=current.comment,
        ratings=[
            {"response_id": response, "aspect_id": aspect, "raw": raw, "value": value, "is_missing": missing}
            for response, aspect, raw, value, missing in current.ratings
        ],
        submitted_at=submission.revised_at or submission.created_at,
        replaced_at=moment,
    )
    submission.idempotency_key = idempotency_key
    submission.preferred_response_id = wanted.preferred_response_id
    submission.none_appropriate = wanted.none_appropriate
    submission.rationale = wanted.rationale
    submission.comment = wanted.comment
    submission.version += 1
    submission.revised_at = moment
    submission.answer_digest = _answer_digest(wanted)
    submission.save(
        update_fields=[
            "idempotency_key", "preferred_response", "none_appropriate", "rationale", "comment", "version",
            "revised_at", "answer_digest",
        ]
    )  # fmt: skip
    changed, added = [], []
    for response_id, aspect_id, raw, value, is_missing in entered:
        rating = stored.get((response_id, aspect_id))
        if rating is None:  # an aspect the campaign added after the first answer
            added.append((response_id, aspect_id, raw, value, is_missing))
            continue
        rating.raw, rating.value, rating.is_missing = raw, value, is_missing
        rating.rationale, rating.comment, rating.updated_at = wanted.rationale, wanted.comment, moment
        changed.append(rating)
    Rating.objects.bulk_update(changed, ["raw", "value", "is_missing", "rationale", "comment", "updated_at"])
    if added:
        _ratings_insert(rater=rater, entered=added, submission=submission)
    _drafts_drop(task_id=assignment.task_id, user=user)
    return SubmitResult(submission=submission, replayed=False, revised=True)


def _outdated_form() -> SubmissionInvalid:
    return SubmissionInvalid([FieldProblem("idempotency_key", _("The form is outdated; reload the page."))])


def _already_rated() -> SubmissionInvalid:
    return SubmissionInvalid(
        [FieldProblem("ratings", _("You have already rated one of these answers in another campaign."))]
    )


# What submission_create needs to know before writing, read in one round trip without locks: the single
# statement that writes re-checks all of it while holding the row lock.
_SUBMIT_STATE_SQL = f"""
SELECT {slot_pool_sql(CAMPAIGN_SLOTS)},
       (SELECT used.assignment_id FROM annotations_submission used WHERE used.idempotency_key = %(key)s),
       (SELECT used.answer_digest FROM annotations_submission used WHERE used.idempotency_key = %(key)s),
       (SELECT rater.id FROM annotations_rater rater WHERE rater.dataset_id = %(dataset)s AND rater.user_id = %(user)s),
       slot.id, slot.status, slot.leased_at,
       ARRAY(SELECT shown.response_id FROM annotations_task_responses shown WHERE shown.task_id = slot.task_id)
FROM (SELECT 1) AS one
LEFT JOIN annotations_assignment slot
       ON slot.campaign_id = %(campaign)s AND slot.task_id = %(task)s AND slot.annotator_id = %(user)s
"""  # noqa: S608  # nosec B608 - the pool fragment is built from model metadata

# The writes of submission_create in one statement. `finished` is the slot engine's completing UPDATE: it flips the
# lease to submitted only if it is still this annotator's open lease and they are still in the pool of an active
# campaign; the submission and the ratings are inserted, and the user's drafts of the task deleted, only for the row
# it flipped, so a request that lost a race writes nothing. Positions put app ratings after every earlier rating of
# the same answer and aspect, as _ratings_insert does.
_SUBMIT_SQL = f"""
WITH finished AS (
    {slot_complete_sql(CAMPAIGN_SLOTS)}
    RETURNING id, task_id
),
submission AS (
    INSERT INTO annotations_submission
        (assignment_id, idempotency_key, preferred_response_id, none_appropriate, rationale, comment,
         seconds_spent, created_at, version, answer_digest)
    SELECT id, %(key)s, %(preferred)s, %(none_appropriate)s, %(rationale)s, %(comment)s, %(spent)s, %(now)s, 1,
           %(digest)s
    FROM finished
    RETURNING id
),
rated AS (
    INSERT INTO annotations_rating
        (response_id, aspect_id, rater_id, position, raw, value, is_missing, rationale, comment, seconds_spent,
         origin, created_at, updated_at)
    SELECT entered.response_id, entered.aspect_id, %(rater)s,
           COALESCE((SELECT MAX(earlier.position) + 1 FROM annotations_rating earlier
                     WHERE earlier.response_id = entered.response_id AND earlier.aspect_id = entered.aspect_id), 0),
           entered.raw, entered.value, entered.is_missing, %(rationale)s, %(comment)s, %(spent)s,
           %(origin)s, %(now)s, %(now)s
    FROM finished
    CROSS JOIN jsonb_to_recordset(%(entered)s::jsonb)
         AS entered(response_id bigint, aspect_id bigint, raw jsonb, value float8, is_missing boolean)
    RETURNING 1
),
dropped AS (
    DELETE FROM annotations_assignmentdraft draft USING finished, annotations_assignment held
    WHERE held.task_id = finished.task_id AND draft.assignment_id = held.id AND draft.annotator_id = %(user)s
)
SELECT (SELECT id FROM submission), (SELECT count(*) FROM rated)
"""  # noqa: S608  # nosec B608 - the completing UPDATE is built from model metadata


@dataclass(frozen=True)
class _SubmitState:
    in_pool: bool
    key_used_by: int | None  # the assignment whose submission already carries this idempotency key
    key_digest: str | None  # that submission's answer digest
    rater_id: int | None
    assignment_id: int | None  # this annotator's slot of the task, if any
    status: str | None
    leased_at: datetime | None
    response_ids: list[int]


def _submit_state(*, campaign: Campaign, task_id: int, user: User, idempotency_key: str) -> _SubmitState:
    params: dict[str, Any] = {
        "campaign": campaign.pk,
        "dataset": campaign.dataset_id,
        "task": task_id,
        "user": user.pk,
        "key": idempotency_key,
    }
    with statement_cursor() as cursor:
        cursor.execute(_SUBMIT_STATE_SQL, params)
        row = cursor.fetchone()
    in_pool, key_used_by, key_digest, rater_id, assignment_id, status, leased_at, response_ids = row
    return _SubmitState(
        in_pool=bool(in_pool),
        key_used_by=key_used_by,
        key_digest=key_digest,
        rater_id=rater_id,
        assignment_id=assignment_id,
        status=status,
        leased_at=leased_at,
        response_ids=list(response_ids or []),
    )


def _submit_in_one_statement(
    *,
    campaign: Campaign,
    task_id: int,
    user: User,
    idempotency_key: str,
    answer: TaskAnswer,
    now: datetime | None,
    former_slot_id: int | None,
) -> SubmitResult:
    rest: dict[str, Any] = {
        "campaign": campaign,
        "task_id": task_id,
        "user": user,
        "idempotency_key": idempotency_key,
        "answer": answer,
        "now": now,
        "former_slot_id": former_slot_id,
    }
    if is_crowd_account(user):
        # A crowd worker's quota is counted and their answer stored under a lock on their row, which the single
        # statement cannot take before it counts: their submits take the portable path.
        return _submission_create_portable(**rest)
    state = _submit_state(campaign=campaign, task_id=task_id, user=user, idempotency_key=idempotency_key)
    if not state.in_pool:
        raise NotInPool()
    if not IDEMPOTENCY_KEY_RE.match(idempotency_key or ""):
        raise _outdated_form()
    if state.assignment_id is None:
        return _submission_create_portable(**rest)  # a lease lost to someone else, or never held
    order = candidate_order(campaign=campaign, task=Task(pk=task_id), user_id=user.pk, response_ids=state.response_ids)
    candidates = [Candidate(number=i + 1, response_id=pk, text="") for i, pk in enumerate(order)]
    scales = campaign_scales(campaign)
    problems = _check_answer(campaign=campaign, candidates=candidates, scales=scales, answer=answer)
    if problems:
        raise SubmissionInvalid(problems)
    entered = _rating_values(candidates=candidates, scales=scales, answer=answer)
    digest = _answer_digest(_wanted_version(campaign=campaign, candidates=candidates, answer=answer, entered=entered))
    if state.key_used_by is not None and state.key_used_by == state.assignment_id and state.key_digest == digest:
        # A double click: the same request again, told apart from a correction by the stored answer's digest.
        return SubmitResult(submission=Submission.objects.get(assignment_id=state.assignment_id), replayed=True)
    if state.status != AssignmentStatus.LEASED or state.key_used_by is not None:
        # A correction or a stale page: rare, and decided by the portable code under row locks.
        return _submission_create_portable(**rest)
    rater_id = state.rater_id or rater_for_user(dataset=campaign.dataset, user=user).pk
    moment = now or timezone.now()
    spent = max(0.0, (moment - state.leased_at).total_seconds()) if state.leased_at else 0.0
    by_number = {c.number: c.response_id for c in candidates}
    values = {
        "campaign": campaign.pk,
        "user": user.pk,
        "slot": state.assignment_id,
        "key": idempotency_key,
        "preferred": by_number.get(answer.preference) if answer.preference else None,
        "none_appropriate": answer.none_appropriate and campaign.ask_preference,
        "rationale": answer.rationale.strip(),
        "comment": answer.comment.strip(),
        "spent": spent,
        "now": moment,
        "rater": rater_id,
        "digest": digest,
        "origin": RatingOrigin.APP.value,
        # One JSON document rather than five arrays: binding arrays was a few per cent of a submit's CPU.
        "entered": json.dumps(
            [
                {"response_id": response, "aspect_id": aspect, "raw": raw, "value": value, "is_missing": missing}
                for response, aspect, raw, value, missing in entered
            ]
        ),
    }
    try:
        ((submission_id, _rated),) = statement_rows(_SUBMIT_SQL, values)
    except IntegrityError as exc:
        if getattr(getattr(exc.__cause__, "diag", None), "constraint_name", "") == "one_rating_per_rater_answer_aspect":
            raise _already_rated() from None
        if getattr(exc.__cause__, "sqlstate", None) != "23505":
            raise  # only a unique violation (the key, taken meanwhile) is decided below
        submission_id = None  # the key was taken meanwhile: decided below from what is stored now
    if submission_id is None:
        # Another request finished this lease first, or it was lost meanwhile: answer as if this came second.
        return _submission_create_portable(**rest)
    submission = instance_from_row(
        Submission,
        (
            "id",
            "assignment_id",
            "idempotency_key",
            "preferred_response_id",
            "none_appropriate",
            "rationale",
            "comment",
            "seconds_spent",
            "created_at",
        ),
        (
            submission_id,
            state.assignment_id,
            idempotency_key,
            values["preferred"],
            values["none_appropriate"],
            values["rationale"],
            values["comment"],
            spent,
            moment,
        ),
    )
    return SubmitResult(submission=submission, replayed=False)


def _rating_values(
    *, candidates: list[Candidate], scales: list[Scale], answer: TaskAnswer
) -> list[tuple[int, int, Any, float | None, bool]]:
    """(response id, aspect id, raw token, value, is missing) per candidate and aspect, as Rating rows store them."""
    rows = []
    for candidate in candidates:
        for scale in scales:
            raw = _raw_token(scale, answer.ratings[(candidate.number, scale.index)])
            try:
                value, is_missing = rating_value_from_token(aspect=scale.aspect, raw=raw)
            except RatingOutOfRange as exc:  # _check_answer already refused these; this guards the invariant
                raise SubmissionInvalid(
                    [FieldProblem(rating_field_id(candidate.number, scale.index), str(exc))]
                ) from None
            rows.append((candidate.response_id, scale.aspect.pk, raw, value, is_missing))
    return rows


def _ratings_store(
    *,
    campaign: Campaign,
    user: User,
    candidates: list[Candidate],
    scales: list[Scale],
    answer: TaskAnswer,
    submission: Submission,
) -> None:
    entered = _rating_values(candidates=candidates, scales=scales, answer=answer)
    _ratings_insert(rater=rater_for_user(dataset=campaign.dataset, user=user), entered=entered, submission=submission)


def _ratings_insert(
    *, rater: Any, entered: list[tuple[int, int, Any, float | None, bool]], submission: Submission
) -> None:
    response_ids = {row[0] for row in entered}
    aspect_ids = {row[1] for row in entered}
    # App ratings go after every existing rating of the same answer and aspect, as extra raters on export.
    next_position = {
        (row["response_id"], row["aspect_id"]): row["top"] + 1
        for row in Rating.objects.filter(response_id__in=response_ids, aspect_id__in=aspect_ids)
        .values("response_id", "aspect_id")
        .annotate(top=Max("position"))
    }
    rows = [
        Rating(
            response_id=response_id,
            aspect_id=aspect_id,
            rater=rater,
            position=next_position.get((response_id, aspect_id), 0),
            raw=raw,
            value=value,
            is_missing=is_missing,
            rationale=submission.rationale,
            comment=submission.comment,
            seconds_spent=submission.seconds_spent,
            origin=RatingOrigin.APP,
        )
        for response_id, aspect_id, raw, value, is_missing in entered
    ]
    try:
        # No savepoint: a failure here aborts the whole submission, which is what the caller's atomic block wants.
        Rating.objects.bulk_create(rows)
    except IntegrityError:
        # The annotator already rated one of these answers (in another campaign on the same dataset).
        raise _already_rated() from None

"""Submitting a task: a first answer to the slot the annotator holds, or to another open slot of the task when
their lease went to someone else.

The submit has two forms side by side. On Postgres the common case, a first answer to a lease the annotator still
holds, runs as one SQL statement (data-modifying CTEs) in autocommit, built on the slot engine's completing UPDATE:
one round trip instead of a transaction of five to fifteen ORM queries, with the same locks, the same conditional
updates and the same constraints. The portable form runs in a transaction with row locks; it serves every other
database and every other case (a crowd worker's counted quota, a lost lease, a correction, a request that lost a
race), and defines the semantics. Corrections are their own service (annotations.campaigns.corrections).
tests/annotations/campaigns/test_submit_twin_paths.py runs both forms on the same cases and compares what they store.

A submit travels as one SubmitRequest. When the one-statement form declines, it says why (Declined), and the
reason is logged at debug level before the portable form decides; the result names the form that stored the
answer (SubmitResult.form)."""

import json
import logging
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from annotations.adjudication.services import dispute_find
from annotations.campaigns.answers import (
    IDEMPOTENCY_KEY_RE,
    SubmitForm,
    SubmitResult,
    TaskAnswer,
    answer_digest,
    answer_problems,
    answer_version,
    rating_values,
)
from annotations.campaigns.corrections import submission_revise
from annotations.campaigns.drafts import assignment_draft_keep_answer, task_drafts_drop
from annotations.campaigns.errors import LeaseLost, QuotaReached, SubmissionInvalid, already_rated, outdated_form
from annotations.campaigns.rated_listeners import campaign_rated_notify
from annotations.campaigns.ratings import ratings_store
from annotations.campaigns.selectors import campaign_has_annotator
from annotations.campaigns.tasks import candidate_order, task_candidates
from annotations.models import (
    AdjudicationRule,
    Assignment,
    AssignmentStatus,
    Campaign,
    RatingOrigin,
    Submission,
    SubmissionRevision,
    Task,
)
from annotations.recruitment.selectors import is_crowd_account, worker_tasks_left
from annotations.rubrics.task_sheet import Candidate, campaign_scales
from annotations.services import rater_for_user
from annotations.slots import (
    NotInPool,
    NotLeased,
    slot_complete,
    slot_complete_sql,
    slot_pool_sql,
    slot_reclaim,
    slot_release,
)
from annotations.slots.campaign_slots import CAMPAIGN_SLOTS, rated_before_expression, rated_before_sql
from annotations.slots.statements import instance_from_row, statement_cursor, statement_rows

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SubmitRequest:
    """One submit as the view hands it over; both forms of the submit read it."""

    campaign: Campaign
    task_id: int
    user: User
    idempotency_key: str
    answer: TaskAnswer
    now: datetime | None = None
    # The slot the user's page was built for: lets an answer whose lease went to someone else take another slot.
    former_slot_id: int | None = None


class Declined(Enum):
    """Why the one-statement form left a submit to the portable form."""

    NOT_POSTGRES = "the database is not Postgres"
    CROWD_ACCOUNT = "a crowd worker's quota is counted under a lock on their row"
    NO_SLOT = "no slot of the user's: a lease lost to someone else, or never held"
    NOT_A_FIRST_ANSWER = "a correction or a stale page"
    RACE_LOST = "another request finished the lease or took the key first"
    SPAN_ASPECT = "error spans are checked against the answer texts and stored as rows of their own"


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
    request = SubmitRequest(
        campaign=campaign,
        task_id=task_id,
        user=user,
        idempotency_key=idempotency_key,
        answer=answer,
        now=now,
        former_slot_id=former_slot_id,
    )
    result = submission_store(request)
    if not result.replayed and _campaign_adjudicates(campaign):
        dispute_find(task_id=task_id, now=now)
    if not result.replayed and campaign.stop_rule and campaign.stopped_at is None:
        campaign_rated_notify(campaign.pk)
    return result


def submission_store(request: SubmitRequest) -> SubmitResult:
    """The answer stored by the one-statement form when it can, else by the portable form, which decides every case
    the statement declines; the reason it declined is logged at debug level."""
    outcome: SubmitResult | Declined
    if connection.vendor != "postgresql":
        outcome = Declined.NOT_POSTGRES
    elif is_crowd_account(request.user):
        # The single statement cannot take the lock on the worker's row before it counts their quota.
        outcome = Declined.CROWD_ACCOUNT
    else:
        outcome = _submit_in_one_statement(request)
    if isinstance(outcome, SubmitResult):
        return outcome
    logger.debug(
        "submit of task %s takes the portable form: %s", request.task_id, outcome.value, extra={"declined": outcome}
    )
    return _submission_create_portable(request)


def _campaign_adjudicates(campaign: Campaign) -> bool:
    """Read with the campaign on the annotator's hot path (campaign_for_annotator), else asked here."""
    known: bool | None = getattr(campaign, "_adjudicates", None)
    if known is None:
        known = AdjudicationRule.objects.filter(campaign_id=campaign.pk).exists()
    return known


def _submission_create_portable(request: SubmitRequest) -> SubmitResult:
    campaign, user = request.campaign, request.user
    if not campaign_has_annotator(campaign, user):
        raise NotInPool()
    if not IDEMPOTENCY_KEY_RE.match(request.idempotency_key or ""):
        raise outdated_form()
    try:
        return _submission_create_locked(request)
    except QuotaReached:
        leased = Assignment.objects.filter(campaign=campaign, annotator=user, status=AssignmentStatus.LEASED)
        for slot_id in leased.values_list("pk", flat=True):
            slot_release(pool=CAMPAIGN_SLOTS, slot_id=slot_id, user=user)
        raise


def _submission_create_locked(request: SubmitRequest) -> SubmitResult:
    campaign, task_id, user = request.campaign, request.task_id, request.user
    idempotency_key, answer = request.idempotency_key, request.answer
    with transaction.atomic():
        # The worker's row first (crowd accounts only): their quota is counted and their answer stored under it.
        tasks_left = worker_tasks_left(campaign, user, lock=True)
        assignment: Assignment | None = (
            Assignment.objects.select_for_update()
            .select_related("task__turn", "campaign")
            .filter(campaign=campaign, task_id=task_id, annotator=user)
            .annotate(rated_before=_slot_rated_before(campaign=campaign, user_id=user.pk))
            .first()
        )
        # Read under the lock: a correction that waited for another one must be stamped after it, or its history
        # row would say the version it replaces was replaced before it was written.
        moment = request.now or timezone.now()
        submission = None
        if assignment is not None and assignment.status == AssignmentStatus.SUBMITTED:
            submission = Submission.objects.select_for_update().get(assignment=assignment)
        if submission is None or submission.idempotency_key != idempotency_key:
            _check_key_owner(idempotency_key=idempotency_key, assignment=assignment)
        if assignment is not None and submission is not None:
            return submission_revise(
                campaign=campaign, submission=submission, assignment=assignment, user=user,
                idempotency_key=idempotency_key, answer=answer, moment=moment,
            )  # fmt: skip
        if tasks_left == 0:
            raise QuotaReached()
        former: Assignment | None = None
        if assignment is None or assignment.status != AssignmentStatus.LEASED:
            former = _former_slot(campaign=campaign, task_id=task_id, slot_id=request.former_slot_id)
            assignment = slot_reclaim(pool=CAMPAIGN_SLOTS, campaign=campaign, task_id=task_id, user=user, now=moment)
        if assignment is not None:
            submission = _submission_insert(
                campaign=campaign, assignment=assignment, user=user, idempotency_key=idempotency_key, answer=answer,
                moment=moment,
                # A reclaimed slot was taken by the claim rule, which already leaves such tasks out.
                rated_before=former is None and bool(getattr(assignment, "rated_before", False)),
            )  # fmt: skip
            return SubmitResult(submission=submission, replayed=False, reclaimed=former is not None)
    assert former is not None  # only a lost lease leaves no slot to submit
    assignment_draft_keep_answer(slot=former, user=user, answer=answer)
    raise LeaseLost()


def _slot_rated_before(*, campaign: Campaign, user_id: int) -> Any:
    """The rated-before rule on an assignment query, so the locking read of the slot answers it too."""
    return rated_before_expression(
        campaign=campaign, user_id=user_id, task_column=f"{Assignment._meta.db_table}.task_id"
    )


def _submission_insert(
    *,
    campaign: Campaign,
    assignment: Assignment,
    user: User,
    idempotency_key: str,
    answer: TaskAnswer,
    moment: datetime,
    rated_before: bool,
) -> Submission:
    """The portable submit of a slot leased to the user, inside the caller's transaction. `rated_before`: the rule
    of annotations.slots.campaign_slots, read with the slot."""
    candidates = task_candidates(assignment=assignment, user_id=user.pk)
    scales = campaign_scales(campaign)
    problems = answer_problems(campaign=campaign, candidates=candidates, scales=scales, answer=answer)
    if problems:
        raise SubmissionInvalid(problems)
    if rated_before:
        raise already_rated()
    spent = max(0.0, (moment - assignment.leased_at).total_seconds()) if assignment.leased_at else 0.0
    by_number = {c.number: c.response_id for c in candidates}
    entered = rating_values(candidates=candidates, scales=scales, answer=answer)
    submission = Submission.objects.create(
        assignment=assignment,
        idempotency_key=idempotency_key,
        answer_digest=answer_digest(
            answer_version(campaign=campaign, candidates=candidates, answer=answer, entered=entered)
        ),
        preferred_response_id=by_number.get(answer.preference) if answer.preference else None,
        none_appropriate=answer.none_appropriate and campaign.ask_preference,
        rationale=answer.rationale.strip(),
        comment=answer.comment.strip(),
        seconds_spent=spent,
    )
    ratings_store(
        campaign=campaign, user=user, candidates=candidates, scales=scales, answer=answer, submission=submission
    )
    if not slot_complete(pool=CAMPAIGN_SLOTS, slot=assignment, user=user, now=moment, seconds_spent=spent):
        raise NotLeased()  # the annotator left the pool since the check above
    task_drafts_drop(task_id=assignment.task_id, user=user)
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


# What submission_create needs to know before writing, read in one round trip without locks: the single
# statement that writes re-checks all of it while holding the row lock.
_SUBMIT_STATE_SQL = f"""
SELECT {slot_pool_sql(CAMPAIGN_SLOTS)},
       (SELECT used.assignment_id FROM annotations_submission used WHERE used.idempotency_key = %(key)s),
       (SELECT used.answer_digest FROM annotations_submission used WHERE used.idempotency_key = %(key)s),
       (SELECT rater.id FROM annotations_rater rater WHERE rater.dataset_id = %(dataset)s AND rater.user_id = %(user)s),
       slot.id, slot.status, slot.leased_at,
       ARRAY(SELECT shown.response_id FROM annotations_task_responses shown WHERE shown.task_id = slot.task_id),
       {rated_before_sql("%(task)s")}
FROM (SELECT 1) AS one
LEFT JOIN annotations_assignment slot
       ON slot.campaign_id = %(campaign)s AND slot.task_id = %(task)s AND slot.annotator_id = %(user)s
"""  # noqa: S608  # nosec B608 - the pool fragment is built from model metadata


# The writes of submission_create in one statement. `finished` is the slot engine's completing UPDATE: it flips the
# lease to submitted only if it is still this annotator's open lease and they are still in the pool of an active
# campaign; the submission and the ratings are inserted, and the user's drafts of the task deleted, only for the row
# it flipped, so a request that lost a race writes nothing. Positions put app ratings after every earlier rating of
# the same answer and aspect, as ratings_insert does.
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
    rated_before: bool  # the rule the claim applies too: one of the task's answers already rated by this rater


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
    in_pool, key_used_by, key_digest, rater_id, assignment_id, status, leased_at, response_ids, rated_before = row
    return _SubmitState(
        in_pool=bool(in_pool),
        key_used_by=key_used_by,
        key_digest=key_digest,
        rater_id=rater_id,
        assignment_id=assignment_id,
        status=status,
        leased_at=leased_at,
        response_ids=list(response_ids or []),
        rated_before=bool(rated_before),
    )


def _submit_in_one_statement(request: SubmitRequest) -> SubmitResult | Declined:
    """The first answer to a lease the user still holds, in one statement; every other case (no slot of theirs, a
    lease lost or not theirs any more, a correction, a stale page, a race lost to another request) is declined with
    its reason, and the portable form then decides it under row locks. `former_slot_id` only matters to those."""
    campaign, task_id, user = request.campaign, request.task_id, request.user
    idempotency_key, answer = request.idempotency_key, request.answer
    state = _submit_state(campaign=campaign, task_id=task_id, user=user, idempotency_key=idempotency_key)
    if not state.in_pool:
        raise NotInPool()
    if not IDEMPOTENCY_KEY_RE.match(idempotency_key or ""):
        raise outdated_form()
    if state.assignment_id is None:
        return Declined.NO_SLOT
    if any(scale.aspect.is_spans for scale in campaign_scales(campaign)):
        return Declined.SPAN_ASPECT
    order = candidate_order(campaign=campaign, task=Task(pk=task_id), user_id=user.pk, response_ids=state.response_ids)
    candidates = [Candidate(number=i + 1, response_id=pk, text="") for i, pk in enumerate(order)]
    scales = campaign_scales(campaign)
    problems = answer_problems(campaign=campaign, candidates=candidates, scales=scales, answer=answer)
    if problems:
        raise SubmissionInvalid(problems)
    entered = rating_values(candidates=candidates, scales=scales, answer=answer)
    digest = answer_digest(answer_version(campaign=campaign, candidates=candidates, answer=answer, entered=entered))
    if state.key_used_by is not None and state.key_used_by == state.assignment_id and state.key_digest == digest:
        # A double click: the same request again, told apart from a correction by the stored answer's digest.
        return SubmitResult(
            submission=Submission.objects.get(assignment_id=state.assignment_id),
            replayed=True,
            form=SubmitForm.ONE_STATEMENT,
        )
    if state.status != AssignmentStatus.LEASED or state.key_used_by is not None:
        return Declined.NOT_A_FIRST_ANSWER  # rare, and decided under row locks
    if state.rated_before:
        raise already_rated()
    rater_id = state.rater_id or rater_for_user(dataset=campaign.dataset, user=user).pk
    moment = request.now or timezone.now()
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
            raise already_rated() from None
        if getattr(exc.__cause__, "sqlstate", None) != "23505":
            raise  # only a unique violation (the key, taken meanwhile) is decided below
        submission_id = None  # the key was taken meanwhile: decided below from what is stored now
    if submission_id is None:
        # Another request finished this lease first, or it was lost meanwhile: decided as if this came second.
        return Declined.RACE_LOST
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
    return SubmitResult(submission=submission, replayed=False, form=SubmitForm.ONE_STATEMENT)

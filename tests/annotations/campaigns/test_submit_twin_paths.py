"""Submit and draft save have two forms: one SQL statement (Postgres) and portable ORM code (every database). Each
case below runs once per form, each in a world of its own built the same way, and the two must end the same: the
same outcome of every call (result flags or the error's type and message) and the same rows stored (ratings,
submissions, their history, drafts, slots). On SQLite only the portable form exists, so the case checks it alone.
Each case also names which form decided each submit: the one statement, or the portable form with the reason the
statement declined (as submission_store logs it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.utils import timezone

from annotations.campaigns import drafts, submissions
from annotations.campaigns.answers import SubmitForm, TaskAnswer
from annotations.campaigns.claims import assignment_claim
from annotations.campaigns.submissions import Declined, SubmitRequest
from annotations.campaigns.tasks import task_candidates
from annotations.models import (
    Assignment,
    AssignmentDraft,
    Campaign,
    Rating,
    Submission,
    SubmissionRevision,
)
from tests.annotate.factories import make_campaign, make_dataset

pytestmark = pytest.mark.django_db


def _by_the_service(request: SubmitRequest) -> Any:
    """The statement, and the portable form for every case the statement declines (a correction, a lost lease, a
    lost race), as submission_create runs them; on SQLite the portable form alone."""
    return submissions.submission_store(request)


def _portable_only(request: SubmitRequest) -> Any:
    return submissions._submission_create_portable(request)


SUBMIT_FORMS: dict[str, Callable[[SubmitRequest], Any]] = {"portable": _by_the_service}
if connection.vendor == "postgresql":
    SUBMIT_FORMS = {"portable": _portable_only, "one statement": _by_the_service}


@contextmanager
def declines_logged() -> Iterator[list[Declined]]:
    """The reasons submission_store logs when the one-statement form leaves a submit to the portable form."""
    seen: list[Declined] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.declined)  # type: ignore[attr-defined]

    logger, handler = logging.getLogger(submissions.__name__), Keep(logging.DEBUG)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield seen
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


class World:
    """One campaign of its own (raters_per_item as asked) and the same three people, for one form of the rule."""

    def __init__(
        self, tag: str, owner: User, people: list[User], *, raters: int, items: int = 2, revisit: bool = True
    ) -> None:
        self.tag = tag
        self.people = people
        dataset = make_dataset(f"twin-{tag}", owner=owner, items=items, systems=2)
        self.campaign: Campaign = make_campaign(
            dataset, people[:2], name=f"twin-{tag}", raters_per_item=raters, allow_revisit=revisit
        )
        # Each campaign shuffles its tasks with a secret seed of its own, so tasks are named by the order in which
        # the case first claimed them, not by item.
        self.claimed: list[int] = []
        # Per submit through the service: which form decided it ("one statement", or the reason it was declined).
        self.forms: list[str] = []

    def claim(self, user: User) -> Assignment:
        slot = assignment_claim(campaign=self.campaign, user=user)
        assert slot is not None
        if slot.task_id not in self.claimed:
            self.claimed.append(slot.task_id)
        return slot

    def task_name(self, task_id: int) -> str:
        return f"task {self.claimed.index(task_id)}" if task_id in self.claimed else "unclaimed"

    def key(self, name: str) -> str:
        # Idempotency keys are unique across the whole database, so each world has its own.
        return f"{self.tag}-{name}".ljust(12, "0")

    def answer(self, slot: Assignment, user: User, value: float, reason: str = "first reason") -> TaskAnswer:
        numbers = [c.number for c in task_candidates(assignment=slot, user_id=user.pk)]
        return TaskAnswer(
            ratings={(n, 1): value for n in numbers} | {(n, 2): 0.0 for n in numbers}, preference=1, rationale=reason
        )


def outcome(call: Callable[[], Any]) -> tuple[Any, ...]:
    try:
        result = call()
    except Exception as exc:  # the type and message are the outcome compared
        return ("refused", type(exc).__name__, str(exc))
    if isinstance(result, bool):
        return ("stored" if result else "passed on",)
    return ("stored", result.replayed, result.revised, result.reclaimed)


def stored(world: World) -> dict[str, Any]:
    campaign = world.campaign
    strip = len(world.tag) + 1
    task_of_answer = {
        (response_id, user_id): task_id
        for task_id, response_id, user_id in Assignment.objects.filter(campaign=campaign).values_list(
            "task_id", "task__responses", "annotator_id"
        )
    }
    return {
        "ratings": sorted(
            (name, world.task_name(task_of_answer[(response, user)]), system, aspect, value, missing, raw, reason)
            for name, user, response, system, aspect, value, missing, raw, reason in Rating.objects.filter(
                rater__dataset=campaign.dataset, rater__user__isnull=False
            ).values_list(
                "rater__user__username",
                "rater__user_id",
                "response_id",
                "response__system__key",
                "aspect__name",
                "value",
                "is_missing",
                "raw",
                "rationale",
            )
        ),
        "submissions": sorted(
            (
                s.assignment.annotator.username if s.assignment.annotator else None,
                world.task_name(s.assignment.task_id),
                s.version,
                s.rationale,
                s.idempotency_key[strip:],
                s.preferred_response is not None,
            )
            for s in Submission.objects.filter(assignment__campaign=campaign).select_related(
                "assignment__annotator", "preferred_response"
            )
        ),
        "history": sorted(
            (r.version, r.rationale, r.idempotency_key[strip:])
            for r in SubmissionRevision.objects.filter(submission__assignment__campaign=campaign)
        ),
        "drafts": sorted(
            (d.annotator.username, world.task_name(d.assignment.task_id), sorted(d.values.items()))
            for d in AssignmentDraft.objects.filter(assignment__campaign=campaign).select_related(
                "annotator", "assignment"
            )
        ),
        "slots": sorted(
            (world.task_name(s.task_id), s.slot, s.status, s.annotator.username if s.annotator else None)
            for s in Assignment.objects.filter(campaign=campaign).select_related("annotator")
        ),
    }


def submit(form: str, world: World, slot: Assignment, user: User, answer: TaskAnswer, key: str, **kw: Any) -> Any:
    request = SubmitRequest(
        campaign=world.campaign,
        task_id=slot.task_id,
        user=user,
        idempotency_key=kw.get("raw_key", world.key(key)),
        answer=answer,
        now=kw.get("now"),
        former_slot_id=kw.get("former_slot_id"),
    )
    results: list[Any] = []

    def call() -> Any:
        results.append(SUBMIT_FORMS[form](request))
        return results[-1]

    with declines_logged() as declined:
        ended = outcome(call)
    if SUBMIT_FORMS[form] is _by_the_service:
        assert len(declined) <= 1, declined
        world.forms.append(declined[0].name if declined else "one statement")
        if results:  # an answer stored: the result names the same form
            ran = SubmitForm.PORTABLE if declined else SubmitForm.ONE_STATEMENT
            assert results[0].form == ran, (results[0].form, declined)
    return ended


def repeats_and_a_correction(form: str, world: World) -> list[Any]:
    first, _second, _third = world.people
    slot = world.claim(first)
    return [
        submit(form, world, slot, first, world.answer(slot, first, 3), "first"),
        submit(form, world, slot, first, world.answer(slot, first, 3), "first"),  # a double click
        submit(form, world, slot, first, world.answer(slot, first, 3), "tab2"),  # the same answer, a second tab
        submit(form, world, slot, first, world.answer(slot, first, 1, "corrected"), "fix"),
        submit(form, world, slot, first, world.answer(slot, first, 2), "first"),  # a stale page with its old key
    ]


def a_correction_where_corrections_are_off(form: str, world: World) -> list[Any]:
    first = world.people[0]
    slot = world.claim(first)
    return [
        submit(form, world, slot, first, world.answer(slot, first, 3), "closed1"),
        submit(form, world, slot, first, world.answer(slot, first, 1), "closed2"),
    ]


def values_off_the_scale_and_bad_input(form: str, world: World) -> list[Any]:
    first, _second, outsider = world.people
    slot = world.claim(first)
    return [
        submit(form, world, slot, first, world.answer(slot, first, 9), "range1"),
        submit(form, world, slot, first, world.answer(slot, first, -1), "range2"),
        submit(form, world, slot, first, world.answer(slot, first, 3, "nul \x00 here"), "nul001"),
        submit(form, world, slot, first, world.answer(slot, first, 3), "", raw_key="not a key!"),
        submit(form, world, slot, outsider, world.answer(slot, first, 3), "outsider"),
        submit(form, world, slot, first, world.answer(slot, first, 2), "fine01"),
    ]


def an_expired_lease_still_held(form: str, world: World) -> list[Any]:
    first = world.people[0]
    slot = world.claim(first)
    later = timezone.now() + timedelta(minutes=world.campaign.lease_minutes + 5)
    return [submit(form, world, slot, first, world.answer(slot, first, 3), "held01", now=later)]


def a_lost_lease(form: str, world: World) -> list[Any]:
    first, second, _third = world.people
    lost = world.claim(first)
    Assignment.objects.filter(pk=lost.pk).update(lease_expires_at=timezone.now() - timedelta(minutes=1))
    taken = world.claim(second)
    assert taken.pk == lost.pk  # the expired slot went to the next annotator
    return [submit(form, world, lost, first, world.answer(lost, first, 2), "lost01", former_slot_id=lost.pk)]


def an_answer_rated_in_another_campaign(form: str, world: World) -> list[Any]:
    """Both campaigns hold the same one task's answers; the rater rates them in the other campaign first."""
    first = world.people[0]
    held = world.claim(first)
    other = make_campaign(world.campaign.dataset, world.people[:2], name=f"{world.tag}-other", raters_per_item=1)
    elsewhere = assignment_claim(campaign=other, user=first)
    assert elsewhere is not None and elsewhere.task.turn_id == held.task.turn_id
    rated = SUBMIT_FORMS[form](
        SubmitRequest(
            campaign=other, task_id=elsewhere.task_id, user=first, idempotency_key=world.key("other"),
            answer=world.answer(elsewhere, first, 3),
        )
    )  # fmt: skip
    assert not rated.replayed
    return [submit(form, world, held, first, world.answer(held, first, 2), "here01")]


STATEMENT = "one statement"
LATER = Declined.NOT_A_FIRST_ANSWER.name
# Per case, the form that decided each submit on Postgres: a refusal of bad input is the statement's own decision.
CASES: list[tuple[Callable[[str, World], list[Any]], dict[str, Any], list[str]]] = [
    (repeats_and_a_correction, {"raters": 1}, [STATEMENT, STATEMENT, LATER, LATER, LATER]),
    (a_correction_where_corrections_are_off, {"raters": 1, "revisit": False}, [STATEMENT, LATER]),
    (values_off_the_scale_and_bad_input, {"raters": 1}, [STATEMENT] * 6),
    (an_expired_lease_still_held, {"raters": 1}, [STATEMENT]),
    # no slot left: refused, and the answer kept as a draft
    (a_lost_lease, {"raters": 1, "items": 1}, [Declined.NO_SLOT.name]),
    # the lost answer takes the task's other open slot
    (a_lost_lease, {"raters": 2, "items": 1}, [Declined.NO_SLOT.name]),
    # refused by the rule the claim applies
    (an_answer_rated_in_another_campaign, {"raters": 1, "items": 1}, [STATEMENT]),
]


@pytest.mark.parametrize(("case", "setup", "forms"), CASES, ids=lambda value: getattr(value, "__name__", None) or "-")
def test_both_forms_of_submit_end_the_same(case, setup, forms, researcher, annotators) -> None:  # type: ignore[no-untyped-def]
    ends, forms_seen = {}, {}
    for number, form in enumerate(SUBMIT_FORMS):
        world = World(f"w{number}", researcher, annotators, **setup)
        ends[form] = (case(form, world), stored(world))
        forms_seen[form] = world.forms
    if connection.vendor == "postgresql":
        assert forms_seen == {"portable": [], "one statement": forms}
    else:
        assert forms_seen == {"portable": [Declined.NOT_POSTGRES.name] * len(forms)}
    portable_calls, portable_rows = ends["portable"]
    assert portable_calls  # every case makes calls, and the rows they leave are compared below
    assert any(call[0] == "stored" for call in portable_calls) or any(portable_rows.values())
    for form, (calls, rows) in ends.items():
        assert calls == portable_calls, form
        assert rows == portable_rows, form


def _draft_by_statement_then_portable(**kwargs: Any) -> None:
    """The statement, and the portable code when the statement stores nothing (a refusal it leaves the portable
    code to name), as the service runs them on Postgres."""
    if not drafts._draft_save_in_one_statement(**kwargs):
        drafts._draft_save_portable(**kwargs)


DRAFT_FORMS: dict[str, Callable[..., None]] = {"portable": drafts._draft_save_portable}
if connection.vendor == "postgresql":
    DRAFT_FORMS["one statement"] = _draft_by_statement_then_portable


def draft_cases(form: str, world: World) -> list[Any]:
    first, _second, outsider = world.people
    slot = world.claim(first)

    def save(user: User, values: dict[str, str]) -> tuple[Any, ...]:
        def call() -> bool:
            DRAFT_FORMS[form](campaign=world.campaign, task_id=slot.task_id, user=user, values=values)
            return True

        return outcome(call)

    return [
        save(first, {"r-1-1": "3", "rationale": "so far"}),
        save(first, {"r-1-1": "2", "r-2-2": "0", "comment": "changed"}),
        save(first, {"r-9-1": "3"}),  # a candidate the task does not have
        save(first, {"unknown": "x"}),
        save(first, {"rationale": "x" * 20_000}),
        save(outsider, {"r-1-1": "3"}),
    ]


def test_both_forms_of_draft_save_end_the_same(researcher, annotators) -> None:  # type: ignore[no-untyped-def]
    ends = {}
    for number, form in enumerate(DRAFT_FORMS):
        world = World(f"d{number}", researcher, annotators, raters=1)
        ends[form] = (draft_cases(form, world), stored(world))
    portable_calls, portable_rows = ends["portable"]
    assert [call[0] for call in portable_calls] == ["stored", "stored", "refused", "refused", "refused", "refused"]
    assert portable_rows["drafts"]
    for form, (calls, rows) in ends.items():
        assert calls == portable_calls, form
        assert rows == portable_rows, form

"""An annotator's answer to a task: what the form sends (TaskAnswer), the checks it must pass, the Rating values
it becomes, and the digest that tells a repeat of the same answer from a correction. Nothing here writes."""

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from django.utils.translation import gettext as _

from annotations.campaigns.errors import FieldProblem, SubmissionInvalid
from annotations.errors import RatingOutOfRange
from annotations.models import Campaign, Submission
from annotations.rubrics.specs import format_number
from annotations.rubrics.task_sheet import NA_TOKEN, Candidate, Scale, rating_field_id
from annotations.services import rating_value_from_token
from annotations.spans.answers import (
    MAX_SPAN_VALUE_CHARS,
    SpanAnswer,
    SpanAnswerInvalid,
    is_span_value,
    parse_span_answer,
)
from annotations.text.storable import is_storable

MAX_TEXT_CHARS = 10_000


MAX_VALUE_CHARS = 50  # a rating cell or the preference, as the form sends it


def value_limit(value: str) -> int:
    """The longest a form value may be: a span aspect's cell holds its marked spans as JSON."""
    return MAX_SPAN_VALUE_CHARS if is_span_value(value) else MAX_VALUE_CHARS


IDEMPOTENCY_KEY_RE = re.compile(r"^[A-Za-z0-9_-]{8,64}$")


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


class SubmitForm(Enum):
    """Which of the submit's two forms stored an answer (annotations.campaigns.submissions)."""

    ONE_STATEMENT = "one statement"
    PORTABLE = "portable"


@dataclass(frozen=True)
class SubmitResult:
    submission: Submission
    replayed: bool
    revised: bool = False  # a correction of a submitted answer, whose earlier version went to its history
    reclaimed: bool = False  # the lease had passed to someone else; the answer took another free slot of the task
    form: SubmitForm = SubmitForm.PORTABLE


def answer_problems(
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
            if scale.aspect.is_spans and value is not MISSING:
                problem = _span_problem(scale, candidate, value)
                if problem:
                    problems.append(
                        FieldProblem(
                            field_id,
                            _("Candidate %(n)s: %(aspect)s: %(problem)s")
                            % {"n": candidate.number, "aspect": scale.aspect.display_label, "problem": problem},
                        )
                    )
            elif value is None:
                problems.append(
                    FieldProblem(
                        field_id,
                        _("Candidate %(n)s: choose a value for %(aspect)s.")
                        % {"n": candidate.number, "aspect": scale.aspect.display_label},
                    )
                )
            elif value is MISSING:
                if not scale.allows_missing:
                    problems.append(
                        FieldProblem(
                            field_id,
                            _("Candidate %(n)s: %(aspect)s cannot be N/A.")
                            % {"n": candidate.number, "aspect": scale.aspect.display_label},
                        )
                    )
            elif not _value_allowed(scale, value):
                problems.append(
                    FieldProblem(
                        field_id,
                        _("Candidate %(n)s: %(aspect)s must be within %(range)s.")
                        % {"n": candidate.number, "aspect": scale.aspect.display_label, "range": scale.range_text},
                    )
                )
    # A preference needs two candidates to choose between; a task showing one answer asks for none.
    if campaign.ask_preference and len(candidates) > 1:
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
    if not is_storable(answer.rationale):
        problems.append(FieldProblem("rationale", _("Reason: remove the characters that cannot be saved.")))
    if not is_storable(answer.comment):
        problems.append(FieldProblem("comment", _("Comment: remove the characters that cannot be saved.")))
    return problems


def _span_answer(scale: Scale, candidate: Candidate, value: Any) -> SpanAnswer:
    """A span cell's answer; an empty cell is an answer that marks no error (refused where the scheme asks for a
    confirmation)."""
    empty = value is None or (isinstance(value, str) and not value.strip())
    return parse_span_answer({} if empty else value, text=candidate.text, scheme=scale.aspect.scheme)


def _span_problem(scale: Scale, candidate: Candidate, value: Any) -> str:
    if value is not None and not isinstance(value, str):
        return _("the marked spans could not be read")
    try:
        _span_answer(scale, candidate, value)
    except SpanAnswerInvalid as exc:
        return str(exc)
    return ""


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


def answer_form_values(answer: TaskAnswer) -> dict[str, str]:
    """A TaskAnswer as the task form's field values, the shape a draft keeps."""
    values: dict[str, str] = {}
    for (number, index), value in answer.ratings.items():
        if value is MISSING:
            values[rating_field_id(number, index)] = NA_TOKEN
        elif isinstance(value, (int, float)) and value == value:
            values[rating_field_id(number, index)] = format_number(value)
        elif isinstance(value, str) and is_span_value(value) and len(value) <= MAX_SPAN_VALUE_CHARS:
            values[rating_field_id(number, index)] = value
    if answer.preference:
        values["preference"] = str(answer.preference)
    if answer.none_appropriate:
        values["none_appropriate"] = "1"
    values["rationale"] = answer.rationale[:MAX_TEXT_CHARS]
    values["comment"] = answer.comment[:MAX_TEXT_CHARS]
    return {name: value for name, value in values.items() if value and is_storable(value)}


@dataclass(frozen=True)
class AnswerVersion:
    """One version of an answer, comparable: the task-level fields and (response, aspect, raw, value, missing)."""

    preferred_response_id: int | None
    none_appropriate: bool
    rationale: str
    comment: str
    ratings: tuple[tuple[int, int, Any, float | None, bool], ...]


def answer_version(
    *, campaign: Campaign, candidates: list[Candidate], answer: TaskAnswer, entered: list[tuple[Any, ...]]
) -> AnswerVersion:
    by_number = {c.number: c.response_id for c in candidates}
    return AnswerVersion(
        preferred_response_id=by_number.get(answer.preference) if answer.preference else None,
        none_appropriate=answer.none_appropriate and campaign.ask_preference,
        rationale=answer.rationale.strip(),
        comment=answer.comment.strip(),
        ratings=tuple(sorted(entered)),
    )


def answer_digest(version: AnswerVersion) -> str:
    fields = [version.preferred_response_id, version.none_appropriate, version.rationale, version.comment]
    return hashlib.sha256(json.dumps([*fields, version.ratings]).encode()).hexdigest()


def rating_values(
    *, candidates: list[Candidate], scales: list[Scale], answer: TaskAnswer
) -> list[tuple[int, int, Any, float | None, bool]]:
    """(response id, aspect id, raw token, value, is missing) per candidate and aspect, as Rating rows store them."""
    rows: list[tuple[int, int, Any, float | None, bool]] = []
    for candidate in candidates:
        for scale in scales:
            entered = answer.ratings.get((candidate.number, scale.index))
            if scale.aspect.is_spans and entered is not MISSING:
                try:
                    spans = _span_answer(scale, candidate, entered)
                except SpanAnswerInvalid as exc:  # answer_problems already refused these
                    field_id = rating_field_id(candidate.number, scale.index)
                    raise SubmissionInvalid([FieldProblem(field_id, str(exc))]) from None
                score = spans.score(scale.aspect.scheme, candidate.text)
                rows.append((candidate.response_id, scale.aspect.pk, spans.token(), score, False))
                continue
            raw = _raw_token(scale, entered)
            try:
                value, is_missing = rating_value_from_token(aspect=scale.aspect, raw=raw)
            except RatingOutOfRange as exc:  # answer_problems already refused these; this guards the invariant
                raise SubmissionInvalid(
                    [FieldProblem(rating_field_id(candidate.number, scale.index), str(exc))]
                ) from None
            rows.append((candidate.response_id, scale.aspect.pk, raw, value, is_missing))
    return rows

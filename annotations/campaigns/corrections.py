"""Corrections: a second answer to a task the annotator already submitted.

A repeat of the current answer, or of the version a request's key stored, changes nothing. Any other answer, when
the campaign allows corrections, moves the current version to the submission's history and rewrites the Rating rows
in place, so exports and statistics read the corrected answer. Corrections are rare and decided under row locks,
so they have one form, used by both submit forms."""

from datetime import datetime

from django.contrib.auth.models import User

from annotations.campaigns.answers import (
    AnswerVersion,
    SubmitResult,
    TaskAnswer,
    answer_digest,
    answer_problems,
    answer_version,
    rating_values,
)
from annotations.campaigns.drafts import task_drafts_drop
from annotations.campaigns.errors import RevisitRefused, SubmissionInvalid
from annotations.campaigns.ratings import ratings_insert
from annotations.campaigns.tasks import candidate_order
from annotations.models import Assignment, Campaign, Rating, Response, Submission, SubmissionRevision, Task
from annotations.rubrics.task_sheet import Candidate, campaign_scales
from annotations.services import error_spans_write, rater_for_user


def _version_of_revision(revision: SubmissionRevision) -> AnswerVersion:
    return AnswerVersion(
        preferred_response_id=revision.preferred_response_id,
        none_appropriate=revision.none_appropriate,
        rationale=revision.rationale,
        comment=revision.comment,
        ratings=tuple(
            sorted((r["response_id"], r["aspect_id"], r["raw"], r["value"], r["is_missing"]) for r in revision.ratings)
        ),
    )


def submission_revise(
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
    scales = campaign_scales(campaign)
    # Error spans are checked against the answer texts; scales need no text.
    texts = (
        dict(Response.objects.filter(pk__in=order).values_list("pk", "text"))
        if any(scale.aspect.is_spans for scale in scales)
        else {}
    )
    candidates = [Candidate(number=i + 1, response_id=pk, text=texts.get(pk, "")) for i, pk in enumerate(order)]
    problems = answer_problems(campaign=campaign, candidates=candidates, scales=scales, answer=answer)
    if problems:
        raise SubmissionInvalid(problems)
    by_number = {c.number: c.response_id for c in candidates}
    entered = rating_values(candidates=candidates, scales=scales, answer=answer)
    wanted = answer_version(campaign=campaign, candidates=candidates, answer=answer, entered=entered)
    if submission.answer_digest and submission.answer_digest == answer_digest(wanted):
        return SubmitResult(submission=submission, replayed=True)  # the current answer again: a double click
    rater = rater_for_user(dataset=campaign.dataset, user=user)
    stored = {
        (rating.response_id, rating.aspect_id): rating
        for rating in Rating.objects.select_for_update().filter(
            rater=rater, response_id__in=list(by_number.values()), aspect_id__in=[s.aspect.pk for s in scales]
        )
    }
    current = AnswerVersion(
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
    submission.answer_digest = answer_digest(wanted)
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
    error_spans_write(ratings=changed)
    if added:
        ratings_insert(rater=rater, entered=added, submission=submission)
    task_drafts_drop(task_id=assignment.task_id, user=user)
    return SubmitResult(submission=submission, replayed=False, revised=True)

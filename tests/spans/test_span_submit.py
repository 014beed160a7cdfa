"""Error spans through the annotator's submit path: stored as ErrorSpan rows with the MQM score as the Rating's
value, refused with a reason, kept in drafts, shown again on a revisit and replaced by a correction."""

import json

import pytest

from annotations.campaigns.answers import TaskAnswer
from annotations.campaigns.claims import assignment_claim
from annotations.campaigns.drafts import assignment_draft_save
from annotations.campaigns.errors import SubmissionInvalid
from annotations.campaigns.submissions import submission_create
from annotations.campaigns.tasks import submission_form_values, task_candidates
from annotations.models import AssignmentDraft, ErrorSpan, Rating
from annotations.selectors import human_error_spans
from annotations.spans.error_spans import Span
from tests.spans.world import span_campaign

pytestmark = pytest.mark.django_db


def _spans(*spans: tuple[int, int, str, str]) -> str:
    return json.dumps(
        {
            "offsets": "utf16",
            "spans": [{"start": s, "end": e, "category": c, "severity": v} for s, e, c, v in spans],
        }
    )


def _submit(campaign, user, value: str, key: str):  # type: ignore[no-untyped-def]
    assignment = assignment_claim(campaign=campaign, user=user)
    assert assignment is not None
    (candidate,) = task_candidates(assignment=assignment, user_id=user.pk)
    submission_create(
        campaign=campaign,
        task_id=assignment.task_id,
        user=user,
        idempotency_key=key,
        answer=TaskAnswer(ratings={(1, 1): value, (1, 2): 4.0}),
    )
    return assignment, candidate


def test_spans_are_stored_with_their_score_and_corrected(annotator1) -> None:  # type: ignore[no-untyped-def]
    campaign = span_campaign([annotator1])
    assignment = assignment_claim(campaign=campaign, user=annotator1)
    assert assignment is not None
    (candidate,) = task_candidates(assignment=assignment, user_id=annotator1.pk)
    text = candidate.text
    word = "fish" if "fish" in text else ("たべ" if "たべ" in text else "cafe\u0301")
    units = len(text[: text.index(word)].encode("utf-16-le")) // 2
    value = _spans(
        (units, units + len(word.encode("utf-16-le")) // 2, "Fluency/Spelling", "major"),
        (0, 1, "Fluency/Grammar", "minor"),
    )
    submission_create(
        campaign=campaign, task_id=assignment.task_id, user=annotator1, idempotency_key="first-key-1",
        answer=TaskAnswer(ratings={(1, 1): value, (1, 2): 4.0}),
    )  # fmt: skip
    rating = Rating.objects.get(aspect__name="mqm", rater__user=annotator1)
    assert rating.value == 6.0
    stored = list(ErrorSpan.objects.filter(rating=rating).order_by("position"))
    assert [text[s.start : s.end] for s in stored] == [word, text[0]]  # type: ignore[misc]
    start = text.index(word)
    assert human_error_spans(aspect_id=rating.aspect_id)[(candidate.response_id, rating.rater_id)] == [
        Span(start, start + len(word), "Fluency/Spelling", "major"),
        Span(0, 1, "Fluency/Grammar", "minor"),
    ]

    # a revisit fills the form with the stored spans, in code points
    values = submission_form_values(assignment=assignment, user=annotator1)
    assert json.loads(values["r-1-1"])["spans"][0]["start"] == start

    # a correction drops the first error and changes the second one's severity
    submission_create(
        campaign=campaign, task_id=assignment.task_id, user=annotator1, idempotency_key="second-key-2",
        answer=TaskAnswer(ratings={(1, 1): _spans((0, 1, "Fluency/Grammar", "major")), (1, 2): 4.0}),
    )  # fmt: skip
    rating.refresh_from_db()
    assert rating.value == 5.0
    assert list(ErrorSpan.objects.filter(rating=rating).values_list("start", "end", "severity")) == [(0, 1, "major")]


def test_bad_spans_are_refused_and_nothing_is_stored(annotator1) -> None:  # type: ignore[no-untyped-def]
    campaign = span_campaign([annotator1])
    for value, message in (
        (_spans((0, 500, "Fluency/Grammar", "minor")), "lies past the end"),
        (_spans((0, 1, "Style", "minor")), "unknown error category"),
        ("", "confirm that it has none"),
    ):
        with pytest.raises(SubmissionInvalid) as refused:
            _submit(campaign, annotator1, value, "refused-key")
        assert message in str(refused.value.problems[0].message)
    assert not Rating.objects.exists() and not ErrorSpan.objects.exists()


def test_no_error_confirmation_scores_zero(annotator1) -> None:  # type: ignore[no-untyped-def]
    campaign = span_campaign([annotator1])
    _submit(campaign, annotator1, json.dumps({"no_error": True, "spans": []}), "confirm-key")
    rating = Rating.objects.get(aspect__name="mqm")
    assert (rating.value, rating.raw) == (0.0, {"no_error": True, "spans": []})
    assert not ErrorSpan.objects.exists()


def test_a_draft_keeps_the_marked_spans(annotator1) -> None:  # type: ignore[no-untyped-def]
    campaign = span_campaign([annotator1])
    assignment = assignment_claim(campaign=campaign, user=annotator1)
    assert assignment is not None
    value = _spans((0, 2, "Fluency/Grammar", "minor"))
    assignment_draft_save(campaign=campaign, task_id=assignment.task_id, user=annotator1, values={"r-1-1": value})
    assert AssignmentDraft.objects.get().values == {"r-1-1": value}

"""A run's judge score is an aggregate of its judgments, and the database refuses one that could not be (run on
Postgres and SQLite): a mean over samples lies within the range of their scores, a pairwise win rate in [0, 1]."""

import pytest
from django.db import DatabaseError, transaction

from annotations.models import Response
from judging import services
from judging.methods.flows import mean_scores
from judging.models import Judge, JudgeKind, JudgeRun, JudgeScore, Judgment, JudgmentStatus
from judging.services import judge_run_write_scores
from tests.judging.factories import make_dataset

pytestmark = pytest.mark.django_db


def _run(method: str) -> tuple[JudgeRun, list[Response]]:
    dataset = make_dataset(items=1, systems=3)
    judge = Judge.objects.create(dataset=dataset, name=f"{method} judge", kind=JudgeKind.RUN)
    run = JudgeRun.objects.create(judge=judge, dataset=dataset, config_snapshot={}, method=method, status="succeeded")
    return run, list(Response.objects.filter(turn__item__dataset=dataset).order_by("pk"))


def _judged(run: JudgeRun, response: Response, *scores: float | None, status: str = JudgmentStatus.DONE) -> None:
    for sample, score in enumerate(scores):
        Judgment.objects.create(
            run=run, response=response, aspect_name="overall", sample=sample, status=status, score=score
        )


def _refused(**fields: object) -> bool:
    try:
        with transaction.atomic():
            JudgeScore.objects.create(**fields)
    except DatabaseError as exc:
        assert "aggregate of the finished judgments of that run" in str(exc)
        return True
    return False


def test_a_mean_over_samples_must_lie_within_their_scores() -> None:
    run, (sampled, single, unjudged) = _run("single")
    _judged(run, sampled, 2.0, 4.0, None)
    _judged(run, single, 3.0)
    _judged(run, unjudged, 5.0, status=JudgmentStatus.FAILED)
    judge = run.judge
    assert _refused(judge=judge, response=sampled, aspect_name="overall", value=4.5)
    assert _refused(judge=judge, response=sampled, aspect_name="overall", value=1.5)
    assert _refused(judge=judge, response=single, aspect_name="overall", value=3.2)
    assert not JudgeScore.objects.exists()

    # The service's means pass, the tolerance lets a mean one rounding step off its samples' range through, and a
    # score of an answer without finished judgments is not checked (the value of a failed judgment does not count).
    assert judge_run_write_scores(run_id=run.pk) == 2
    assert dict(JudgeScore.objects.values_list("response_id", "value")) == {sampled.pk: 3.0, single.pk: 3.0}
    assert not _refused(judge=judge, response=unjudged, aspect_name="overall", value=99.0)
    JudgeScore.objects.filter(response=unjudged).delete()
    Judgment.objects.filter(run=run, response=single).update(score=0.1)
    JudgeScore.objects.filter(response=single).update(value=0.1 * 3 / 3)
    assert JudgeScore.objects.get(response=single).value == pytest.approx(0.1)

    # Moving a score out of range is refused like inserting it.
    with pytest.raises(DatabaseError, match="aggregate of the finished judgments of that run"), transaction.atomic():
        JudgeScore.objects.filter(response=sampled).update(value=4.01)
    assert JudgeScore.objects.get(response=sampled).value == 3.0


def test_a_pairwise_win_rate_lies_between_zero_and_one() -> None:
    run, (first, second, _third) = _run("pairwise")
    Judgment.objects.create(
        run=run, response=first, other_response=second, aspect_name="overall", status=JudgmentStatus.DONE, score=1.0
    )
    assert _refused(judge=run.judge, response=first, aspect_name="overall", value=1.5)
    assert _refused(judge=run.judge, response=second, aspect_name="overall", value=-0.5)
    assert judge_run_write_scores(run_id=run.pk) == 2
    assert dict(JudgeScore.objects.values_list("response_id", "value")) == {first.pk: 1.0, second.pk: 0.0}


def test_scores_of_judges_without_a_run_are_not_checked() -> None:
    run, (answer, *_others) = _run("single")
    _judged(run, answer, 2.0)
    imported = Judge.objects.create(dataset=run.dataset, name="imported", kind=JudgeKind.IMPORTED)
    assert not _refused(judge=imported, response=answer, aspect_name="overall", value=40.0)


def test_the_set_based_score_write_stores_what_the_portable_one_does() -> None:
    """On Postgres the scores go in with one statement; the rows are those the portable path writes (on SQLite the
    service takes the portable path, so both sides are it)."""
    run, answers = _run("single")
    for n, answer in enumerate(answers):
        _judged(run, answer, 0.1 * (n + 1), 0.2, 1 / 3)
        Judgment.objects.create(run=run, response=answer, aspect_name="fluency", sample=0, status="done", score=n)

    def written() -> list[tuple[int, str, float]]:
        return list(
            JudgeScore.objects.filter(judge=run.judge)
            .order_by("response_id", "aspect_name")
            .values_list("response_id", "aspect_name", "value")
        )

    assert judge_run_write_scores(run_id=run.pk) == 6
    by_the_service = written()
    JudgeScore.objects.filter(judge=run.judge).delete()
    done = Judgment.objects.filter(run=run, status=JudgmentStatus.DONE)
    services._insert_scores(run.judge_id, mean_scores(done.values_list("response_id", "aspect_name", "score")))
    assert written() == by_the_service
    assert by_the_service[0] == (answers[0].pk, "fluency", 0.0)
    assert by_the_service[1] == (answers[0].pk, "overall", (0.1 + 0.2 + 1 / 3) / 3)

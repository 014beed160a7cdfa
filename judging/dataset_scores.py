"""Where a dataset file's judge scores live: judging's side of `annotations.datasets.judge_scores`, registered by
`judging.apps` so that the import and export of the annotations domain never import the judge."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from annotations.datasets.judge_scores import JudgeScoreStore
from annotations.models import Dataset
from judging.models import Judge, JudgeKind, JudgeScore, Judgment, JudgmentStatus


def judge_imported_create(*, dataset: Dataset, name: str) -> int:
    """A judge for the scores a file brought with it (kind imported); its id."""
    return int(Judge.objects.create(dataset=dataset, name=name, kind=JudgeKind.IMPORTED).pk)


def run_scores(response_ids: Iterable[int]) -> Iterator[tuple[int, str, str, float]]:
    """The scores of judge runs and derived judges for these answers (not those imported with the file)."""
    return iter(
        JudgeScore.objects.filter(
            response_id__in=list(response_ids), judge__kind__in=[JudgeKind.RUN, JudgeKind.DERIVED]
        )
        .order_by("judge__name", "aspect_name")
        .values_list("response_id", "judge__name", "aspect_name", "value")
    )


def run_rationales(response_ids: Iterable[int]) -> Iterator[tuple[int, str, str, float | None, str]]:
    """The finished judgments of these answers that carry a reasoning or a summary, by judge, aspect and sample."""
    rows = (
        Judgment.objects.filter(response_id__in=list(response_ids), status=JudgmentStatus.DONE)
        .exclude(reasoning="", summary="")
        .order_by("run__judge__name", "aspect_name", "sample", "pair_order", "pk")
        .values_list("response_id", "run__judge__name", "aspect_name", "score", "reasoning", "summary")
    )
    for response_id, judge, aspect, score, reasoning, summary in rows:
        yield response_id, judge, aspect, score, reasoning or summary


def judge_standings(dataset: Dataset, judge_names: Iterable[str]) -> dict[str, str]:
    """Judge name → its version's standing (certified, uncertified, suspended), for the export with judges."""
    from judging.standing import standing_of_judge_ids  # noqa: PLC0415 - only that export needs it

    ids = dict(Judge.objects.filter(dataset=dataset, name__in=list(judge_names)).values_list("pk", "name"))
    return {ids[pk]: standing for pk, standing in standing_of_judge_ids(list(ids)).items()}


STORE = JudgeScoreStore(
    imported_judge_create=judge_imported_create,
    score_model=JudgeScore,
    run_scores=run_scores,
    run_rationales=run_rationales,
    judge_standings=judge_standings,
)

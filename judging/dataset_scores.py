"""Where a dataset file's judge scores live: judging's side of `annotations.datasets.judge_scores`, registered by
`judging.apps` so that the import and export of the annotations domain never import the judge."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from annotations.datasets.judge_scores import JudgeScoreStore
from annotations.models import Dataset
from judging.models import Judge, JudgeKind, JudgeRun, JudgeScore, Judgment, JudgmentStatus, RunStatus

# Marks a run that was never run here: its judge's verdicts came with a file.
IMPORTED_RUN_NOTE = "imported verdicts: never run here"


def judge_imported_create(*, dataset: Dataset, name: str) -> int:
    """A judge for the scores a file brought with it (kind imported); its id."""
    return int(Judge.objects.create(dataset=dataset, name=name, kind=JudgeKind.IMPORTED).pk)


def judge_imported_verdicts_create(
    *, dataset: Dataset, name: str, aspect: str, verdicts: list[tuple[int, int, float]]
) -> int:
    """A pairwise judge whose verdicts came with the file (kind imported): a finished pairwise run marked imported,
    one finished judgment per verdict (shown in the file's order; repeated verdicts on one pair are its samples) and
    its scores, the win rates a pairwise run's scores are; its id."""
    from django.utils import timezone  # noqa: PLC0415 - only an import with judge verdicts needs it

    from judging.methods.flows import pairwise_scores  # noqa: PLC0415 - only an import with judge verdicts needs it

    judge = Judge.objects.create(
        dataset=dataset, name=name, kind=JudgeKind.IMPORTED, params={"imported_verdicts": True, "aspect": aspect}
    )
    now = timezone.now()
    run = JudgeRun.objects.create(
        judge=judge,
        dataset=dataset,
        # A stored config as every run has (pages read its method and model), naming no model: none was called.
        config_snapshot={"name": name, "method": "pairwise", "aspects": [aspect]},
        method="pairwise",
        status=RunStatus.SUCCEEDED,
        total=len(verdicts),
        done=len(verdicts),
        notes=IMPORTED_RUN_NOTE,
        started_at=now,
        finished_at=now,
    )
    samples: dict[tuple[int, int], int] = {}
    judgments = []
    for response_id, other_id, outcome in verdicts:
        sample = samples.get((response_id, other_id), 0)
        samples[(response_id, other_id)] = sample + 1
        judgments.append(
            Judgment(
                run=run,
                response_id=response_id,
                other_response_id=other_id,
                aspect_name=aspect,
                sample=sample,
                pair_order=0,
                status=JudgmentStatus.DONE,
                score=outcome,
                verdict={1.0: "A", 0.0: "B"}.get(outcome, "tie"),
                finished_at=now,
            )
        )
    Judgment.objects.bulk_create(judgments, batch_size=2000)
    summary = pairwise_scores(
        (response_id, other_id, aspect, judgment.sample, 0, outcome)
        for (response_id, other_id, outcome), judgment in zip(verdicts, judgments, strict=True)
    )
    JudgeScore.objects.bulk_create(
        [
            JudgeScore(judge=judge, response_id=response_id, aspect_name=score_aspect, value=value)
            for (response_id, score_aspect), value in summary.scores.items()
        ],
        batch_size=2000,
    )
    return int(judge.pk)


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
    imported_verdicts_create=judge_imported_verdicts_create,
)

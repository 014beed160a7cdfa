"""The judge scores a dataset file carries: the `auto_evals` of its JSONL lines, which the import stores, and the
judges' scores the judged export writes back.

They are stored in the judging app's tables, and the annotations domain does not import the judge (judging imports
annotations, never the other way round). So judging registers where the scores live when its app is ready
(`judging.apps` -> `judging.dataset_scores`), and the import and the export reach them only through this store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ImproperlyConfigured

if TYPE_CHECKING:
    from django.db.models import Model

    from annotations.models import Dataset


@dataclass(frozen=True)
class JudgeScoreStore:
    # A new judge of the dataset for scores that came with the file; returns its id.
    imported_judge_create: Callable[..., int]
    # The table the import bulk-inserts score rows into: judge_id, response_id, aspect_name, value.
    score_model: type[Model]
    # (response id, judge name, aspect name, value) of the scores judge runs produced for these answers, by judge
    # and aspect name.
    run_scores: Callable[[Iterable[int]], Iterable[tuple[int, str, str, float]]]
    # (response id, judge name, aspect name, score or None, rationale) of the judge runs' judgments of these answers
    # that gave a rationale (the judge's reasoning, else its summary), for an item's page.
    run_rationales: Callable[[Iterable[int]], Iterable[tuple[int, str, str, float | None, str]]] | None = None
    # Judge name → the standing of its version (certified, uncertified or suspended) for these judges of a dataset.
    judge_standings: Callable[[Dataset, Iterable[str]], dict[str, str]] | None = None
    # A new imported pairwise judge with its verdicts (response id, other response id, outcome for the first: 1, 0
    # or 0.5) on one aspect; returns its id.
    imported_verdicts_create: Callable[..., int] | None = None


_store: JudgeScoreStore | None = None


def judge_score_store_register(store: JudgeScoreStore) -> None:
    global _store
    _store = store


def judge_score_store() -> JudgeScoreStore:
    if _store is None:
        raise ImproperlyConfigured("judge scores are stored by the judging app, which has not registered its store")
    return _store


def imported_judge_create(*, dataset: Dataset, name: str) -> int:
    return int(judge_score_store().imported_judge_create(dataset=dataset, name=name))


def imported_verdicts_create(
    *, dataset: Dataset, name: str, aspect: str, verdicts: list[tuple[int, int, float]]
) -> int:
    store = judge_score_store()
    if store.imported_verdicts_create is None:
        raise ImproperlyConfigured("the judging app stores no imported pairwise verdicts")
    return int(store.imported_verdicts_create(dataset=dataset, name=name, aspect=aspect, verdicts=verdicts))


def run_scores(response_ids: Iterable[int]) -> Iterable[tuple[int, str, str, float]]:
    return judge_score_store().run_scores(response_ids)


def run_rationales(response_ids: Iterable[int]) -> Iterable[tuple[int, str, str, float | None, str]]:
    store = judge_score_store()
    return store.run_rationales(response_ids) if store.run_rationales is not None else ()


def score_model() -> Any:
    return judge_score_store().score_model


def judge_standings(dataset: Dataset, judge_names: Iterable[str]) -> dict[str, str]:
    store = judge_score_store()
    names = list(judge_names)
    if store.judge_standings is None or not names:
        return {}
    return store.judge_standings(dataset, names)

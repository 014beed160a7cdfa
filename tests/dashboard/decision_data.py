"""A 200-answer, 5-rater dataset for the alternative-annotator test and the rankings, imported through the real
JSONL importer: 50 prompts x 4 systems of known quality, two imported judges (one random, one copying rater w0 with
occasional one-point slips), 5 imported best-of-4 preferences per prompt, and a pairwise judge run."""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
from django.contrib.auth.models import User
from django.core.cache import cache

from annotations.datasets.importing import dataset_import
from annotations.models import Dataset, Response
from judging.models import Judge, JudgeKind, JudgeRun, Judgment, JudgmentStatus

DATASET = "decisions Ξ"
RANDOM_JUDGE = "random judge"
COPY_JUDGE = "copy judge"
PAIRWISE_JUDGE = "pairwise judge"
SYSTEMS = ["sys_a", "sys_b", "sys_c", "sys_d"]
QUALITY = {"sys_a": 4.2, "sys_b": 3.4, "sys_c": 2.6, "sys_d": 1.8}
RATERS = [f"w{k}" for k in range(5)]
PROMPTS = 50


def decision_lines(seed: int = 3) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    lines = []
    for item in range(PROMPTS):
        responses = {}
        for system in SYSTEMS:
            truth = QUALITY[system] + rng.normal(0, 0.7)
            scores = np.clip(np.round(truth + rng.normal(0, 0.6, len(RATERS))), 1, 5).astype(int)
            copy = int(np.clip(np.round(scores[0] + rng.normal(0, 0.3)), 1, 5))
            responses[system] = {
                "response": f"Answer of {system} to prompt {item}.",
                "human_evals": {"overall": [int(v) for v in scores]},
                "raters": RATERS,
                "auto_evals": {
                    RANDOM_JUDGE: {"overall": int(rng.integers(1, 6))},
                    COPY_JUDGE: {"overall": copy},
                },
            }
        preferences = []
        for rater in RATERS:
            noisy = {system: QUALITY[system] + rng.normal(0, 1.0) for system in SYSTEMS}
            preferences.append({"rater": rater, "candidates": SYSTEMS, "preferred": max(noisy, key=noisy.__getitem__)})
        lines.append(
            {
                "id": f"p{item}",
                "turns": [{"prompt": f"Prompt {item}?", "responses": responses, "preferences": preferences}],
            }
        )
    return lines


def make_decision_dataset(owner: User) -> Dataset:
    cache.clear()
    body = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in decision_lines()).encode("utf-8")
    dataset = dataset_import(stream=io.BytesIO(body), name=DATASET, owner=owner).dataset
    _add_pairwise_run(dataset)
    return dataset


def pairwise_run(dataset: Dataset, name: str, verdicts: Iterable[tuple[str, str, str, int, float]]) -> None:
    """A finished pairwise judge run with one judgment per verdict: (item id, first system, second system, the
    order the pair was shown in, the first system's score)."""
    judge = Judge.objects.create(dataset=dataset, name=name, kind=JudgeKind.RUN)
    run = JudgeRun.objects.create(
        judge=judge, dataset=dataset, config_snapshot={}, method="pairwise", status="succeeded"
    )
    answers = {
        (item, key): pk
        for pk, item, key in Response.objects.filter(turn__item__dataset=dataset).values_list(
            "pk", "turn__item__external_id", "system__key"
        )
    }
    Judgment.objects.bulk_create(
        Judgment(
            run=run,
            response_id=answers[(item, first)],
            other_response_id=answers[(item, second)],
            aspect_name="overall",
            pair_order=order,
            status=JudgmentStatus.DONE,
            score=score,
        )
        for item, first, second, order, score in verdicts
    )


def _add_pairwise_run(dataset: Dataset, seed: int = 4) -> None:
    """Each pair of systems on each prompt judged in both orders; the better system wins 80% of the time."""
    rng = np.random.default_rng(seed)

    def verdicts() -> Iterator[tuple[str, str, str, int, float]]:
        for item in range(PROMPTS):
            for first_index, first in enumerate(SYSTEMS):
                for second in SYSTEMS[first_index + 1 :]:
                    for order in (0, 1):
                        draw = rng.random()
                        yield f"p{item}", first, second, order, 1.0 if draw < 0.75 else (0.5 if draw < 0.85 else 0.0)

    pairwise_run(dataset, PAIRWISE_JUDGE, verdicts())

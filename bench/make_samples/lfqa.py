"""The long-form QA sample: ELI5-style questions, four candidate answers each (two human, two model), five crowd
raters of whom three rate each answer on four aspects, and an LLM-MATE style judge scoring each aspect on its own.

Each answer in lfqa_questions.json carries its "true" rating as (factuality 0-3, acceptability 0-3, amount_info
-1..1, formality -1..1); raters and the judge deviate from it with seeded noise."""

import random
from typing import Any

LFQA_RATERS = ["mturk-a17", "mturk-b04", "mturk-c22", "mturk-d09", "mturk-e31"]
LFQA_CANDIDATES = ["human_top", "human_random", "model_formal", "model_casual"]
LFQA_ASPECTS = ["factuality", "acceptability", "amount_info", "formality"]
BOUNDS = [(0, 3), (0, 3), (-1, 1), (-1, 1)]


def _lfqa_score(rng: random.Random, truth: int, lo: int, hi: int) -> int:
    roll = rng.random()
    if roll < 0.15:
        return max(lo, truth - 1)
    if roll < 0.25:
        return min(hi, truth + 1)
    return truth


def _response(rng: random.Random, text: str, truth: list[int]) -> dict[str, Any]:
    raters = rng.sample(LFQA_RATERS, 3)
    evals = {aspect: [_lfqa_score(rng, truth[i], *BOUNDS[i]) for _ in raters] for i, aspect in enumerate(LFQA_ASPECTS)}
    # LLM-MATE style judge: scores each aspect separately, with its own noise (mean of 3 samples).
    judge = {
        aspect: round(
            min(BOUNDS[i][1], max(BOUNDS[i][0], truth[i] + sum(rng.gauss(0, 0.6) for _ in range(3)) / 3)),
            3,
        )
        for i, aspect in enumerate(LFQA_ASPECTS)
    }
    return {"response": text, "human_evals": evals, "raters": raters, "auto_evals": {"demo-mate-judge": judge}}


def build_lfqa_sample(questions: list[dict[str, Any]], seed: int = 4) -> list[dict[str, Any]]:
    """The sample's lines from the hand-written questions (lfqa_questions.json), the same for the same seed."""
    rng = random.Random(seed)
    lines = []
    for spec in questions:
        order = list(LFQA_CANDIDATES)
        rng.shuffle(order)  # candidates are shown shuffled; keep that order in the file as the form saw it
        responses = {candidate: _response(rng, *spec["answers"][candidate]) for candidate in order}
        turn: dict[str, Any] = {"prompt": spec["question"], "responses": responses}
        if "context" in spec:
            turn["context"] = spec["context"]
        lines.append(
            {
                "id": spec["id"],
                "turns": [turn],
                "meta": {"preference": spec["preference"], "source": "synthetic demo written for evalsite"},
            }
        )
    return lines

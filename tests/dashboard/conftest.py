"""A realistic small dataset for the statistics views and commands: llm-human-eval-jp layout from bench.datagen,
with a multi-aspect imported judge added under auto_evals, so the expected numbers can be recomputed from the
file itself with the reference libraries (independently of the ORM and of the selectors)."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.core.cache import cache

from annotations.importing import dataset_import
from annotations.models import Dataset
from bench.datagen import LLM_JP_ASPECTS, generate_llm_jp_jsonl
from tests.conftest import CAST_PASSWORD

DATASET_NAME = "stats demo Ξ §"
JUDGE_NAME = "BLEU Ξ§ judge"
MISSING = {"NA", 0, None}


def _add_judge(lines: list[dict[str, Any]], seed: int) -> None:
    rng = random.Random(seed)
    for item in lines:
        for turn in item["turns"]:
            for answer in turn["responses"].values():
                evals = answer.get("human_evals")
                if not evals:
                    continue
                scores = {}
                for aspect, values in evals.items():
                    present = [v for v in values if v not in MISSING]
                    centre = sum(present) / len(present) if present else 3
                    scores[aspect] = max(1, min(5, round(centre + rng.gauss(0, 0.9))))
                answer["auto_evals"] = {JUDGE_NAME: scores}


@pytest.fixture
def stats_jsonl(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "data.jsonl"
    generate_llm_jp_jsonl(path, items=30, systems=4, raters=3, seed=5, min_chars=20, max_chars=400, missing_rate=0.08)
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    _add_judge(lines, seed=9)
    return lines


@pytest.fixture
def stats_dataset(researcher: User, stats_jsonl: list[dict[str, Any]]) -> Dataset:
    cache.clear()
    body = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in stats_jsonl).encode("utf-8")
    result = dataset_import(stream=io.BytesIO(body), name=DATASET_NAME, preset="llm-human-eval-jp", owner=researcher)
    return result.dataset


@pytest.fixture
def other_researcher(db: None) -> User:
    return User.objects.create_user(username="other_researcher", password=CAST_PASSWORD, is_staff=True)


def reference_matrix(lines: list[dict[str, Any]], aspect: str) -> np.ndarray:
    """Units x raters (positional) with NaN for missing, straight from the JSONL."""
    rows = []
    for item in lines:
        for turn in item["turns"]:
            for answer in turn["responses"].values():
                values = answer.get("human_evals", {}).get(aspect)
                if values is None:
                    continue
                rows.append([np.nan if v in MISSING else float(v) for v in values])
    width = max(len(row) for row in rows)
    return np.array([row + [np.nan] * (width - len(row)) for row in rows])


def reference_pairs(lines: list[dict[str, Any]], aspect: str) -> list[tuple[str, str, float, float]]:
    """(prompt key, system, human mean, judge score) per answer with both, straight from the JSONL."""
    pairs = []
    for item in lines:
        for index, turn in enumerate(item["turns"]):
            for system, answer in turn["responses"].items():
                values = [v for v in answer.get("human_evals", {}).get(aspect, []) if v not in MISSING]
                judge = answer.get("auto_evals", {}).get(JUDGE_NAME, {}).get(aspect)
                if values and judge is not None:
                    pairs.append((f"{item['id']}/{index}", system, sum(values) / len(values), float(judge)))
    return pairs


ASPECTS = LLM_JP_ASPECTS

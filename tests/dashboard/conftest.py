"""A realistic small dataset for the statistics views and commands: llm-human-eval-jp layout from bench.datagen,
with a multi-aspect imported judge added under auto_evals, so the expected numbers can be recomputed from the
file itself with the reference libraries (independently of the ORM and of the selectors)."""

from __future__ import annotations

import io
import itertools
import json
import random
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.core.cache import cache

from annotations.campaigns.answers import TaskAnswer
from annotations.campaigns.claims import assignment_claim
from annotations.campaigns.setup import campaign_create
from annotations.campaigns.tasks import task_candidates
from annotations.datasets.importing import dataset_import
from annotations.models import Campaign, Dataset, Response
from annotations.rubrics.task_sheet import campaign_scales
from bench.datagen import LLM_JP_ASPECTS, MISSING_SCORES, add_imported_judge, generate_llm_jp_jsonl
from tests.annotate.factories import submit_answer
from tests.conftest import CAST_PASSWORD, client_for

DATASET_NAME = "stats demo Ξ §"
JUDGE_NAME = "BLEU Ξ§ judge"
MISSING = MISSING_SCORES


@pytest.fixture
def stats_jsonl(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "data.jsonl"
    generate_llm_jp_jsonl(path, items=30, systems=4, raters=3, seed=5, min_chars=20, max_chars=400, missing_rate=0.08)
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    add_imported_judge(lines, JUDGE_NAME, seed=9)
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


@pytest.fixture
def assert_researchers_only(
    researcher: User, other_researcher: User, annotator1: User, outsider: User
) -> Callable[..., None]:
    """The statistics API's access rules for one endpoint: the dataset's researcher reads it, by GET only; anonymous
    users, annotators and outsiders are refused, and another researcher is told the dataset does not exist."""

    def check(url: str, query: dict[str, Any], annotator: User | None = None) -> None:
        assert client_for(researcher).get(url, query).status_code == 200
        assert client_for(researcher).post(url, query).status_code == 405
        assert client_for(None).get(url, query).status_code in (401, 403)
        assert client_for(annotator or annotator1).get(url, query).status_code == 403
        assert client_for(outsider).get(url, query).status_code == 403
        assert client_for(other_researcher).get(url, query).status_code == 404

    return check


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


SCOPED_DATASET = "scoped Ξ"
SCOPED_JUDGE = "scope judge Ξ"
CAMPAIGN_A = "campaign A Ξ"
CAMPAIGN_B = "campaign B"
AnswerKey = tuple[str, int, str]  # (item id, turn index, system key)


@dataclass
class ScopedData:
    """Imported raters (3 on every answer) plus two campaigns whose annotators submitted through the services.
    ``app[campaign][aspect][answer]`` holds the values each campaign's annotators entered."""

    dataset: Dataset
    lines: list[dict[str, Any]]
    campaign_a: Campaign
    campaign_b: Campaign
    app: dict[str, dict[str, dict[AnswerKey, list[float]]]] = field(default_factory=dict)

    def values(self, origin: str, campaign: str | None = None) -> dict[str, dict[AnswerKey, list[float]]]:
        """Per aspect and answer, the non-missing ratings of a scope, straight from the file and the submissions."""
        found: dict[str, dict[AnswerKey, list[float]]] = {aspect: {} for aspect in ASPECTS}
        if origin in ("all", "imported") and campaign is None:
            for item in self.lines:
                for index, turn in enumerate(item["turns"]):
                    for system, answer in turn["responses"].items():
                        for aspect, values in answer.get("human_evals", {}).items():
                            present = [float(v) for v in values if v not in MISSING]
                            found[aspect].setdefault((item["id"], index, system), []).extend(present)
        if origin in ("all", "app"):
            for name, by_aspect in self.app.items():
                if campaign is not None and name != campaign:
                    continue
                for aspect, by_answer in by_aspect.items():
                    for key, values in by_answer.items():
                        found[aspect].setdefault(key, []).extend(values)
        return found

    def judge_scores(self, aspect: str) -> dict[AnswerKey, float]:
        return {
            (item["id"], index, system): float(answer["auto_evals"][SCOPED_JUDGE][aspect])
            for item in self.lines
            for index, turn in enumerate(item["turns"])
            for system, answer in turn["responses"].items()
            if aspect in answer.get("auto_evals", {}).get(SCOPED_JUDGE, {})
        }


def scope_matrix(by_answer: dict[AnswerKey, list[float]]) -> np.ndarray:
    """Answers x raters with NaN padding (positional columns: alpha and kappa do not depend on who rated)."""
    rows = [values for _, values in sorted(by_answer.items()) if values]
    width = max((len(row) for row in rows), default=1)
    return np.array([row + [np.nan] * (width - len(row)) for row in rows]).reshape(-1, width)


def _submit_tasks(campaign: Campaign, users: list[User], tasks: int, rng: random.Random) -> dict[str, dict]:
    """Each round the users in turn claim and submit: with N = len(users) they fill the front task together."""
    keys = {
        pk: (item, index, system)
        for pk, item, index, system in Response.objects.filter(turn__item__dataset=campaign.dataset).values_list(
            "pk", "turn__item__external_id", "turn__index", "system__key"
        )
    }
    entered: dict[str, dict[AnswerKey, list[float]]] = {}
    for _ in range(tasks):
        for user in users:
            assignment = assignment_claim(campaign=campaign, user=user)
            assert assignment is not None
            ratings = {}
            for candidate in task_candidates(assignment=assignment, user_id=user.pk):
                for scale in campaign_scales(campaign):
                    value = rng.randint(1, 5)
                    ratings[(candidate.number, scale.index)] = value
                    answers = entered.setdefault(scale.aspect.name, {})
                    answers.setdefault(keys[candidate.response_id], []).append(float(value))
            result = submit_answer(
                campaign, assignment, user, f"scope-{assignment.pk}-{user.pk}", TaskAnswer(ratings=ratings)
            )
            assert not result.replayed
    return entered


@pytest.fixture
def scoped(researcher: User, annotators: list[User], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ScopedData:
    return build_scoped(researcher, annotators, tmp_path, monkeypatch)


@pytest.fixture
def scoped_named(
    researcher: User, annotators: list[User], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> ScopedData:
    """The same, with the file naming its raters (a "raters" list per answer) instead of positional ones."""
    return build_scoped(researcher, annotators, tmp_path, monkeypatch, with_rater_ids=True)


def build_scoped(
    researcher: User,
    annotators: list[User],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    with_rater_ids: bool = False,
) -> ScopedData:
    cache.clear()
    # Campaign seeds and rater pseudonyms come from secrets.token_hex; a counter makes the candidate order, and so
    # which value lands on which answer, the same on every run, while keeping every token distinct.
    counter = itertools.count(1)
    monkeypatch.setattr(secrets, "token_hex", lambda nbytes=16: f"{next(counter):0{2 * nbytes}x}")
    path = tmp_path / "scoped.jsonl"
    generate_llm_jp_jsonl(
        path,
        items=12,
        systems=3,
        raters=3,
        seed=11,
        max_chars=120,
        missing_rate=0.0,
        two_turn_share=0.0,
        with_rater_ids=with_rater_ids,
    )
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    rng = random.Random(4)
    for item in lines:
        for turn in item["turns"]:
            for answer in turn["responses"].values():
                answer["auto_evals"] = {SCOPED_JUDGE: {aspect: rng.randint(1, 5) for aspect in ASPECTS}}
    body = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode("utf-8")
    dataset = dataset_import(
        stream=io.BytesIO(body), name=SCOPED_DATASET, preset="llm-human-eval-jp", owner=researcher
    ).dataset
    options = {"ask_preference": False, "rationale_required": False, "created_by": researcher}
    first, second, third = annotators
    campaign_a = campaign_create(
        name=CAMPAIGN_A,
        dataset=dataset,
        raters_per_item=2,
        annotators=[first, second],
        aspects=["factuality", "overall"],
        **options,
    )
    campaign_b = campaign_create(
        name=CAMPAIGN_B, dataset=dataset, raters_per_item=1, annotators=[third], aspects=["overall"], **options
    )
    data = ScopedData(dataset=dataset, lines=lines, campaign_a=campaign_a, campaign_b=campaign_b)
    # Campaign A rates 5 of the 12 prompts fully, so "all" has 3 ratings on some answers and 5 on others.
    data.app[CAMPAIGN_A] = _submit_tasks(campaign_a, [first, second], 5, rng)
    data.app[CAMPAIGN_B] = _submit_tasks(campaign_b, [third], 4, rng)
    return data

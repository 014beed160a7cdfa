"""Datasets and campaigns for annotation tests, imported through the real JSONL importer."""

import io
import json
import uuid
from typing import Any

from django.contrib.auth.models import User

from annotations.adjudication.services import adjudication_rule_set
from annotations.campaigns.answers import MISSING, TaskAnswer
from annotations.campaigns.claims import assignment_claim
from annotations.campaigns.setup import campaign_create
from annotations.campaigns.submissions import submission_create
from annotations.campaigns.tasks import task_candidates
from annotations.datasets.importing import dataset_import
from annotations.models import Campaign, Dataset

SYSTEM_NAMES = {
    "sys_alpha": "secretvendor/zeta-model-7b",
    "sys_beta": "othervendor/omega-chat-70b",
    "sys_gamma": "thirdvendor/kappa-instruct",
    "sys_delta": "fourthvendor/sigma-large",
}


def lfqa_lines(items: int = 4, *, systems: int = 4, turns: int = 1, answer: str | None = None) -> list[dict]:
    keys = list(SYSTEM_NAMES)[:systems]
    lines = []
    for i in range(items):
        lines.append(
            {
                "id": f"q{i}",
                "turns": [
                    {
                        "prompt": f"Question {i} turn {t}: why does my recorded voice sound odd?",
                        "reference": f"Reference answer {i}/{t}",
                        "context": [f"Passage A for {i}", f"Passage B for {i}"],
                        "responses": {
                            key: {
                                "response": answer if answer is not None else f"Answer number {k} to {i}/{t}.",
                                "auto_evals": {"unieval": {"factuality": 0.5}},
                            }
                            for k, key in enumerate(keys)
                        },
                    }
                    for t in range(turns)
                ],
            }
        )
    return lines


def make_dataset(
    name: str = "lfqa",
    *,
    owner: User | None = None,
    items: int = 4,
    systems: int = 4,
    turns: int = 1,
    answer: str | None = None,
    lines: list[dict[str, Any]] | None = None,
) -> Dataset:
    body = "\n".join(
        json.dumps(line, ensure_ascii=False)
        for line in (lines or lfqa_lines(items, systems=systems, turns=turns, answer=answer))
    )
    rubric = {
        "aspects": [
            {
                "name": "factuality",
                "label": "Factuality",
                "min": 0,
                "max": 3,
                "ideal": 3,
                "description": "How accurate are the claims?",
                "labels": {"0": "inaccurate", "3": "accurate"},
                "missing": [],
            },
            {
                "name": "amount_info",
                "label": "Amount Info",
                "min": -1,
                "max": 1,
                "ideal": 0,
                "description": "Too little, right or too much?",
                "labels": {"-1": "too little", "0": "just right", "1": "too much"},
                "missing": ["NA", None],
            },
        ],
        "systems": SYSTEM_NAMES,
    }
    from annotations.rubrics.specs import parse_rubric

    result = dataset_import(
        stream=io.BytesIO(body.encode()), name=name, rubric=parse_rubric(rubric, source="file"), owner=owner
    )
    return result.dataset


def make_campaign(dataset: Dataset, annotators: list[User], *, name: str = "campaign", **kwargs: Any) -> Campaign:
    kwargs.setdefault("raters_per_item", 2)
    return campaign_create(name=name, dataset=dataset, annotators=annotators, **kwargs)


def full_answer(assignment: Any, user: User, *, value: float = 2, preference: int = 1) -> TaskAnswer:
    """Every candidate scored `value` on the first aspect and 0 on the second (the first candidate's second left
    missing), with a preference and a rationale: an answer every default campaign accepts."""
    ratings: dict[tuple[int, int], Any] = {}
    for c in task_candidates(assignment=assignment, user_id=user.pk):
        ratings[(c.number, 1)] = value
        ratings[(c.number, 2)] = MISSING if c.number == 1 else 0
    return TaskAnswer(ratings=ratings, preference=preference, rationale="clear and correct")


def submit_answer(campaign: Campaign, assignment: Any, user: User, key: str, answer: Any, **kwargs: Any) -> Any:
    """`submission_create` of `answer` for the task `assignment` holds, by `user`, under idempotency key `key`."""
    return submission_create(
        campaign=campaign, task_id=assignment.task_id, user=user, idempotency_key=key, answer=answer, **kwargs
    )


def rate_all(campaign: Campaign, user: User, *, value: float = 2) -> int:
    """The user claims and submits every task left for them, each a `full_answer` scoring `value`; returns how
    many."""
    done = 0
    while (assignment := assignment_claim(campaign=campaign, user=user)) is not None:
        submit_answer(campaign, assignment, user, uuid.uuid4().hex, full_answer(assignment, user, value=value))
        done += 1
    return done


def disputed_campaign(dataset: Dataset, annotators: list[User], adjudicator: User) -> Campaign:
    """The three annotators on every task, with the adjudicator settling any answer whose ratings of an aspect
    spread beyond 1."""
    campaign = make_campaign(dataset, annotators, raters_per_item=3)
    adjudication_rule_set(campaign=campaign, max_spread=1, preference_splits=False, adjudicators=[adjudicator])
    return campaign


def rate_in_disagreement(campaign: Campaign, annotators: list[User]) -> None:
    """Factuality 0, 3 and 2 from the three annotators on every task: a spread of 3, disputed in a
    `disputed_campaign`."""
    for user, value in zip(annotators, (0, 3, 2), strict=True):
        rate_all(campaign, user, value=value)

"""``manage.py rater_model``: on a dataset built by the test, the command reports what the pure rater models compute
on the same ratings, taken from the test's own plan (not the ORM)."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.core.management import call_command
from django.core.management.base import CommandError

from annotations.models import Dataset
from judging.statistics.rater_models import dawid_skene, severity
from tests.commands import command_json
from tests.factories import (
    AspectFactory,
    DatasetFactory,
    ItemFactory,
    RaterFactory,
    RatingFactory,
    ResponseFactory,
    SystemFactory,
    TurnFactory,
)

pytestmark = pytest.mark.django_db

ANSWERS = 30
# Three careful raters and one who rates at random.
RATERS = ("careful1", "careful2", "careful3", "random")


def make_dataset(owner: User) -> tuple[Dataset, list[tuple[int, str, float]]]:
    """30 answers on a 1–5 aspect rated by every rater; returns the dataset and the plan as (answer index, rater,
    value) triples in the order of the answers' creation (the order of their response ids)."""
    cache.clear()
    rng = np.random.default_rng(37)
    dataset = DatasetFactory(name="rater model demo", owner=owner)
    aspect = AspectFactory(dataset=dataset, name="overall")
    raters = {name: RaterFactory(dataset=dataset, external_id=name) for name in RATERS}
    system = SystemFactory(dataset=dataset, key="sys_a")
    plan = []
    for index in range(ANSWERS):
        response = ResponseFactory(turn=TurnFactory(item=ItemFactory(dataset=dataset)), system=system)
        truth = int(rng.integers(1, 6))
        for name in RATERS:
            value = int(rng.integers(1, 6)) if name == "random" else int(np.clip(truth + rng.integers(-1, 2), 1, 5))
            if name == "careful1":
                value = truth
            RatingFactory(response=response, aspect=aspect, rater=raters[name], raw=value)
            plan.append((index, name, float(value)))
    return dataset, plan


def run(*args: str) -> dict[str, Any]:
    return command_json("rater_model", *args)  # type: ignore[no-any-return]


def test_reliabilities_and_labels_equal_the_pure_models(researcher: User) -> None:
    dataset, plan = make_dataset(researcher)
    for model, pure in (("dawid-skene", dawid_skene), ("severity", severity)):
        report = run("--dataset", dataset.name, "--model", model)
        assert report["model"] == model
        result = report["aspects"]["overall"]
        expected = pure(plan)
        assert result["undefined"] is None
        got = {rater["rater"]: rater["reliability"]["value"] for rater in result["raters"]}
        want = {rater["rater"]: rater["reliability"]["value"] for rater in expected["raters"]}
        assert got == pytest.approx(want)
        assert min(got, key=got.get) == "random"
        # Items come back in response-id order, which is the plan's answer order.
        assert len(result["items"]) == ANSWERS
        by_index = {item["item"]: item for item in expected["items"]}
        for index, item in enumerate(result["items"]):
            assert item["label"] == by_index[index]["label"]
            assert item["score"] == pytest.approx(by_index[index]["score"])
            assert item["system"] == "sys_a"


def test_text_output_lists_the_raters(researcher: User) -> None:
    dataset, _ = make_dataset(researcher)
    out = io.StringIO()
    call_command("rater_model", "--dataset", dataset.name, "--model", "mace", stdout=out)
    text = out.getvalue()
    assert "Rater model mace on dataset rater model demo" in text
    assert "aspect overall: 30 answers" in text
    lines = text.splitlines()
    table = lines[lines.index(next(line for line in lines if line.startswith("rater "))) + 2 :]
    assert table[-1].startswith("random")  # the least reliable rater comes last


def test_bad_input_is_a_command_error(researcher: User) -> None:
    dataset, _ = make_dataset(researcher)
    with pytest.raises(CommandError, match="no aspect named 'tone'"):
        call_command("rater_model", "--dataset", dataset.name, "--model", "mace", "--aspect", "tone")
    with pytest.raises(CommandError, match="invalid choice"):
        call_command("rater_model", "--dataset", dataset.name, "--model", "glad")

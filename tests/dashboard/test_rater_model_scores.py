"""``--rater-model`` on correlate, alt_test, ppi and ranking: the human score of each answer becomes the rater
model's estimate, the one ``rater_model`` reports, and every output's scope names the model."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import call_command
from scipy import stats

from annotations.models import Response
from tests.dashboard.conftest import ASPECTS, SCOPED_DATASET, SCOPED_JUDGE, ScopedData

pytestmark = pytest.mark.django_db


def cli(*args: str) -> dict[str, Any]:
    out = io.StringIO()
    call_command(*args, "--json", stdout=out)
    return json.loads(out.getvalue())


@pytest.mark.filterwarnings("ignore::scipy.stats.ConstantInputWarning")
def test_correlate_reads_the_severity_models_scores_and_names_it(scoped_named: ScopedData) -> None:
    scope = ["--origin", "imported"]
    report = cli("correlate", "--dataset", SCOPED_DATASET, "--judge", SCOPED_JUDGE, *scope, "--rater-model", "severity")
    assert report["scope"]["rater_model"] == "severity" and report["scope"]["human_score"] == "rater-model"
    model = cli("rater_model", "--dataset", SCOPED_DATASET, "--model", "severity", *scope)
    keys = {
        r.pk: (r.turn.item.external_id, r.turn.index, r.system.key)
        for r in Response.objects.select_related("turn__item", "system").filter(
            turn__item__dataset=scoped_named.dataset
        )
    }
    checked = 0
    for aspect in ASPECTS:
        judge = scoped_named.judge_scores(aspect)
        items = model["aspects"][aspect]["items"]
        pairs = [(item["score"]["value"], judge[keys[item["response_id"]]]) for item in items]
        levels = report["aspects"][aspect]["response"]
        assert levels["n"] == len(pairs)
        if len(pairs) >= 3 and levels["pearson"]["value"] is not None:
            expected = stats.pearsonr([p[0] for p in pairs], [p[1] for p in pairs])[0]
            assert levels["pearson"]["value"] == pytest.approx(expected, abs=1e-9)
            checked += 1
    assert checked > 0


@pytest.mark.filterwarnings("ignore::scipy.stats.ConstantInputWarning")
@pytest.mark.parametrize("command", ["alt_test", "ppi", "ranking"])
def test_every_output_names_the_rater_model_in_its_scope(scoped_named: ScopedData, command: str) -> None:
    args = ["--dataset", SCOPED_DATASET, "--origin", "imported", "--rater-model", "dawid-skene"]
    if command != "ranking":
        args += ["--judge", SCOPED_JUDGE]
    report = cli(command, *args)
    assert report["scope"]["rater_model"] == "dawid-skene"

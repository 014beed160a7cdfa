"""Prediction-powered estimates and the Trust or Escalate calibration on a dataset: the report, the commands and the
API compute what the pure statistics compute on the same numbers, taken from the test's own plan (not the ORM)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from annotations.models import Aspect, Dataset, Response
from judging.analysis.prediction_powered import ppi_report, trust_or_escalate_calibrate
from judging.analysis.reports import ReportError
from judging.models import Judge, JudgeKind, JudgeRun, JudgeScore, Judgment, JudgmentStatus
from judging.statistics.ppi import ppi_mean
from judging.statistics.trust_escalate import trust_or_escalate
from tests.commands import command_json as run
from tests.conftest import client_for
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

JUDGE = "confident judge"
PROMPTS = 80
RATED_PROMPTS = 40
SYSTEMS = ("sys_a", "sys_b")
# Answers of the first RATED_PROMPTS prompts carry a human rating; of those, the judge's chosen score equals the
# human's on every answer where it is confident (0.9) and on one in four where it is not (0.55).
CONFIDENT_PROMPTS = 30


@dataclass
class Plan:
    human: dict[str, np.ndarray]
    judge: dict[str, np.ndarray]
    confidence: list[float]
    agreed: list[bool]


def make_ppi_dataset(owner: User) -> tuple[Dataset, Plan]:
    cache.clear()
    rng = np.random.default_rng(27)
    dataset = DatasetFactory(name="ppi demo", owner=owner)
    aspect = AspectFactory(dataset=dataset, name="overall")
    rater = RaterFactory(dataset=dataset)
    systems = {key: SystemFactory(dataset=dataset, key=key) for key in SYSTEMS}
    judge = Judge.objects.create(dataset=dataset, name=JUDGE, kind=JudgeKind.RUN)
    run = JudgeRun.objects.create(judge=judge, dataset=dataset, config_snapshot={}, method="geval", status="succeeded")
    plan = Plan(
        human={key: np.full(PROMPTS, np.nan) for key in SYSTEMS},
        judge={key: np.zeros(PROMPTS) for key in SYSTEMS},
        confidence=[],
        agreed=[],
    )
    scores, judgments = [], []
    for prompt in range(PROMPTS):
        turn = TurnFactory(item=ItemFactory(dataset=dataset))
        for offset, key in enumerate(SYSTEMS):
            response = ResponseFactory(turn=turn, system=systems[key])
            truth = int(np.clip(round(rng.normal(3.0 + offset * 0.5, 1.0)), 1, 5))
            judge_value = float(truth) + float(rng.normal(0.3, 0.5))
            plan.judge[key][prompt] = judge_value
            scores.append(JudgeScore(judge=judge, response=response, aspect_name="overall", value=judge_value))
            if prompt < RATED_PROMPTS:
                RatingFactory(response=response, aspect=aspect, rater=rater, raw=truth)
                plan.human[key][prompt] = truth
            confident = prompt < CONFIDENT_PROMPTS
            agrees = confident or prompt % 4 == 0
            chosen = truth if agrees else (truth % 5) + 1
            other = (chosen % 5) + 1
            confidence = 0.9 if confident else 0.55
            if prompt < RATED_PROMPTS:
                plan.confidence.append(confidence)
                plan.agreed.append(agrees)
            judgments.append(
                Judgment(
                    run=run,
                    response=response,
                    aspect_name="overall",
                    status=JudgmentStatus.DONE,
                    score=judge_value,
                    distribution={f"{chosen:g}": confidence, f"{other:g}": round(1 - confidence, 10)},
                    score_mode="weighted",
                )
            )
    JudgeScore.objects.bulk_create(scores)
    Judgment.objects.bulk_create(judgments)
    return dataset, plan


@pytest.fixture
def planned(researcher: User) -> tuple[Dataset, Plan]:
    return make_ppi_dataset(researcher)


def test_system_means_equal_the_pure_estimator_on_the_plan(planned: tuple[Dataset, Plan]) -> None:
    dataset, plan = planned
    report = ppi_report(dataset, JUDGE)
    systems = report["aspects"]["overall"]["systems"]
    assert [entry["system"] for entry in systems] == list(SYSTEMS)
    for entry, key in zip(systems, SYSTEMS, strict=True):
        rated = np.isfinite(plan.human[key])
        expected = ppi_mean(plan.human[key][rated], plan.judge[key][rated], plan.judge[key][~rated])
        assert entry["ppi"]["estimate"]["value"] == pytest.approx(expected["ppi"]["estimate"]["value"])
        assert entry["ppi"]["interval"] == pytest.approx(expected["ppi"]["interval"])
        assert entry["human_only"]["estimate"]["value"] == pytest.approx(float(np.mean(plan.human[key][rated])))
        assert entry["effective_n"]["value"] == pytest.approx(expected["effective_n"]["value"])
        assert (entry["n"], entry["n_total"]) == (RATED_PROMPTS, PROMPTS)
        # The judge tracks the humans, so it is worth more than the humans it adds nothing to.
        assert entry["effective_n"]["value"] > RATED_PROMPTS


def test_difference_is_paired_by_prompt(planned: tuple[Dataset, Plan]) -> None:
    dataset, plan = planned
    (difference,) = ppi_report(dataset, JUDGE, "overall", "ppi")["aspects"]["overall"]["differences"]
    assert (difference["system_a"], difference["system_b"]) == SYSTEMS
    human = plan.human["sys_a"] - plan.human["sys_b"]
    judged = plan.judge["sys_a"] - plan.judge["sys_b"]
    rated = np.isfinite(human)
    expected = ppi_mean(human[rated], judged[rated], judged[~rated], tuning="ppi")
    assert difference["ppi"]["estimate"]["value"] == pytest.approx(expected["ppi"]["estimate"]["value"])
    assert difference["human_only"]["interval"] == pytest.approx(expected["human_only"]["interval"])
    assert difference["tuning_lambda"]["value"] == 1.0


def test_a_judge_missing_answers_is_undefined_with_the_reason(planned: tuple[Dataset, Plan]) -> None:
    dataset, plan = planned
    JudgeScore.objects.filter(judge__name=JUDGE, response__system__key="sys_b").first().delete()
    report = ppi_report(dataset, JUDGE)
    sys_a, sys_b = report["aspects"]["overall"]["systems"]
    assert sys_a["undefined"] is None
    assert "no score for 1 of the 80 answers" in sys_b["undefined"]
    assert sys_b["ppi"]["estimate"]["value"] is None
    assert sys_b["effective_n"]["value"] is None
    # The humans' own mean does not need the judge.
    rated = plan.human["sys_b"][np.isfinite(plan.human["sys_b"])]
    assert sys_b["human_only"]["estimate"]["value"] == pytest.approx(float(np.mean(rated)))
    assert (sys_b["n"], sys_b["n_total"]) == (RATED_PROMPTS, PROMPTS)
    with pytest.raises(ReportError, match="no aspect named"):
        ppi_report(dataset, JUDGE, "fluency")


def test_trust_or_escalate_calibrates_on_the_labelled_answers(planned: tuple[Dataset, Plan]) -> None:
    dataset, plan = planned
    result = trust_or_escalate_calibrate(
        dataset=dataset, judge_name=JUDGE, aspect_name="overall", target=0.8, delta=0.05
    )
    expected = trust_or_escalate(plan.confidence * 2, plan.agreed * 2, target=0.8, delta=0.05)
    # Confident answers all agree; the rest agree half the time, which drags the agreement below 0.8.
    assert result["threshold"]["value"] == 0.9 == expected["threshold"]["value"]
    assert result["kept"] == 2 * CONFIDENT_PROMPTS
    assert result["n"] == 2 * RATED_PROMPTS
    assert result["coverage"]["value"] == pytest.approx(CONFIDENT_PROMPTS / RATED_PROMPTS)
    assert result["empirical_agreement"]["value"] == 1.0
    assert result["confidence_sources"] == {"score_distribution": 2 * PROMPTS, "samples": 0}
    assert result["labelled_without_confidence"] == 0


def test_trust_or_escalate_command_prints_each_figure(planned: tuple[Dataset, Plan]) -> None:
    out = io.StringIO()
    call_command(
        "trust_or_escalate", "--dataset", "ppi demo", "--judge", JUDGE, "--aspect", "overall", "--target", "0.8",
        "--delta", "0.05", stdout=out,
    )  # fmt: skip
    text = out.getvalue()
    assert "threshold: 0.9" in text
    assert "coverage: 0.750 (60 of 80 kept)" in text
    assert "guaranteed agreement: agreement >= 0.8 with probability >= 0.95" in text
    assert "n: 80 calibration answers" in text
    strict = run("trust_or_escalate", "--dataset", "ppi demo", "--judge", JUDGE, "--aspect", "overall", "--target",
                 "0.99", "--delta", "0.01")  # fmt: skip
    assert strict["threshold"]["value"] is None and "at least 459" in strict["undefined"]
    with pytest.raises(CommandError, match="ghost"):
        call_command("trust_or_escalate", "--dataset", "ppi demo", "--judge", "ghost", "--aspect", "overall")


def test_ppi_command_text_and_json(planned: tuple[Dataset, Plan]) -> None:
    dataset, _ = planned
    assert run("ppi", "--dataset", "ppi demo", "--judge", JUDGE) == json.loads(json.dumps(ppi_report(dataset, JUDGE)))
    out = io.StringIO()
    call_command("ppi", "--dataset", "ppi demo", "--judge", JUDGE, stdout=out)
    text = out.getvalue()
    assert "aspect overall: system means" in text
    assert "sys_a - sys_b" in text
    assert "effective n" in text


def test_api_access_rules(planned: tuple[Dataset, Plan], assert_researchers_only: Callable[..., None]) -> None:
    dataset, _ = planned
    url = reverse("api-stats-ppi", args=[dataset.pk])
    query = {"judge": JUDGE}
    assert_researchers_only(url, query)


def test_api_equals_the_cli_and_refuses_bad_parameters(planned: tuple[Dataset, Plan], researcher: User) -> None:
    dataset, _ = planned
    client = client_for(researcher)
    url = reverse("api-stats-ppi", args=[dataset.pk])
    api = client.get(url, {"judge": JUDGE, "tuning": "ppi"}).json()
    assert api == run("ppi", "--dataset", "ppi demo", "--judge", JUDGE, "--tuning", "ppi")
    assert client.get(url, {"judge": JUDGE, "tuning": "ols"}).status_code == 400
    missing = client.get(url, {"judge": "ghost"})
    assert missing.status_code == 404 and "ghost" in missing.json()["detail"]
    bad_aspect = client.get(url, {"judge": JUDGE, "aspect": "fluency"})
    assert bad_aspect.status_code == 400 and "fluency" in json.dumps(bad_aspect.json())


def test_dataset_page_shows_the_ppi_panel_beside_the_human_only_numbers(
    planned: tuple[Dataset, Plan], researcher: User, other_researcher: User
) -> None:
    dataset, _ = planned
    url = reverse("dashboard-dataset", args=[dataset.pk])
    page = client_for(researcher).get(url, {"aspect": "overall", "ppi_judge": JUDGE})
    assert page.status_code == 200
    html = page.content.decode()
    assert "Prediction-powered estimates" in html
    table = page.context["ppi"]["table"]
    report = ppi_report(dataset, JUDGE, "overall")
    first = report["aspects"]["overall"]["systems"][0]
    assert table["rows"][0][:3] == ["sys_a", RATED_PROMPTS, PROMPTS]
    assert table["rows"][0][7] == pytest.approx(first["effective_n"]["value"])
    assert f"{first['effective_n']['value']:.3f}" in html
    assert f"{first['human_only']['estimate']['value']:.3f}" in html
    assert table["rows"][2][0] == "sys_a − sys_b"
    unknown = client_for(researcher).get(url, {"aspect": "overall", "ppi_judge": "ghost"})
    assert "has no judge named" in unknown.content.decode()
    assert client_for(other_researcher).get(url).status_code == 404
    assert client_for(researcher).post(url).status_code == 405


def test_dataset_page_panel_in_japanese(planned: tuple[Dataset, Plan], researcher: User) -> None:
    dataset, _ = planned
    client = client_for(researcher)
    page = client.get(reverse("dashboard-dataset", args=[dataset.pk]), {"aspect": "overall"}, HTTP_ACCEPT_LANGUAGE="ja")
    html = page.content.decode()
    assert "予測駆動推定" in html
    assert "実効人数" in html


def test_confidence_from_repeated_samples_and_tied_human_labels(planned: tuple[Dataset, Plan]) -> None:
    dataset, plan = planned
    judge = Judge.objects.create(dataset=dataset, name="sampling judge", kind=JudgeKind.RUN)
    run = JudgeRun.objects.create(judge=judge, dataset=dataset, config_snapshot={}, method="direct", status="succeeded")
    responses = list(
        Response.objects.filter(turn__item__dataset=dataset).order_by("id").values_list("id", "system__key")
    )
    judgments = []
    for index, (response_id, key) in enumerate(responses):
        prompt = index // 2
        truth = plan.human[key][prompt] if prompt < RATED_PROMPTS else 3.0
        # Three replies each: unanimous and right on the first 30 prompts, two of three wrong on the others.
        wrong = (truth % 5) + 1
        samples = [truth] * 3 if prompt < CONFIDENT_PROMPTS else [wrong, wrong, truth]
        judgments += [
            Judgment(
                run=run,
                response_id=response_id,
                aspect_name="overall",
                sample=sample,
                status=JudgmentStatus.DONE,
                score=value,
                score_mode="parsed",
            )
            for sample, value in enumerate(samples)
        ]
    Judgment.objects.bulk_create(judgments)
    # A second rater disagrees on one rated answer, so its human label ties and it leaves the calibration.
    first_rated = Response.objects.filter(turn__item__dataset=dataset).order_by("id").first()
    RatingFactory(
        response=first_rated,
        aspect=Aspect.objects.get(dataset=dataset, name="overall"),
        rater=RaterFactory(dataset=dataset),
        raw=int(plan.human["sys_a"][0] % 5) + 1,
    )
    result = trust_or_escalate_calibrate(
        dataset=dataset, judge_name="sampling judge", aspect_name="overall", target=0.8, delta=0.05
    )
    assert result["confidence_sources"] == {"score_distribution": 0, "samples": 2 * PROMPTS}
    assert result["tied_human_labels"] == 1
    assert result["n"] == 2 * RATED_PROMPTS - 1
    assert result["threshold"]["value"] == 1.0
    assert result["kept"] == 2 * CONFIDENT_PROMPTS - 1
    assert result["empirical_agreement"]["value"] == 1.0


def test_openapi_schema_lists_the_ppi_endpoint(researcher: User) -> None:
    schema = client_for(researcher).get(reverse("api-schema"), {"format": "json"})
    assert schema.status_code == 200
    parameters = json.loads(schema.content)["paths"]["/api/stats/datasets/{id}/ppi/"]["get"]["parameters"]
    assert {"judge", "aspect", "tuning", "campaign", "origin", "excluded"} <= {p["name"] for p in parameters}

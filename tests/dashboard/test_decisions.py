"""compare_judges and plan_study: the command line and the API, recomputed from the imported file with scipy and
the reference-checked formulas (tests/stats/test_judge_comparison.py holds cocor's and statpsych's values)."""

from __future__ import annotations

import io
import json
import random
from typing import Any

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.core.management.base import CommandError
from django.urls import reverse
from scipy import stats

from annotations.datasets.importing import dataset_import
from annotations.models import Dataset, Response
from judging.statistics.judge_comparison import steiger_z, williams_t, zou_interval
from tests.commands import command_output as run
from tests.conftest import client_for
from tests.dashboard.conftest import (
    ASPECTS,
    CAMPAIGN_A,
    JUDGE_NAME,
    MISSING,
    SCOPED_DATASET,
    SCOPED_JUDGE,
    ScopedData,
)

pytestmark = pytest.mark.django_db

TWO_JUDGES = "two judges Ξ"
NOISY = "noisy judge"
RANDOM = "random judge"
STAT_KEYS = {"value", "undefined"}
INTERVAL_KEYS = {"low", "high", "undefined"}


@pytest.fixture
def two_judges(researcher: User, stats_jsonl: list[dict[str, Any]]) -> tuple[Dataset, list[dict[str, Any]]]:
    """The stats demo file with a second, noisier judge and a third that scores at random beside the first one."""
    rng = random.Random(13)
    for item in stats_jsonl:
        for turn in item["turns"]:
            for answer in turn["responses"].values():
                if JUDGE_NAME in answer.get("auto_evals", {}):
                    answer["auto_evals"][NOISY] = {
                        aspect: max(1, min(5, round(score + rng.gauss(0, 1.6))))
                        for aspect, score in answer["auto_evals"][JUDGE_NAME].items()
                    }
                    answer["auto_evals"][RANDOM] = {aspect: rng.randint(1, 5) for aspect in answer["auto_evals"][NOISY]}
    cache.clear()
    body = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in stats_jsonl).encode("utf-8")
    result = dataset_import(stream=io.BytesIO(body), name=TWO_JUDGES, preset="llm-human-eval-jp", owner=researcher)
    return result.dataset, stats_jsonl


def triples(lines: list[dict[str, Any]], aspect: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """(human mean, judge 1, judge 2, system) per answer with all three, straight from the JSONL."""
    human, first, second, systems = [], [], [], []
    for item in lines:
        for turn in item["turns"]:
            for system, answer in turn["responses"].items():
                values = [v for v in answer.get("human_evals", {}).get(aspect, []) if v not in MISSING]
                scores = answer.get("auto_evals", {})
                if values and aspect in scores.get(JUDGE_NAME, {}) and aspect in scores.get(NOISY, {}):
                    human.append(sum(values) / len(values))
                    first.append(float(scores[JUDGE_NAME][aspect]))
                    second.append(float(scores[NOISY][aspect]))
                    systems.append(system)
    return np.array(human), np.array(first), np.array(second), systems


def test_compare_judges_json_matches_the_file_and_cocors_formulas(
    two_judges: tuple[Dataset, list[dict[str, Any]]],
) -> None:
    _, lines = two_judges
    report = json.loads(run("compare_judges", "--dataset", TWO_JUDGES, "--judges", JUDGE_NAME, NOISY, "--json"))
    assert report["judges"] == [JUDGE_NAME, NOISY]
    assert (report["level"], report["coefficient"]) == ("response", "pearson")
    assert list(report["aspects"]) == ASPECTS
    for aspect, entry in report["aspects"].items():
        assert [judge["judge"] for judge in entry["judges"]] == [JUDGE_NAME, NOISY]
        assert set(entry["williams"]) == {"t", "df", "p_two_sided", "p_one_sided"}
        assert set(entry["steiger"]) == {"z", "p_two_sided"}
        assert set(entry["difference_ci95"]) == INTERVAL_KEYS
        assert set(entry["r_between"]) == STAT_KEYS
        human, first, second, _ = triples(lines, aspect)
        r1 = stats.pearsonr(human, first).statistic
        r2 = stats.pearsonr(human, second).statistic
        r12 = stats.pearsonr(first, second).statistic
        n = human.size
        assert entry["n"] == n
        assert entry["judges"][0]["r"]["value"] == pytest.approx(r1, abs=1e-9)
        assert entry["judges"][1]["r"]["value"] == pytest.approx(r2, abs=1e-9)
        assert entry["difference"]["value"] == pytest.approx(r1 - r2, abs=1e-9)
        expected_t = williams_t(r1, r2, r12, n)
        assert entry["williams"]["t"]["value"] == pytest.approx(expected_t["t"]["value"], abs=1e-9)
        assert entry["williams"]["df"] == n - 3
        assert entry["williams"]["p_one_sided"]["value"] == pytest.approx(expected_t["p_one_sided"]["value"], abs=1e-9)
        assert entry["steiger"]["z"]["value"] == pytest.approx(steiger_z(r1, r2, r12, n)["z"]["value"], abs=1e-9)
        zou = zou_interval(r1, r2, r12, n)
        assert entry["difference_ci95"]["low"] == pytest.approx(zou["low"], abs=1e-9)
        assert entry["difference_ci95"]["high"] == pytest.approx(zou["high"], abs=1e-9)
    text = run("compare_judges", "--dataset", TWO_JUDGES, "--judges", JUDGE_NAME, NOISY)
    assert "Williams t" in text and ASPECTS[0] in text


def test_compare_judges_levels_and_rank_coefficients(two_judges: tuple[Dataset, list[dict[str, Any]]]) -> None:
    _, lines = two_judges
    aspect = ASPECTS[0]
    args = ["compare_judges", "--dataset", TWO_JUDGES, "--judges", JUDGE_NAME, NOISY, "--aspect", aspect, "--json"]
    kendall = json.loads(run(*args, "--coefficient", "kendall"))["aspects"]
    assert list(kendall) == [aspect]
    entry = kendall[aspect]
    human, first, second, systems = triples(lines, aspect)
    assert entry["judges"][0]["r"]["value"] == pytest.approx(stats.kendalltau(human, first).statistic, abs=1e-9)
    assert entry["difference_ci95_method"] == "paired percentile bootstrap over answers, 1000 resamples, seed 0"
    assert entry["difference_ci95"]["low"] < entry["difference"]["value"] < entry["difference_ci95"]["high"]
    assert entry["williams"]["t"]["undefined"].startswith("Williams's t and Steiger's z are stated for Pearson")

    system = json.loads(run(*args, "--level", "system"))["aspects"][aspect]
    names = sorted(set(systems))
    assert system["n"] == len(names) == 4
    means = [
        [float(np.mean(column[[s == name for s in systems]])) for name in names] for column in (human, first, second)
    ]
    assert system["judges"][0]["r"]["value"] == pytest.approx(stats.pearsonr(means[0], means[1]).statistic, abs=1e-9)
    assert system["williams"]["df"] == 1

    per_prompt = json.loads(run(*args, "--level", "per_prompt"))["aspects"][aspect]
    assert per_prompt["difference_ci95_method"].startswith("paired percentile bootstrap over prompts")
    assert per_prompt["williams"]["t"]["undefined"].startswith("the prompt level averages")


def test_compare_judges_errors_name_the_problem(two_judges: tuple[Dataset, list[dict[str, Any]]]) -> None:
    base = ["compare_judges", "--dataset", TWO_JUDGES, "--json"]
    with pytest.raises(CommandError, match="no judge named 'ghost'"):
        run(*base, "--judges", JUDGE_NAME, "ghost")
    with pytest.raises(CommandError, match="two different judges"):
        run(*base, "--judges", JUDGE_NAME, JUDGE_NAME)
    with pytest.raises(CommandError, match="no aspect named 'nope'"):
        run(*base, "--judges", JUDGE_NAME, NOISY, "--aspect", "nope")
    # The scope flags are correlate's: no app ratings exist, so the judge covers none of the scope.
    with pytest.raises(CommandError, match=f"judge '{JUDGE_NAME}' has no score on any aspect of an answer the humans"):
        run(*base, "--judges", JUDGE_NAME, NOISY, "--origin", "app")
    with pytest.raises(CommandError, match="no campaign named 'nothing'"):
        run(*base, "--judges", JUDGE_NAME, NOISY, "--campaign", "nothing")


def test_compare_judges_refuses_too_few_units_and_constant_scores(researcher: User) -> None:
    def dataset(name: str, judge2: list[int], answers: int) -> None:
        lines = []
        for index in range(answers):
            lines.append(
                {
                    "id": f"q{index}",
                    "turns": [
                        {
                            "prompt": f"question {index}",
                            "responses": {
                                "sys": {
                                    "response": "answer",
                                    "human_evals": {"fluency": [1 + index % 5, 1 + (index * 2) % 5]},
                                    "auto_evals": {
                                        "a": {"fluency": 1 + index % 4},
                                        "b": {"fluency": judge2[index]},
                                    },
                                }
                            },
                        }
                    ],
                }
            )
        body = "".join(json.dumps(line) + "\n" for line in lines).encode()
        dataset_import(stream=io.BytesIO(body), name=name, preset="llm-human-eval-jp", owner=researcher)

    cache.clear()
    dataset("tiny", [1, 2, 3], 3)
    with pytest.raises(CommandError, match="fewer than 4 answers have a human score and both judges' scores"):
        run("compare_judges", "--dataset", "tiny", "--judges", "a", "b", "--json")
    dataset("flat", [3] * 8, 8)
    with pytest.raises(CommandError, match="judge 2's scores are constant"):
        run("compare_judges", "--dataset", "flat", "--judges", "a", "b", "--json")


def test_plan_study_command(db: None) -> None:
    def plan(*args: str) -> dict[str, int]:
        return json.loads(run("plan_study", *args, "--json"))

    # statpsych examples: size.ci.icc(.05, .70, 3, .2) -> 68; size.ci.kendalltau(.05, .3, .2) -> 143;
    # size.test.cor(.05, .95, -.50, 0, 0) -> 47; Krippendorff's table, alpha .800, p_c .25, significance .05 -> 139.
    assert plan("--statistic", "icc", "--expected", "0.7", "--width", "0.2", "--raters", "3") == {"items": 68}
    assert plan("--statistic", "kendall", "--expected", "0.3", "--width", "0.2") == {"items": 143}
    assert plan("--statistic", "pearson", "--expected", "-0.5", "--power", "0.95", "--null", "0") == {"items": 47}
    assert plan("--statistic", "alpha", "--alpha-min", "0.8", "--smallest-category", "0.25") == {"items": 139}
    with pytest.raises(CommandError, match="width must lie strictly between 0 and 2, not 2"):
        plan("--statistic", "pearson", "--expected", "0.3", "--width", "2")
    with pytest.raises(CommandError, match="expected correlation must lie strictly between -1 and 1, not 1"):
        plan("--statistic", "spearman", "--expected", "1", "--width", "0.2")
    with pytest.raises(CommandError, match="needs --alpha-min and --smallest-category"):
        plan("--statistic", "alpha", "--alpha-min", "0.8")


# ---------------------------------------------------------------- API


def test_compare_judges_api_equals_the_command_and_checks_access(
    two_judges: tuple[Dataset, list[dict[str, Any]]],
    researcher: User,
    other_researcher: User,
    annotator1: User,
) -> None:
    dataset, _ = two_judges
    url = reverse("api-stats-compare-judges", args=[dataset.pk])
    query = {"judge1": JUDGE_NAME, "judge2": NOISY, "coefficient": "spearman"}
    response = client_for(researcher).get(url, query)
    assert response.status_code == 200
    cli = json.loads(
        run(
            "compare_judges",
            "--dataset",
            TWO_JUDGES,
            "--judges",
            JUDGE_NAME,
            NOISY,
            "--coefficient",
            "spearman",
            "--json",
        )
    )
    assert response.json() == cli
    assert client_for(researcher).post(url, query).status_code == 405
    assert client_for(None).get(url, query).status_code in (401, 403)
    assert client_for(annotator1).get(url, query).status_code == 403
    assert client_for(other_researcher).get(url, query).status_code == 404
    missing = client_for(researcher).get(url, {"judge1": JUDGE_NAME, "judge2": "ghost"})
    assert missing.status_code == 404 and "ghost" in missing.json()["detail"]
    uncovered = client_for(researcher).get(url, {**query, "origin": "app"})
    assert uncovered.status_code == 400
    assert "has no score on any aspect" in uncovered.json()["detail"][0]


def test_plan_api(researcher: User, annotator1: User) -> None:
    url = reverse("api-stats-plan")
    ok = client_for(researcher).get(url, {"statistic": "spearman", "expected": "0.362", "width": "0.25"})
    assert ok.status_code == 200 and ok.json() == {"items": 200}  # statpsych size.ci.spear(.05, .362, .25) -> 200
    bad = client_for(researcher).get(url, {"statistic": "pearson", "expected": "0.3", "width": "2.5"})
    assert bad.status_code == 400 and "width must lie strictly between 0 and 2" in bad.json()["detail"][0]
    nan = client_for(researcher).get(url, {"statistic": "pearson", "expected": "nan", "width": "0.2"})
    assert nan.status_code == 400
    assert client_for(researcher).post(url, {"statistic": "pearson"}).status_code == 405
    assert client_for(None).get(url, {"statistic": "pearson"}).status_code in (401, 403)
    assert client_for(annotator1).get(url, {"statistic": "pearson"}).status_code == 403


def test_openapi_schema_lists_the_new_endpoints(researcher: User) -> None:
    response = client_for(researcher).get(reverse("api-schema"), {"format": "json"})
    assert response.status_code == 200
    paths = json.loads(response.content)["paths"]
    assert "/api/stats/datasets/{id}/compare-judges/" in paths
    plan = paths["/api/stats/plan/"]["get"]
    assert {parameter["name"] for parameter in plan["parameters"]} >= {"statistic", "expected", "width", "power"}


def test_compare_judges_reads_the_campaign_scope_like_correlate(scoped: ScopedData) -> None:
    """--campaign keeps the ratings that campaign collected: n is the answers campaign A rated, the human score is
    the mean of its annotators' values, straight from their submissions."""
    from judging.models import Judge, JudgeKind, JudgeScore

    rng = random.Random(21)
    judge = Judge.objects.create(dataset=scoped.dataset, name="second judge", kind=JudgeKind.IMPORTED)
    first_scores = scoped.judge_scores("overall")
    responses = {
        (item, index, system): pk
        for pk, item, index, system in Response.objects.filter(turn__item__dataset=scoped.dataset).values_list(
            "pk", "turn__item__external_id", "turn__index", "system__key"
        )
    }
    second_scores = {key: float(min(5, max(1, value + rng.choice([-1, 0, 1])))) for key, value in first_scores.items()}
    JudgeScore.objects.bulk_create(
        [
            JudgeScore(judge=judge, response_id=responses[key], aspect_name="overall", value=value)
            for key, value in second_scores.items()
        ]
    )
    cache.clear()
    report = json.loads(
        run(
            "compare_judges",
            "--dataset",
            SCOPED_DATASET,
            "--judges",
            SCOPED_JUDGE,
            "second judge",
            "--aspect",
            "overall",
            "--campaign",
            CAMPAIGN_A,
            "--json",
        )
    )
    assert report["scope"]["campaign"] == CAMPAIGN_A
    entry = report["aspects"]["overall"]
    rated = scoped.values("app", CAMPAIGN_A)["overall"]
    keys = sorted(key for key, values in rated.items() if values)
    human = np.array([np.mean(rated[key]) for key in keys])
    first = np.array([first_scores[key] for key in keys])
    second = np.array([second_scores[key] for key in keys])
    assert entry["n"] == len(keys)
    assert entry["judges"][0]["r"]["value"] == pytest.approx(stats.pearsonr(human, first).statistic, abs=1e-9)
    assert entry["judges"][1]["r"]["value"] == pytest.approx(stats.pearsonr(human, second).statistic, abs=1e-9)
    assert entry["r_between"]["value"] == pytest.approx(stats.pearsonr(first, second).statistic, abs=1e-9)

"""alt_test and ranking: the commands, the API and the reports read the same dataset and print the same JSON."""

from __future__ import annotations

import io
import json
from collections.abc import Callable

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from annotations.models import Dataset
from judging.statistics.alt_test import Labels, alt_test
from judging.statistics.pairwise import comparisons_from, preference_comparisons
from judging.statistics.ranking import bradley_terry
from tests.commands import command_json as run
from tests.conftest import client_for
from tests.dashboard.decision_data import (
    COPY_JUDGE,
    DATASET,
    PAIRWISE_JUDGE,
    RANDOM_JUDGE,
    RATERS,
    SYSTEMS,
    decision_lines,
    make_decision_dataset,
)

pytestmark = pytest.mark.django_db

STAT_KEYS = {"value", "undefined"}
INTERVAL_KEYS = {"low", "high", "undefined"}


@pytest.fixture
def dataset(researcher: User) -> Dataset:
    return make_decision_dataset(researcher)


def _file_labels(judge: str) -> tuple[Labels, np.ndarray]:
    """The test's input straight from the JSONL, without the ORM."""
    answer, rater, value, judged = [], [], [], []
    for line in decision_lines():
        for system in SYSTEMS:
            entry = line["turns"][0]["responses"][system]
            for code, score in enumerate(entry["human_evals"]["overall"]):
                answer.append(len(judged))
                rater.append(code)
                value.append(float(score))
            judged.append(float(entry["auto_evals"][judge]["overall"]))
    return Labels(np.array(answer), np.array(rater), np.array(value), tuple(RATERS)), np.array(judged)


def test_alt_test_json_fails_a_random_judge_and_passes_a_copying_one(dataset: Dataset) -> None:
    failed = run("alt_test", "--dataset", DATASET, "--judge", RANDOM_JUDGE)["aspects"]["overall"]
    passed = run("alt_test", "--dataset", DATASET, "--judge", COPY_JUDGE, "--epsilon", "0.1")["aspects"]["overall"]
    for result in (failed, passed):
        assert {"epsilon", "q", "metric", "winning_rate", "advantage_probability", "passed", "raters"} <= set(result)
        assert (result["epsilon"], result["q"], result["metric"]) == (0.1, 0.05, "neg_rmse")
        assert set(result["winning_rate"]) == STAT_KEYS and set(result["advantage_probability"]) == STAT_KEYS
        assert [row["rater"] for row in result["raters"]] == RATERS
        for row in result["raters"]:
            assert set(row) == {"rater", "n", "p_value", "p_adjusted", "rejected", "rho_judge", "rho_human", "skipped"}
            assert row["n"] == 200 and row["skipped"] is None
    assert failed["passed"]["value"] is False and failed["winning_rate"]["value"] == 0.0
    assert passed["passed"]["value"] is True and passed["winning_rate"]["value"] >= 0.6
    # The same numbers as the pure function on the file's values.
    labels, judge = _file_labels(COPY_JUDGE)
    expected = alt_test(labels, judge, epsilon=0.1, metric="neg_rmse")
    assert [row["p_value"]["value"] for row in passed["raters"]] == pytest.approx(
        [row["p_value"]["value"] for row in expected["raters"]], rel=1e-12
    )


def test_alt_test_minimum_and_errors(dataset: Dataset) -> None:
    result = run("alt_test", "--dataset", DATASET, "--judge", COPY_JUDGE, "--min-instances", "201")
    overall = result["aspects"]["overall"]
    assert overall["passed"] == {"value": None, "undefined": overall["winning_rate"]["undefined"]}
    assert all(row["skipped"].startswith("only 200 answers") for row in overall["raters"])
    with pytest.raises(CommandError, match="no judge named 'ghost'"):
        run("alt_test", "--dataset", DATASET, "--judge", "ghost")
    with pytest.raises(CommandError, match="no aspect named 'tone'"):
        run("alt_test", "--dataset", DATASET, "--judge", COPY_JUDGE, "--aspect", "tone")
    with pytest.raises(CommandError, match="epsilon"):
        run("alt_test", "--dataset", DATASET, "--judge", COPY_JUDGE, "--epsilon", "1.5")
    with pytest.raises(CommandError, match="invalid choice"):
        run("alt_test", "--dataset", DATASET, "--judge", COPY_JUDGE, "--metric", "f1")


def test_ranking_of_the_humans_preferences_matches_the_fit_of_the_file(dataset: Dataset) -> None:
    report = run("ranking", "--dataset", DATASET, "--bootstrap", "200", "--seed", "3")
    assert (report["model"], report["reference"]) == ("bradley_terry", "sys_a")
    lines = decision_lines()
    rows = preference_comparisons(
        [line["id"] for line in lines for _ in line["turns"][0]["preferences"]],
        [entry["candidates"] for line in lines for entry in line["turns"][0]["preferences"]],
        [entry["preferred"] for line in lines for entry in line["turns"][0]["preferences"]],
    )
    assert report["n_comparisons"] == len(rows) == 50 * 5 * 3
    expected, _ = bradley_terry(comparisons_from(rows))
    by_system = {row["system"]: row for row in report["systems"]}
    for row in expected["systems"]:
        assert by_system[row["system"]]["strength"]["value"] == pytest.approx(row["strength"]["value"], abs=1e-9)
    assert by_system["sys_a"]["strength"]["value"] == 0.0 and by_system["sys_a"]["se"]["undefined"] == "reference"
    assert [row["system"] for row in report["systems"]] == SYSTEMS
    for row in report["systems"]:
        assert {"system", "strength", "se", "ci95", "rank", "rank_ci95", "wins", "losses", "ties"} <= set(row)
        assert set(row["ci95"]) == INTERVAL_KEYS and set(row["rank_ci95"]) == {"best", "worst"}
        assert row["rank_ci95"]["best"] <= row["rank"] <= row["rank_ci95"]["worst"]
    assert report["bootstrap"] == {"resamples": 200, "seed": 3, "unit": "prompt"}
    again = run("ranking", "--dataset", DATASET, "--bootstrap", "200", "--seed", "3", "--reference", "sys_d")
    assert again["reference"] == "sys_d"


def test_ranking_of_a_pairwise_judge_and_by_mean_rating(dataset: Dataset) -> None:
    judge = run("ranking", "--dataset", DATASET, "--source", PAIRWISE_JUDGE, "--bootstrap", "100")
    assert judge["n_comparisons"] == 50 * 6 * 2
    assert [row["system"] for row in judge["systems"]] == SYSTEMS
    versus = judge["versus_humans"]
    assert versus["n_systems"] == 4 and set(versus["kendall_tau"]) == STAT_KEYS and set(versus["ci95"]) == INTERVAL_KEYS
    by_mean = run("ranking", "--dataset", DATASET, "--aspect", "overall", "--source", COPY_JUDGE, "--bootstrap", "100")
    assert by_mean["model"] == "mean_rating" and by_mean["reference"] is None
    assert by_mean["versus_humans"]["n_systems"] == 4
    humans = run("ranking", "--dataset", DATASET, "--aspect", "overall", "--bootstrap", "100")
    lines = decision_lines()
    for row in humans["systems"]:
        answers = [np.mean(line["turns"][0]["responses"][row["system"]]["human_evals"]["overall"]) for line in lines]
        assert row["strength"]["value"] == pytest.approx(np.mean(answers))


def test_ranking_errors_name_the_problem(dataset: Dataset) -> None:
    with pytest.raises(CommandError, match="reference system 'sys_z' does not exist; the systems are: sys_a"):
        run("ranking", "--dataset", DATASET, "--reference", "sys_z")
    with pytest.raises(CommandError, match="has no finished pairwise judgments"):
        run("ranking", "--dataset", DATASET, "--source", COPY_JUDGE)
    with pytest.raises(CommandError, match="bootstrap"):
        run("ranking", "--dataset", DATASET, "--bootstrap", "99")
    with pytest.raises(CommandError, match="no judge named 'ghost'"):
        run("ranking", "--dataset", DATASET, "--source", "ghost")
    with pytest.raises(CommandError, match="applies to the Bradley-Terry ranking only"):
        run("ranking", "--dataset", DATASET, "--aspect", "overall", "--reference", "sys_a")


def test_text_output(dataset: Dataset) -> None:
    out = io.StringIO()
    call_command("alt_test", "--dataset", DATASET, "--judge", RANDOM_JUDGE, stdout=out)
    assert "aspect overall: FAILED; winning rate 0.000 (0 of 5 raters)" in out.getvalue()
    out = io.StringIO()
    call_command("ranking", "--dataset", DATASET, "--source", PAIRWISE_JUDGE, "--bootstrap", "100", stdout=out)
    assert "Kendall's tau-b with the humans' ranking over 4 systems" in out.getvalue()


@pytest.mark.parametrize(
    ("endpoint", "query"),
    [("api-stats-alt-test", {"judge": COPY_JUDGE}), ("api-stats-ranking", {"bootstrap": "100"})],
)
def test_api_access_rules(
    endpoint: str,
    query: dict[str, str],
    dataset: Dataset,
    assert_researchers_only: Callable[..., None],
) -> None:
    url = reverse(endpoint, args=[dataset.pk])
    assert_researchers_only(url, query)


def test_api_equals_the_cli_and_refuses_bad_parameters(dataset: Dataset, researcher: User) -> None:
    client = client_for(researcher)
    alt_url = reverse("api-stats-alt-test", args=[dataset.pk])
    api = client.get(alt_url, {"judge": COPY_JUDGE, "epsilon": "0.15"}).json()
    assert api == run("alt_test", "--dataset", DATASET, "--judge", COPY_JUDGE, "--epsilon", "0.15")
    ranking_url = reverse("api-stats-ranking", args=[dataset.pk])
    api = client.get(ranking_url, {"source": PAIRWISE_JUDGE, "bootstrap": "100", "seed": "2"}).json()
    assert api == run("ranking", "--dataset", DATASET, "--source", PAIRWISE_JUDGE, "--bootstrap", "100", "--seed", "2")
    assert client.get(alt_url, {"judge": COPY_JUDGE, "epsilon": "2"}).status_code == 400
    assert client.get(alt_url, {"judge": COPY_JUDGE, "metric": "f1"}).status_code == 400
    missing = client.get(alt_url, {"judge": "ghost"})
    assert missing.status_code == 404 and "ghost" in missing.json()["detail"]
    bad_reference = client.get(ranking_url, {"reference": "sys_z"})
    assert bad_reference.status_code == 400 and "sys_z" in json.dumps(bad_reference.json())
    assert client.get(ranking_url, {"bootstrap": "50"}).status_code == 400


def test_openapi_schema_lists_both_endpoints(researcher: User) -> None:
    schema = client_for(researcher).get(reverse("api-schema"), {"format": "json"})
    assert schema.status_code == 200
    paths = json.loads(schema.content)["paths"]
    alt_names = {p["name"] for p in paths["/api/stats/datasets/{id}/alt-test/"]["get"]["parameters"]}
    assert {"judge", "epsilon", "q", "metric", "min_instances", "campaign", "origin", "excluded"} <= alt_names
    ranking_names = {p["name"] for p in paths["/api/stats/datasets/{id}/ranking/"]["get"]["parameters"]}
    assert {"source", "aspect", "reference", "bootstrap", "seed", "campaign", "origin", "excluded"} <= ranking_names


def test_judges_page_shows_the_verdict_with_its_evidence(dataset: Dataset, researcher: User, annotator1: User) -> None:
    client = client_for(researcher)
    url = reverse("dashboard-judges", args=[dataset.pk])
    page = client.get(url, {"judge": RANDOM_JUDGE, "aspect": "overall"}).content.decode()
    assert "Failed: the evidence does not show that the judge can replace a rater." in page
    assert "for only 0 of 5 raters: winning rate ω = 0.00 < 0.5" in page
    assert "0.2 when the raters are experts" in page
    section = page[page.index('id="table-alternative"') :]
    section = section[: section.index("</table>")]
    assert section.count("<tr><td>w") == 5 and section.count("<td>200</td>") == 5  # each rater with its n
    page = client.get(url, {"judge": COPY_JUDGE, "aspect": "overall", "epsilon": "0.15"}).content.decode()
    assert "Passed: the judge can replace a rater." in page and "ε = 0.15" in page
    assert client.get(url, {"judge": COPY_JUDGE, "epsilon": "3"}).status_code == 400
    download = client.get(
        reverse("dashboard-judge-table", args=[dataset.pk, "alternative", "json"]),
        {"judge": COPY_JUDGE, "aspect": "overall", "epsilon": "0.15"},
    )
    assert download.status_code == 200
    assert client_for(annotator1).get(url, {"judge": COPY_JUDGE}).status_code == 403
    assert client.post(url, {"judge": COPY_JUDGE}).status_code == 405


def test_rankings_page_side_by_side(dataset: Dataset, researcher: User, other_researcher: User) -> None:
    client = client_for(researcher)
    url = reverse("dashboard-rankings", args=[dataset.pk])
    page = client.get(url, {"judge": PAIRWISE_JUDGE}).content.decode()
    assert "sys_a ranks first (95% rank interval 1 to" in page
    assert "from 750 comparisons on 50 prompts" in page and "from 600 comparisons on 50 prompts" in page
    assert f"{PAIRWISE_JUDGE} orders the systems like the humans with Kendall" in page
    page = client.get(url, {"judge": COPY_JUDGE, "aspect": "overall"}).content.decode()
    assert "from 200 rated answers on 50 prompts" in page
    page = client.get(url, {"judge": COPY_JUDGE}).content.decode()
    assert "No ranking" in page and "has no finished pairwise judgments" in page
    table = client.get(
        reverse("dashboard-rankings-table", args=[dataset.pk, "ranking-judge", "csv"]), {"judge": PAIRWISE_JUDGE}
    )
    assert table.status_code == 200 and b"sys_a" in table.content
    assert client.get(url, {"judge": "ghost"}).status_code == 404
    assert client_for(other_researcher).get(url).status_code == 404
    assert client_for(None).get(url).status_code == 302
    assert client.post(url).status_code == 405


def test_pages_in_japanese(dataset: Dataset, researcher: User) -> None:
    client = client_for(researcher)
    headers = {"HTTP_ACCEPT_LANGUAGE": "ja"}
    judges = client.get(
        reverse("dashboard-judges", args=[dataset.pk]), {"judge": RANDOM_JUDGE, "aspect": "overall"}, **headers
    ).content.decode()
    assert "代替アノテーター検定" in judges and "不合格" in judges
    rankings = client.get(reverse("dashboard-rankings", args=[dataset.pk]), {"judge": PAIRWISE_JUDGE}, **headers)
    assert "順位" in rankings.content.decode()

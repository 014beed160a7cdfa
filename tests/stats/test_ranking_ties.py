"""Ties in the Bradley–Terry ranking: the three conventions (half a win to each side, left out, Davidson's model),
each checked against a fit written independently here, and the convention named in every output.

References: the half-win and drop conventions against statsmodels' binomial GLM (the logistic regression that R's
``BTm`` fits), Davidson's (1970) model against its likelihood maximised by scipy.optimize, with standard errors from
statsmodels' numerical Hessian of that likelihood.
"""

from __future__ import annotations

import io
import json
from typing import Any

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from scipy.optimize import minimize
from statsmodels.genmod.families import Binomial
from statsmodels.genmod.generalized_linear_model import GLM
from statsmodels.tools.numdiff import approx_hess3

from annotations.datasets.importing import dataset_import
from annotations.models import Dataset
from annotations.rubrics.specs import parse_rubric
from judging.analysis.preference_selectors import choice_comparisons
from judging.analysis.selectors import ALL_RATINGS
from judging.statistics.pairwise import RankingError, comparisons_from, tie_comparisons
from judging.statistics.ranking import bradley_terry, prompt_weights

SYSTEMS = ("a", "b", "c", "d")
STRENGTH = {"a": 0.8, "b": 0.3, "c": 0.0, "d": -0.5}


def _sample(n: int = 400, nu: float = 0.7, seed: int = 1) -> list[tuple[int, str, str, float]]:
    """Comparisons drawn from Davidson's model: a win 1, a loss 0, a tie 0.5; two per prompt."""
    rng = np.random.default_rng(seed)
    rows: list[tuple[int, str, str, float]] = []
    for k in range(n):
        i, j = rng.choice(len(SYSTEMS), 2, replace=False)
        one, other = SYSTEMS[i], SYSTEMS[j]
        p_one, p_other = np.exp(STRENGTH[one]), np.exp(STRENGTH[other])
        p_tie = nu * np.sqrt(p_one * p_other)
        u = rng.random() * (p_one + p_other + p_tie)
        rows.append((k // 2, one, other, 1.0 if u < p_one else (0.0 if u < p_one + p_other else 0.5)))
    return rows


def _by_system(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["system"]: row for row in result["systems"]}


def _glm_fit(rows: list[tuple[int, str, str, float]]) -> tuple[np.ndarray, np.ndarray]:
    """Logistic regression of the score on the strength difference, reference ``a`` (first in sorted order)."""
    design = np.zeros((len(rows), len(SYSTEMS) - 1))
    for position, (_, one, other, _) in enumerate(rows):
        if one != "a":
            design[position, SYSTEMS.index(one) - 1] += 1.0
        if other != "a":
            design[position, SYSTEMS.index(other) - 1] -= 1.0
    outcome = np.asarray([row[3] for row in rows])
    fit = GLM(outcome, design, family=Binomial()).fit(tol=1e-12)
    return np.asarray(fit.params), np.asarray(fit.bse)


def test_half_a_win_matches_a_binomial_glm_with_fractional_outcomes() -> None:
    rows = _sample()
    assert sum(row[3] == 0.5 for row in rows) > 50
    result = bradley_terry(comparisons_from(rows))[0]
    assert result["ties"]["convention"] == "half" and result["ties"]["n_ties"] == sum(r[3] == 0.5 for r in rows)
    params, errors = _glm_fit(rows)
    fit = _by_system(result)
    for position, name in enumerate(SYSTEMS[1:]):
        assert fit[name]["strength"]["value"] == pytest.approx(params[position], abs=1e-8)
        assert fit[name]["se"]["value"] == pytest.approx(errors[position], rel=1e-6)
    assert bradley_terry(comparisons_from(rows), ties="half")[0] == result


def test_drop_matches_the_glm_of_the_decided_comparisons_only() -> None:
    rows = _sample()
    decided = [row for row in rows if row[3] != 0.5]
    result = bradley_terry(comparisons_from(rows), ties="drop")[0]
    params, errors = _glm_fit(decided)
    fit = _by_system(result)
    for position, name in enumerate(SYSTEMS[1:]):
        assert fit[name]["strength"]["value"] == pytest.approx(params[position], abs=1e-8)
        assert fit[name]["se"]["value"] == pytest.approx(errors[position], rel=1e-6)
    assert result["n_comparisons"] == len(decided)
    assert result["ties"] == {
        "convention": "drop",
        "description": "ties are left out",
        "n_ties": len(rows) - len(decided),
        "n_dropped": len(rows) - len(decided),
    }
    # Three ties, two wins of a and one of b: 2 against 1 when ties are left out, 3.5 against 2.5 when they count half.
    small = [(0, "a", "b", 0.5), (1, "b", "a", 0.5), (2, "a", "b", 0.5), (3, "a", "b", 1.0), (4, "b", "a", 0.0)]
    small += [(5, "b", "a", 1.0)]
    dropped = _by_system(bradley_terry(comparisons_from(small), ties="drop")[0])
    assert dropped["b"]["strength"]["value"] == pytest.approx(np.log(1 / 2))
    half = _by_system(bradley_terry(comparisons_from(small))[0])
    assert half["b"]["strength"]["value"] == pytest.approx(np.log(2.5 / 3.5))


def _davidson_negative_log_likelihood(params: np.ndarray, rows: list[tuple[int, str, str, float]]) -> float:
    """Davidson (1970): P(i beats j) = πi / (πi + πj + ν√(πiπj)), P(tie) = ν√(πiπj) / (the same); params are
    log π of b, c, d (a fixed at 0) and log ν."""
    log_pi = {"a": 0.0, **dict(zip(SYSTEMS[1:], params[:3], strict=True))}
    nu = np.exp(params[3])
    total = 0.0
    for _, one, other, score in rows:
        p_one, p_other = np.exp(log_pi[one]), np.exp(log_pi[other])
        p_tie = nu * np.sqrt(p_one * p_other)
        numerator = p_one if score == 1.0 else (p_other if score == 0.0 else p_tie)
        total -= np.log(numerator / (p_one + p_other + p_tie))
    return total


def test_davidson_matches_its_likelihood_maximised_independently() -> None:
    rows = _sample()
    comparisons = comparisons_from(rows)
    result, boot = bradley_terry(comparisons, ties="davidson", weights=prompt_weights(comparisons.n_prompts, 200, 0))
    reference = minimize(
        _davidson_negative_log_likelihood, np.zeros(4), args=(rows,), method="Nelder-Mead",
        options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20000, "maxfev": 40000},
    )  # fmt: skip
    assert reference.success
    errors = np.sqrt(np.diag(np.linalg.inv(approx_hess3(reference.x, _davidson_negative_log_likelihood, args=(rows,)))))
    fit = _by_system(result)
    assert result["ties"]["convention"] == "davidson" and result["reference"] == "a"
    for position, name in enumerate(SYSTEMS[1:]):
        assert fit[name]["strength"]["value"] == pytest.approx(reference.x[position], abs=1e-5)
        assert fit[name]["se"]["value"] == pytest.approx(errors[position], rel=1e-3)
    nu = result["ties"]["tie_parameter"]["value"]
    assert nu == pytest.approx(np.exp(reference.x[3]), rel=1e-5)
    low, high = result["ties"]["tie_parameter_ci95"]["low"], result["ties"]["tie_parameter_ci95"]["high"]
    assert np.log(low) == pytest.approx(reference.x[3] - 1.959964 * errors[3], abs=1e-3)
    assert np.log(high) == pytest.approx(reference.x[3] + 1.959964 * errors[3], abs=1e-3)
    assert boot is not None and boot.shape == (200, 4)
    for row in result["systems"]:
        assert row["rank_ci95"]["best"] <= row["rank"] <= row["rank_ci95"]["worst"]
    # The strengths differ from the half-win fit's: Davidson's λ is on the scale of the decided comparisons.
    half = _by_system(bradley_terry(comparisons)[0])
    assert abs(half["d"]["strength"]["value"] - fit["d"]["strength"]["value"]) > 0.1


def test_davidson_without_ties_or_with_only_ties_says_why_nu_is_undefined() -> None:
    decided = [(0, "a", "b", 1.0), (1, "b", "a", 1.0), (2, "a", "b", 1.0)]
    result = bradley_terry(comparisons_from(decided), ties="davidson")[0]
    assert result["ties"]["tie_parameter"]["undefined"].startswith("no ties")
    assert result["systems"] == bradley_terry(comparisons_from(decided))[0]["systems"]
    tied = [(0, "a", "b", 0.5), (1, "b", "a", 0.5)]
    only = bradley_terry(comparisons_from(tied), ties="davidson")[0]
    assert only["ties"]["tie_parameter"]["undefined"] == "every comparison is a tie: nu is not finite"
    with pytest.raises(RankingError, match="unknown tie convention 'elo'; choose one of half, drop, davidson"):
        bradley_terry(comparisons_from(tied), ties="elo")


def test_a_tie_among_k_systems_is_a_tie_between_each_pair() -> None:
    assert tie_comparisons([7, 8], [["a", "b", "c"], ["b", "b", "a"]]) == (
        [7, 7, 7, 8],
        ["a", "a", "b", "b"],
        ["b", "c", "c", "a"],
    )


# ---------------------------------------------------------------- through the product

DATASET = "ties"


def _import_with_ties() -> Dataset:
    """Six prompts answered by a and b: a chosen on 3, b on 1, a tie on 2 (one entry without a candidate list)."""
    lines = []
    for i in range(6):
        entry: dict[str, Any] = {"rater": "v1", "candidates": ["a", "b"]}
        if i < 3:
            entry["preferred"] = "a"
        elif i == 3:
            entry["preferred"] = "b"
        elif i == 4:
            entry.update(preferred=None, tie=True)
        else:
            entry = {"rater": "v1", "preferred": None, "tie": True}
        responses = {s: {"response": f"{s} {i}", "raters": ["r1"], "human_evals": {"overall": [3]}} for s in "ab"}
        lines.append({"id": f"p{i}", "turns": [{"prompt": f"q{i}", "responses": responses, "preferences": [entry]}]})
    body = "".join(json.dumps(line) + "\n" for line in lines).encode()
    rubric = parse_rubric({"aspects": [{"name": "overall", "min": 1, "max": 5}]}, source="t")
    return dataset_import(stream=io.BytesIO(body), name=DATASET, rubric=rubric).dataset


def _ranking(*extra: str) -> dict[str, Any]:
    out = io.StringIO()
    call_command("ranking", "--dataset", DATASET, "--bootstrap", "100", *extra, "--json", stdout=out)
    return json.loads(out.getvalue())


@pytest.mark.django_db
@pytest.mark.parametrize("in_database", [True, False])
def test_imported_ties_reach_the_comparisons(in_database: bool) -> None:
    from django.db import connection

    if in_database and connection.vendor != "postgresql":
        in_database = False
    dataset = _import_with_ties()
    choices = choice_comparisons(dataset, ALL_RATINGS, in_database=in_database)
    assert (choices.chosen, choices.other) == (["a", "a", "a", "b"], ["b", "b", "b", "a"])
    assert (choices.tied_first, choices.tied_second) == (["a", "a"], ["b", "b"])
    assert len(choices.tied_turn_ids) == 2


@pytest.mark.django_db
def test_the_humans_ranking_counts_ties_by_the_chosen_convention() -> None:
    _import_with_ties()
    half = _ranking()
    # a: 3 wins + 2 half = 4, b: 1 + 1 = 2, so log-strength of b = log(2 / 4) with a as the reference.
    assert half["ties"]["convention"] == "half" and half["ties"]["n_ties"] == 2
    rows = {row["system"]: row for row in half["systems"]}
    assert rows["b"]["strength"]["value"] == pytest.approx(np.log(2 / 4))
    assert (rows["a"]["wins"], rows["a"]["losses"], rows["a"]["ties"]) == (3, 1, 2)
    dropped = {row["system"]: row for row in _ranking("--ties", "drop")["systems"]}
    assert dropped["b"]["strength"]["value"] == pytest.approx(np.log(1 / 3))
    davidson = _ranking("--ties", "davidson")
    assert davidson["ties"]["convention"] == "davidson" and davidson["ties"]["tie_parameter"]["value"] > 0
    with pytest.raises(CommandError, match="applies to the Bradley-Terry ranking only"):
        _ranking("--ties", "drop", "--aspect", "overall")
    text = io.StringIO()
    call_command("ranking", "--dataset", DATASET, "--bootstrap", "100", "--ties", "davidson", stdout=text)
    assert "Bradley-Terry, ties: davidson, Davidson (1970) tie model" in text.getvalue()
    assert "Davidson tie parameter nu:" in text.getvalue()


@pytest.mark.django_db
def test_the_api_and_the_dashboard_take_and_show_the_convention(researcher) -> None:  # type: ignore[no-untyped-def]
    dataset = _import_with_ties()
    client = Client()
    client.force_login(researcher)
    dataset.owner = researcher
    dataset.save(update_fields=["owner"])
    url = reverse("api-stats-ranking", args=[dataset.pk])
    api = client.get(url, {"bootstrap": "100", "ties": "drop"}).json()
    assert api == _ranking("--ties", "drop")
    assert client.get(url, {"ties": "elo"}).status_code == 400
    page = client.get(reverse("dashboard-rankings", args=[dataset.pk]), {"ties": "davidson"}).content.decode()
    assert 'data-ties="davidson"' in page and "Tie parameter ν" in page
    page = client.get(reverse("dashboard-rankings", args=[dataset.pk])).content.decode()
    assert 'data-ties="half"' in page and "2 ties counted as half a win to each side" in page
    csv = client.get(reverse("dashboard-rankings-table", args=[dataset.pk, "ranking-humans", "csv"]), {"ties": "drop"})
    assert "tie convention" in csv.content.decode() and ",drop" in csv.content.decode()

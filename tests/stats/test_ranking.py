"""Rankings against BradleyTerry2's published fits.

Reference: Turner and Firth, "Bradley-Terry Models in R: The BradleyTerry2 Package", the package vignette
(BradleyTerry2 1.1-2, inst/doc/BradleyTerry.html in github.com/cran/BradleyTerry2). The inputs are the package's
``citations`` table (Stigler 1994) and ``baseball`` data frame (Agresti 2002, p. 438), copied below.
"""

from __future__ import annotations

import numpy as np
import pytest

from judging.statistics.pairwise import RankingError, comparisons_from, preference_comparisons
from judging.statistics.ranking import bradley_terry, mean_rating, prompt_weights, ranking_agreement, system_scores

# countsToBinomial(citations): journal1, journal2, win1, win2 (citations of journal1 by journal2 are its wins).
CITATIONS = [
    ("Biometrika", "Comm Statist", 730, 33),
    ("Biometrika", "JASA", 498, 320),
    ("Biometrika", "JRSS-B", 221, 284),
    ("Comm Statist", "JASA", 68, 813),
    ("Comm Statist", "JRSS-B", 17, 276),
    ("JASA", "JRSS-B", 142, 325),
]
# data(baseball): home.team, away.team, home.wins, away.wins.
BASEBALL = [
    ("Milwaukee", "Detroit", 4, 3), ("Milwaukee", "Toronto", 4, 2), ("Milwaukee", "New York", 4, 3),
    ("Milwaukee", "Boston", 6, 1), ("Milwaukee", "Cleveland", 4, 2), ("Milwaukee", "Baltimore", 6, 0),
    ("Detroit", "Milwaukee", 3, 3), ("Detroit", "Toronto", 4, 2), ("Detroit", "New York", 4, 3),
    ("Detroit", "Boston", 6, 0), ("Detroit", "Cleveland", 6, 1), ("Detroit", "Baltimore", 4, 3),
    ("Toronto", "Milwaukee", 2, 5), ("Toronto", "Detroit", 4, 3), ("Toronto", "New York", 2, 4),
    ("Toronto", "Boston", 4, 3), ("Toronto", "Cleveland", 4, 2), ("Toronto", "Baltimore", 6, 0),
    ("New York", "Milwaukee", 3, 3), ("New York", "Detroit", 5, 1), ("New York", "Toronto", 2, 5),
    ("New York", "Boston", 4, 3), ("New York", "Cleveland", 4, 2), ("New York", "Baltimore", 6, 1),
    ("Boston", "Milwaukee", 5, 1), ("Boston", "Detroit", 2, 5), ("Boston", "Toronto", 3, 3),
    ("Boston", "New York", 4, 2), ("Boston", "Cleveland", 5, 2), ("Boston", "Baltimore", 6, 0),
    ("Cleveland", "Milwaukee", 2, 5), ("Cleveland", "Detroit", 3, 3), ("Cleveland", "Toronto", 3, 4),
    ("Cleveland", "New York", 4, 3), ("Cleveland", "Boston", 4, 2), ("Cleveland", "Baltimore", 2, 4),
    ("Baltimore", "Milwaukee", 2, 5), ("Baltimore", "Detroit", 1, 5), ("Baltimore", "Toronto", 1, 6),
    ("Baltimore", "New York", 2, 4), ("Baltimore", "Boston", 1, 6), ("Baltimore", "Cleveland", 3, 4),
]  # fmt: skip


def _rows(table: list[tuple[str, str, int, int]]) -> list[tuple[int, str, str, float]]:
    """One comparison per win; each game is its own prompt."""
    rows: list[tuple[int, str, str, float]] = []
    for first, second, first_wins, second_wins in table:
        rows += [(len(rows) + k, first, second, 1.0) for k in range(first_wins)]
        rows += [(len(rows) + k, first, second, 0.0) for k in range(second_wins)]
    return rows


def _by_system(result: dict) -> dict[str, dict]:
    return {row["system"]: row for row in result["systems"]}


def test_citations_match_the_vignette() -> None:
    comparisons = comparisons_from(_rows(CITATIONS))
    # citeModel: journalComm Statist -2.9491, journalJASA -0.4796, journalJRSS-B 0.2690 (Biometrika = 0).
    fit = _by_system(bradley_terry(comparisons)[0])
    assert fit["Biometrika"]["strength"]["value"] == 0.0
    assert fit["Biometrika"]["se"] == {"value": None, "undefined": "reference"}
    assert round(fit["Comm Statist"]["strength"]["value"], 4) == -2.9491
    assert round(fit["JASA"]["strength"]["value"], 4) == -0.4796
    assert round(fit["JRSS-B"]["strength"]["value"], 4) == 0.2690
    assert [fit[name]["rank"] for name in ("JRSS-B", "Biometrika", "JASA", "Comm Statist")] == [1, 2, 3, 4]
    # update(citeModel, refcat = "JASA"): Biometrika 0.4796, Comm Statist -2.4695, JRSS-B 0.7485.
    again = _by_system(bradley_terry(comparisons, reference="JASA")[0])
    assert round(again["Biometrika"]["strength"]["value"], 4) == 0.4796
    assert round(again["Comm Statist"]["strength"]["value"], 4) == -2.4695
    assert round(again["JRSS-B"]["strength"]["value"], 4) == 0.7485
    assert again["JASA"]["strength"]["value"] == 0.0
    assert fit["JASA"]["wins"] == 320 + 813 + 142 and fit["JASA"]["losses"] == 498 + 68 + 325


def test_baseball_estimates_and_standard_errors_match_the_vignette() -> None:
    # summary(baseballModel1), reference Baltimore: Estimate, Std. Error.
    published = {
        "Boston": (1.1077, 0.3339),
        "Cleveland": (0.6839, 0.3319),
        "Detroit": (1.4364, 0.3396),
        "Milwaukee": (1.5814, 0.3433),
        "New York": (1.2476, 0.3359),
        "Toronto": (1.2945, 0.3367),
    }
    result = bradley_terry(comparisons_from(_rows(BASEBALL)))[0]
    assert result["reference"] == "Baltimore"
    assert result["n_comparisons"] == sum(a + b for _, _, a, b in BASEBALL)
    fit = _by_system(result)
    for team, (estimate, se) in published.items():
        assert round(fit[team]["strength"]["value"], 4) == estimate, team
        assert round(fit[team]["se"]["value"], 4) == se, team
        low, high = fit[team]["ci95"]["low"], fit[team]["ci95"]["high"]
        assert (low + high) / 2 == pytest.approx(fit[team]["strength"]["value"])
        assert (high - low) / 2 == pytest.approx(1.959964 * fit[team]["se"]["value"], rel=1e-6)
    assert [row["system"] for row in result["systems"]][:2] == ["Milwaukee", "Detroit"]


def test_ties_count_half_a_win_each() -> None:
    # Three ties and one win of a over b: the fit equals 2.5 wins against 1.5, log(2.5 / 1.5).
    rows = [(0, "a", "b", 0.5), (1, "b", "a", 0.5), (2, "a", "b", 0.5), (3, "a", "b", 1.0)]
    fit = _by_system(bradley_terry(comparisons_from(rows))[0])
    assert fit["b"]["strength"]["value"] == pytest.approx(np.log(1.5 / 2.5))
    assert (fit["a"]["wins"], fit["a"]["losses"], fit["a"]["ties"]) == (1, 0, 3)


def test_best_of_k_choice_is_a_win_over_each_other_candidate() -> None:
    rows = preference_comparisons([1, 1, 2], [["a", "b", "c"], ["a", "b"], ["a", "b", "c"]], ["b", None, "c"])
    assert rows == [(1, "b", "a", 1.0), (1, "b", "c", 1.0), (2, "c", "a", 1.0), (2, "c", "b", 1.0)]


def test_a_system_that_never_wins_or_never_loses_has_no_finite_strength() -> None:
    rows = [(0, "a", "b", 1.0), (1, "b", "a", 1.0), (2, "a", "c", 1.0), (3, "b", "c", 1.0), (4, "d", "a", 1.0)]
    result = bradley_terry(comparisons_from(rows))[0]
    fit = _by_system(result)
    assert fit["c"]["strength"] == {
        "value": None,
        "undefined": "never wins: its strength is not finite (minus infinity)",
    }
    assert fit["d"]["strength"]["undefined"] == "never loses: its strength is not finite (plus infinity)"
    assert fit["d"]["rank"] == 1 and fit["c"]["rank"] == 4
    assert result["reference"] == "a"
    assert fit["b"]["strength"]["value"] == pytest.approx(0.0)
    with pytest.raises(RankingError, match="reference system 'c' has no finite strength"):
        bradley_terry(comparisons_from(rows), reference="c")


def test_a_reference_that_does_not_exist_is_refused_by_name() -> None:
    with pytest.raises(RankingError, match=r"reference system 'zzz' does not exist; the systems are: Baltimore"):
        bradley_terry(comparisons_from(_rows(BASEBALL)), reference="zzz")
    with pytest.raises(RankingError, match="at least 100 resamples"):
        prompt_weights(10, 99, 0)


def test_rank_intervals_are_seeded_and_cover_the_point_rank() -> None:
    comparisons = comparisons_from(_rows(BASEBALL))
    first, boot = bradley_terry(comparisons, weights=prompt_weights(comparisons.n_prompts, 200, 7))
    second, _ = bradley_terry(comparisons, weights=prompt_weights(comparisons.n_prompts, 200, 7))
    assert first == second
    assert boot is not None and boot.shape == (200, 7)
    for row in first["systems"]:
        assert row["rank_ci95"]["best"] <= row["rank"] <= row["rank_ci95"]["worst"]
    # Milwaukee and Detroit are close (1.58 and 1.44, SE about 0.34): the bootstrap must not make either certain.
    fit = _by_system(first)
    assert fit["Milwaukee"]["rank_ci95"]["worst"] > 1
    assert fit["Baltimore"]["rank_ci95"] == {"best": 7, "worst": 7}


def test_mean_rating_ranking_and_agreement_with_a_second_source() -> None:
    rng = np.random.default_rng(5)
    prompts = np.repeat(np.arange(60), 4)
    systems = np.tile(["s1", "s2", "s3", "s4"], 60)
    quality = {"s1": 4.0, "s2": 3.0, "s3": 2.5, "s4": 1.0}
    human = np.array([quality[s] for s in systems]) + rng.normal(0, 0.8, prompts.size)
    judge = human + rng.normal(0, 0.5, prompts.size)
    index: dict[int, int] = {}
    human_scores = system_scores(human, list(prompts), list(systems), index)
    judge_scores = system_scores(judge, list(prompts), list(systems), index)
    weights = prompt_weights(len(index), 300, 0)
    human_rank, human_boot = mean_rating(human_scores, weights=weights)
    judge_rank, judge_boot = mean_rating(judge_scores, weights=weights)
    fit = _by_system(human_rank)
    for name in quality:
        assert fit[name]["strength"]["value"] == pytest.approx(human[systems == name].mean())
        assert fit[name]["n"] == 60
    assert [row["system"] for row in human_rank["systems"]] == ["s1", "s2", "s3", "s4"]
    agreement = ranking_agreement(
        human_rank, human_boot, human_scores.system_labels, judge_rank, judge_boot, judge_scores.system_labels
    )
    assert agreement["n_systems"] == 4
    from scipy import stats

    expected = stats.kendalltau(
        [fit[s]["strength"]["value"] for s in quality],
        [_by_system(judge_rank)[s]["strength"]["value"] for s in quality],
    ).statistic
    assert agreement["kendall_tau"]["value"] == pytest.approx(expected)
    assert agreement["ci95"]["low"] <= agreement["kendall_tau"]["value"] <= agreement["ci95"]["high"]
    small = ranking_agreement(human_rank, None, (), {"systems": human_rank["systems"][:2]}, None, ())
    assert small["kendall_tau"]["undefined"].startswith("only 2 systems are ranked by both")

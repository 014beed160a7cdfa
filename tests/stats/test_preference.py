"""Preference statistics: win rates and their prompt bootstrap by hand, alpha against the krippendorff library,
the pairwise judge against the human majority."""

from __future__ import annotations

from typing import Any

import krippendorff
import numpy as np
import pytest

from judging.statistics.preference import (
    judge_human_agreement,
    none_appropriate_share,
    pair_outcomes,
    preference_alpha,
    preference_data,
    preference_summary,
    win_rates,
)

# p1 shows a and b, p2 shows a, b and c, p3 shows b and c; the last entry chose nothing and is no preference.
PROMPTS = ["p1", "p1", "p2", "p2", "p3", "p3"]
CANDIDATES = [["a", "b"], ["a", "b"], ["a", "b", "c"], ["a", "b", "c"], ["b", "c"], ["b", "c"]]
CHOSEN = ["a", "a", "b", "c", "c", None]
NONE = [False, True, False, False, False, False]


def example():  # type: ignore[no-untyped-def]
    return preference_data(PROMPTS, CANDIDATES, CHOSEN, NONE)


def test_win_rates_and_none_appropriate_by_hand() -> None:
    data = example()
    assert data.n == 5 and data.n_skipped == 1
    rows = {row["system"]: row for row in win_rates(data, n_resamples=200)}
    # a: shown 4 times (p1 twice, p2 twice), chosen twice; b: shown 5 times, chosen once; c: shown 3, chosen twice.
    assert (rows["a"]["shown"], rows["a"]["chosen"]) == (4, 2)
    assert rows["a"]["win_rate"] == {"value": 0.5, "undefined": None}
    assert (rows["b"]["shown"], rows["b"]["chosen"]) == (5, 1)
    assert rows["b"]["win_rate"]["value"] == pytest.approx(0.2)
    assert (rows["c"]["shown"], rows["c"]["chosen"]) == (3, 2)
    assert rows["c"]["win_rate"]["value"] == pytest.approx(2 / 3)
    # One of a's two wins was "none appropriate"; b's and c's were not.
    assert rows["a"]["none_appropriate"]["value"] == 0.5
    assert rows["b"]["none_appropriate"]["value"] == 0.0
    assert none_appropriate_share(data) == {"value": pytest.approx(0.2), "undefined": None}


def test_win_rate_ci_is_the_percentile_interval_of_prompt_resamples() -> None:
    data = example()
    resamples, seed = 300, 7
    rows = {row["system"]: row for row in win_rates(data, n_resamples=resamples, seed=seed)}
    # The same prompt draws, materialised: each resample is a list of prompts, all their preferences come along.
    draws = np.random.default_rng(seed).integers(0, 3, size=(resamples, 3))
    prompts = ["p1", "p2", "p3"]  # codes in order of first appearance
    kept = [i for i, chosen in enumerate(CHOSEN) if chosen is not None]
    for system in ("a", "b", "c"):
        ratios = []
        for draw in draws:
            picked = [i for p in draw for i in kept if PROMPTS[i] == prompts[p]]
            shown = sum(1 for i in picked if system in CANDIDATES[i])
            if shown:
                ratios.append(sum(1 for i in picked if CHOSEN[i] == system) / shown)
        low, high = np.quantile(ratios, [0.025, 0.975])
        assert rows[system]["win_rate_ci95"]["low"] == pytest.approx(low)
        assert rows[system]["win_rate_ci95"]["high"] == pytest.approx(high)


def test_win_rate_ci_on_two_prompts_by_hand() -> None:
    # x loses on p1 and wins on p2: resamples give 0 (1 in 4), 0.5 (2 in 4) or 1 (1 in 4), so the 95% interval is
    # [0, 1]; y is always shown and never chosen on p2, chosen on p1.
    data = preference_data(["p1", "p2"], [["x", "y"], ["x", "y"]], ["y", "x"], [False, False])
    rows = {row["system"]: row for row in win_rates(data, n_resamples=1000, seed=0)}
    assert rows["x"]["win_rate"]["value"] == 0.5
    assert rows["x"]["win_rate_ci95"] == {"low": 0.0, "high": 1.0, "undefined": None}
    unanimous = preference_data(["p1", "p2"], [["x", "y"], ["x", "y"]], ["x", "x"], [False, False])
    rows = {row["system"]: row for row in win_rates(unanimous, n_resamples=100)}
    assert rows["x"]["win_rate_ci95"] == {"low": 1.0, "high": 1.0, "undefined": None}
    assert rows["y"]["win_rate"]["value"] == 0.0


def test_nominal_alpha_on_preferences_equals_the_krippendorff_library() -> None:
    rng = np.random.default_rng(3)
    systems = ["s1", "s2", "s3"]
    n_prompts, n_raters = 25, 4
    matrix = np.full((n_raters, n_prompts), np.nan)
    prompts, candidates, chosen = [], [], []
    for prompt in range(n_prompts):
        favourite = int(rng.integers(0, 3))
        for rater in range(n_raters):
            if rng.random() < 0.2:
                continue  # this rater did not get the task
            pick = favourite if rng.random() < 0.7 else int(rng.integers(0, 3))
            matrix[rater, prompt] = pick
            prompts.append(prompt)
            candidates.append(systems)
            chosen.append(systems[pick])
    data = preference_data(prompts, candidates, chosen, [False] * len(prompts))
    result = preference_alpha(data, n_resamples=200)
    expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal")
    assert result["alpha"]["value"] == pytest.approx(expected, abs=1e-9)
    assert result["alpha_ci95"]["low"] <= result["alpha"]["value"] <= result["alpha_ci95"]["high"]
    assert result["n_units"] == int(np.sum(np.sum(~np.isnan(matrix), axis=0) >= 2))


def test_alpha_units_are_a_prompt_and_its_candidates() -> None:
    # The same prompt asked with two different candidate sets is two questions: the two "a"s agree, the two "b"s
    # agree, and nothing pairs an "a" with a "b".
    data = preference_data(
        ["p", "p", "p", "p", "q", "q"],
        [["a", "c"], ["a", "c"], ["b", "c"], ["b", "c"], ["a", "b"], ["a", "b"]],
        ["a", "a", "b", "b", "a", "b"],
        [False] * 6,
    )
    matrix = np.array([[0, 1, 0], [0, 1, 1]], dtype=float)  # raters x (p/ac, p/bc, q)
    result = preference_alpha(data, n_resamples=50)
    assert result["n_units"] == 3
    assert result["alpha"]["value"] == pytest.approx(
        krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal")
    )


def test_pairwise_judge_against_the_human_majority() -> None:
    data = example()
    judge = pair_outcomes(
        [
            # p1, a vs b: both orders say a (score for a is 1), so a.
            ("p1", "a", "b", "overall", 0, 0, 1.0),
            ("p1", "a", "b", "overall", 0, 1, 1.0),
            # p2, c vs b, stored with c first: c wins in one order, loses in the other, so a tie.
            ("p2", "c", "b", "overall", 0, 0, 1.0),
            ("p2", "c", "b", "overall", 0, 1, 0.0),
            # p2, a vs c: c wins (score 0 for a) in both samples.
            ("p2", "a", "c", "overall", 0, 0, 0.0),
            ("p2", "a", "c", "overall", 1, 0, 0.0),
            # p3, b vs c: b, against the humans' c.
            ("p3", "b", "c", "overall", 0, 0, 1.0),
            # p9 was never shown to a human.
            ("p9", "a", "b", "overall", 0, 0, 1.0),
        ]
    )
    assert judge["overall"][("p2", "b", "c")] == 0.5
    result = judge_human_agreement(data, judge["overall"], n_resamples=100)
    # Humans: p1 a > b (2-0); p2 b vs c 1-1 (a tie), a vs c: c (1-0), a vs b: b (1-0); p3 c > b (1-0).
    # Shared pairs: p1 a/b (agree), p2 b/c (human tie), p2 a/c (agree), p3 b/c (disagree).
    assert result["n_pairs"] == 4
    assert result["human_ties"] == 1 and result["judge_ties"] == 0
    assert (result["n_decided"], result["n_agree"]) == (3, 2)
    assert result["agreement"]["value"] == pytest.approx(2 / 3)
    assert result["agreement_ci95"]["undefined"] is None


def test_undefined_with_reasons() -> None:
    empty = preference_data([], [], [], [])
    summary = preference_summary(empty, {"judge": {}}, n_resamples=10)
    assert summary["n_preferences"] == 0 and summary["systems"] == []
    assert summary["none_appropriate"]["undefined"] == "no preference given"
    assert summary["agreement"]["alpha"]["undefined"]
    assert summary["judges"] == {"judge": {}}
    no_overlap = judge_human_agreement(example(), {("p9", "a", "b"): 1.0}, n_resamples=10)
    assert no_overlap["agreement"]["undefined"].startswith("no prompt and pair of systems")
    assert no_overlap["agreement_ci95"]["undefined"]


def test_win_rates_from_counts_equal_the_per_preference_tables() -> None:
    """Win rates are counted from the codes; the same figures from dense (preferences x systems) tables of chosen
    and shown, summed per prompt column by column, as the definition reads."""
    from judging.statistics.correlation import resampled_prompt_weights
    from judging.statistics.preference import _by_prompt, _ratio_intervals, _share, win_rates

    rng = np.random.default_rng(3)
    systems = [f"s{k}" for k in range(12)]
    prompts, candidates, chosen, none = [], [], [], []
    for _ in range(3000):
        shown = [str(s) for s in rng.choice(systems, int(rng.integers(2, 5)), replace=False)]
        prompts.append(f"p{int(rng.integers(0, 200))}")
        candidates.append(shown)
        chosen.append(None if rng.random() < 0.1 else shown[int(rng.integers(0, len(shown)))])
        none.append(bool(rng.random() < 0.2))
    data = preference_data(prompts, candidates, chosen, none)

    table = np.zeros((data.n, len(data.system_labels)))
    table[np.arange(data.n), data.chosen] = 1.0
    shown_table = data.shown.astype(np.float64)
    n_prompts = len(data.prompt_keys)
    weights = resampled_prompt_weights(np.random.default_rng(0), 1000, n_prompts)
    intervals = _ratio_intervals(
        _by_prompt(table, data.prompt, n_prompts), _by_prompt(shown_table, data.prompt, n_prompts), weights, 0.95
    )
    expected: list[dict[str, Any]] = []
    for code, label in enumerate(data.system_labels):
        wins = table[:, code] > 0
        expected.append(
            {
                "system": label,
                "shown": int(data.shown[:, code].sum()),
                "chosen": int(wins.sum()),
                "win_rate": _share(float(wins.sum()), float(shown_table[:, code].sum()), "never shown"),
                "win_rate_ci95": intervals[code],
                "none_appropriate": _share(
                    float((wins & data.none_appropriate).sum()), float(wins.sum()), "never chosen"
                ),
            }
        )
    assert win_rates(data) == expected
    assert all(row["win_rate"]["value"] is not None for row in expected)

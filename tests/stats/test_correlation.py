"""Judge-versus-human statistics against scipy loops on materialised data."""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pytest
from scipy import stats

from judging.statistics import correlation
from judging.statistics.correlation import COEFFICIENTS, LEVELS, correlation_levels, paired_scores
from judging.statistics.human_ceiling import RaterScores, human_ceiling
from judging.statistics.judge_tables import (
    competition_ranks,
    confusion_matrix,
    length_bias,
    model_family,
    per_system_table,
    position_consistency,
    self_preference,
)

TOLERANCE = 1e-9


def scipy_coefficients(x: np.ndarray, y: np.ndarray) -> list[float] | None:
    if len(x) < 3 or len(set(x)) < 2 or len(set(y)) < 2:
        return None
    return [
        stats.pearsonr(x, y).statistic,
        stats.spearmanr(x, y).statistic,
        stats.kendalltau(x, y).statistic,
    ]


def naive_levels(human: np.ndarray, judge: np.ndarray, prompt: np.ndarray, system: np.ndarray) -> dict:
    """The four correlation levels written plainly with scipy, for comparison."""
    result: dict = {"response": scipy_coefficients(human, judge)}
    for level, key in (("per_prompt", prompt), ("per_system", system)):
        values = []
        skipped = 0
        for group in np.unique(key):
            members = key == group
            coefs = scipy_coefficients(human[members], judge[members])
            if coefs is None:
                skipped += 1
            else:
                values.append(coefs)
        result[level] = (np.mean(values, axis=0).tolist() if values else None, len(values), skipped)
    sums: dict = defaultdict(lambda: [0.0, 0.0, 0])
    for h, j, s in zip(human, judge, system, strict=True):
        sums[s][0] += h
        sums[s][1] += j
        sums[s][2] += 1
    means_h = np.array([round(v[0] / v[2], 11) for v in sums.values()])
    means_j = np.array([round(v[1] / v[2], 11) for v in sums.values()])
    result["system"] = scipy_coefficients(means_h, means_j)
    return result


def make_dataset(seed: int, prompts: int = 60, systems: int = 6, integer_judge: bool = True):
    rng = np.random.default_rng(seed)
    prompt = np.repeat(np.arange(prompts), systems)
    system = np.tile(np.arange(systems), prompts)
    quality = rng.normal(0, 1, prompts * systems) + 0.3 * system
    human = np.clip(np.round(quality[:, None] + 3 + rng.normal(0, 0.8, (prompts * systems, 3))), 1, 5).mean(axis=1)
    noisy = quality + 3 + rng.normal(0, 0.9, prompts * systems)
    judge = np.clip(np.round(noisy), 1, 5) if integer_judge else noisy
    drop = rng.random(prompts * systems) < 0.05
    human[drop] = np.nan
    return human, judge, prompt, system


@pytest.mark.parametrize(("seed", "integer_judge"), [(0, True), (1, False), (2, True)])
def test_point_estimates_match_scipy_at_all_levels(seed: int, integer_judge: bool) -> None:
    human, judge, prompt, system = make_dataset(seed, integer_judge=integer_judge)
    paired = paired_scores(human, judge, list(prompt), list(system))
    ours = correlation_levels(paired, n_resamples=50)
    keep = np.isfinite(human)
    expected = naive_levels(human[keep], judge[keep], prompt[keep], system[keep])
    for index, name in enumerate(COEFFICIENTS):
        assert ours["response"][name]["value"] == pytest.approx(expected["response"][index], abs=TOLERANCE)
        assert ours["system"][name]["value"] == pytest.approx(expected["system"][index], abs=TOLERANCE)
        for level in ("per_prompt", "per_system"):
            values, n_groups, skipped = expected[level]
            assert ours[level][name]["value"] == pytest.approx(values[index], abs=TOLERANCE)
            assert ours[level]["n_groups"] == n_groups
            assert ours[level]["groups_skipped"] == skipped
    assert ours["response"]["n"] == int(keep.sum())
    assert ours["system"]["n"] == 6
    json.dumps(ours, allow_nan=False)


def percentile(values: list[float]) -> tuple[float, float]:
    low, high = np.quantile(np.asarray(values), [0.025, 0.975])
    return float(low), float(high)


@pytest.mark.parametrize(("integer_judge", "table_cells"), [(True, 100_000), (False, 100_000), (False, 1)])
def test_bootstrap_cis_equal_scipy_on_materialised_prompt_resamples(
    integer_judge: bool, table_cells: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # table_cells=1 forces the per-answer fallback used when scores take too many distinct values.
    monkeypatch.setattr(correlation, "_MAX_CONTINGENCY_CELLS", table_cells)
    human, judge, prompt, system = make_dataset(4, prompts=25, systems=5, integer_judge=integer_judge)
    keep = np.isfinite(human)
    human, judge, prompt, system = human[keep], judge[keep], prompt[keep], system[keep]
    paired = paired_scores(human, judge, list(prompt), list(system))
    resamples = 40
    ours = correlation_levels(paired, n_resamples=resamples, seed=3)
    weights = correlation.resampled_prompt_weights(np.random.default_rng(3), resamples, 25)
    prompt_codes = paired.prompt
    collected: dict = {level: [[] for _ in COEFFICIENTS] for level in LEVELS}
    for row in range(resamples):
        counts = weights[row][prompt_codes].astype(int)
        h = np.repeat(paired.human, counts)
        j = np.repeat(paired.judge, counts)
        s = np.repeat(paired.system, counts)
        # Copies of a prompt are distinct prompts for per_prompt, but here per_prompt resamples the
        # already computed per-prompt coefficients, so materialise it as a weighted mean instead.
        naive = naive_levels(h, j, np.repeat(prompt_codes, counts), s)
        for index in range(3):
            for level in ("response", "system"):
                if naive[level] is not None:
                    collected[level][index].append(naive[level][index])
            per_system_values = []
            for group in np.unique(s):
                coefs = scipy_coefficients(h[s == group], j[s == group])
                if coefs is not None:
                    per_system_values.append(coefs[index])
            if per_system_values:
                collected["per_system"][index].append(np.mean(per_system_values))
    for level in ("response", "per_system", "system"):
        for index, name in enumerate(COEFFICIENTS):
            low, high = percentile(collected[level][index])
            assert ours[level]["ci95"][name]["low"] == pytest.approx(low, abs=TOLERANCE), (level, name)
            assert ours[level]["ci95"][name]["high"] == pytest.approx(high, abs=TOLERANCE), (level, name)


def test_per_prompt_ci_resamples_prompts_as_groups() -> None:
    human, judge, prompt, system = make_dataset(6, prompts=30, systems=6)
    paired = paired_scores(human, judge, list(prompt), list(system))
    ours = correlation_levels(paired, n_resamples=30, seed=1)
    weights = correlation.resampled_prompt_weights(np.random.default_rng(1), 30, 30)
    per_prompt = {}
    for group in np.unique(paired.prompt):
        coefs = scipy_coefficients(paired.human[paired.prompt == group], paired.judge[paired.prompt == group])
        if coefs is not None:
            per_prompt[group] = coefs
    samples = []
    for row in range(30):
        values = [per_prompt[g] for g in per_prompt for _ in range(int(weights[row][g]))]
        samples.append(np.mean(values, axis=0))
    for index, name in enumerate(COEFFICIENTS):
        low, high = percentile([s[index] for s in samples])
        assert ours["per_prompt"]["ci95"][name]["low"] == pytest.approx(low, abs=TOLERANCE)
        assert ours["per_prompt"]["ci95"][name]["high"] == pytest.approx(high, abs=TOLERANCE)


def test_undefined_levels_and_skipped_groups() -> None:
    # Prompt 0: constant human scores -> skipped; prompt 1: only two answers -> skipped.
    human = [3, 3, 3, 1, 2, 2, 4, 5]
    judge = [1, 2, 3, 1, 2, 1, 3, 5]
    prompt = [0, 0, 0, 1, 1, 2, 2, 2]
    system = ["a", "b", "c", "a", "b", "a", "b", "c"]
    ours = correlation_levels(paired_scores(human, judge, prompt, system), n_resamples=20)
    assert ours["per_prompt"]["n_groups"] == 1
    assert ours["per_prompt"]["groups_skipped"] == 2
    empty = correlation_levels(paired_scores([np.nan], [1.0], [0], ["a"]))
    assert empty["response"]["pearson"] == {
        "value": None,
        "undefined": "no answer has both a human and a judge score",
    }
    constant = correlation_levels(paired_scores([1, 2, 3, 4], [2, 2, 2, 2], [0, 1, 2, 3], ["a"] * 4), n_resamples=10)
    assert constant["response"]["spearman"] == {"value": None, "undefined": "constant input"}
    assert constant["response"]["ci95"]["kendall"]["undefined"] == "no bootstrap resample was defined"
    two = correlation_levels(paired_scores([1, 2], [1, 2], [0, 1], ["a", "b"]), n_resamples=10)
    assert two["response"]["kendall"]["undefined"] == "fewer than 3 pairs"
    json.dumps([ours, empty, constant, two], allow_nan=False)


def test_exactly_tied_means_stay_tied() -> None:
    # 0.1 + 0.2 + 0.3 and 0.3 + 0.2 + 0.1 differ in the last bit in floating point.
    assert (0.1 + 0.2 + 0.3) / 3 != (0.3 + 0.2 + 0.1) / 3
    human = [0.1, 0.2, 0.3, 0.3, 0.2, 0.1, 0.5, 0.5, 0.5]
    judge = [1, 2, 3, 3, 2, 1, 2, 2, 2]
    prompt = [0, 1, 2, 0, 1, 2, 0, 1, 2]
    system = ["x", "x", "x", "y", "y", "y", "z", "z", "z"]
    paired = paired_scores(human, judge, prompt, system)
    table = {row["system"]: row for row in per_system_table(paired)}
    assert table["x"]["human_rank"] == table["y"]["human_rank"] == 2
    assert table["x"]["judge_rank"] == table["y"]["judge_rank"] == table["z"]["judge_rank"] == 1
    assert table["z"]["human_rank"] == 1
    assert competition_ranks([2.0, 1.0, 2.0, 0.5]) == [1, 3, 1, 4]
    system_level = correlation_levels(paired, n_resamples=10)["system"]
    assert system_level["spearman"]["undefined"] == "constant input"


def test_human_ceiling_by_hand() -> None:
    rng = np.random.default_rng(12)
    answers = 90
    truth = rng.normal(3, 1, answers)
    ratings = np.clip(np.round(truth[:, None] + rng.normal(0, 0.7, (answers, 3))), 1, 5)
    ratings[rng.random((answers, 3)) < 0.1] = np.nan
    prompt = np.repeat(np.arange(30), 3)
    system = np.tile(["a", "b", "c"], 30)
    answer_idx, rater_idx = np.nonzero(~np.isnan(ratings))
    scores = RaterScores(answer_idx, rater_idx, ratings[answer_idx, rater_idx], ("r1", "r2", "r3"))
    ceiling = human_ceiling(scores, list(prompt), list(system))
    per_rater_pearson = []
    for rater in range(3):
        own, peers = [], []
        for answer in range(answers):
            value = ratings[answer, rater]
            rest = [v for i, v in enumerate(ratings[answer]) if i != rater and not np.isnan(v)]
            if np.isnan(value) or not rest:
                continue
            own.append(value)
            peers.append(np.mean(rest))
        per_rater_pearson.append(stats.pearsonr(own, peers).statistic)
    assert ceiling["response"]["pearson"]["value"] == pytest.approx(np.mean(per_rater_pearson), abs=TOLERANCE)
    assert ceiling["n_raters"] == 3
    assert set(ceiling) == {"n_raters", *LEVELS}


def test_confusion_matrix_integer_scale_only() -> None:
    paired = paired_scores([1.0, 1.4, 2.5, 3.0, 2.0], [1, 2, 3, 3, 2], [0, 1, 2, 3, 4], ["a"] * 5)
    result = confusion_matrix(paired, 1, 3)
    assert result["labels"] == [1, 2, 3]
    assert result["matrix"] == [[1, 1, 0], [0, 1, 0], [0, 0, 2]]
    assert confusion_matrix(paired, 0, 0.5)["undefined"] == "not an integer scale"
    assert confusion_matrix(paired, 1, 2)["undefined"] == "judge scores lie outside the aspect's scale"


def test_bias_diagnostics() -> None:
    rng = np.random.default_rng(3)
    lengths = rng.integers(10, 500, 50)
    human = rng.normal(3, 1, 50)
    judge = lengths / 100 + rng.normal(0, 0.2, 50)
    bias = length_bias(lengths, human, judge)
    assert bias["judge"]["value"] == pytest.approx(stats.spearmanr(lengths, judge).statistic, abs=TOLERANCE)
    assert bias["human"]["value"] == pytest.approx(stats.spearmanr(lengths, human).statistic, abs=TOLERANCE)
    assert bias["difference"]["value"] == pytest.approx(bias["judge"]["value"] - bias["human"]["value"])
    assert position_consistency([True, False, True, True]) == {"rate": {"value": 0.75, "undefined": None}, "n": 4}
    assert position_consistency(None)["rate"]["undefined"] == "not a pairwise judge"
    assert model_family("openai/gpt-4o-mini") == model_family("gpt-35-turbo-1106") == "gpt"
    assert model_family("meta-llama/Llama-2-70b-chat-hf") == "llama"
    assert model_family(None) is None


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("anthropic/claude-3-5-sonnet-20240620", "claude"),
        ("bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0", "claude"),
        ("anthropic.claude-3-5-sonnet-20240620-v1:0", "claude"),
        ("vertex_ai/claude-3-5-sonnet@20240620", "claude"),
        ("openrouter/anthropic/claude-3.5-sonnet", "claude"),
        ("claude-3-haiku-20240307", "claude"),
        ("openai/gpt-4o-mini", "gpt"),
        ("azure/gpt-4o", "gpt"),
        ("gpt-35-turbo-1106", "gpt"),
        ("chatgpt-4o-latest", "gpt"),
        ("openrouter/openai/gpt-4o", "gpt"),
        ("o3-mini", "gpt"),
        ("openai/o1-preview", "gpt"),
        ("azure/o4-mini", "gpt"),
        ("o1", "gpt"),
        ("gemini/gemini-1.5-flash", "gemini"),
        ("vertex_ai/gemini-1.5-pro", "gemini"),
        ("openrouter/google/gemini-pro-1.5", "gemini"),
        ("meta-llama/Llama-2-70b-chat-hf", "llama"),
        ("bedrock/meta.llama3-70b-instruct-v1:0", "llama"),
        ("groq/llama3-70b-8192", "llama"),
        ("openrouter/meta-llama/llama-3-70b-instruct", "llama"),
        ("together_ai/Qwen/Qwen2-72B-Instruct", "qwen"),
        ("openrouter/qwen/qwq-32b", "qwen"),
        ("mistral/mistral-large-latest", "mistral"),
        ("bedrock/mistral.mixtral-8x7b-instruct-v0:1", "mistral"),
        ("mistral/open-mixtral-8x22b", "mistral"),
        ("mistral/codestral-latest", "mistral"),
        ("deepseek/deepseek-chat", "deepseek"),
        ("openrouter/deepseek/deepseek-r1", "deepseek"),
        ("rinna/japanese-gpt-neox", "japanese"),
        ("openchat-3.5", "openchat"),
    ],
)
def test_model_family_sees_through_provider_prefixes(model: str, family: str) -> None:
    assert model_family(model) == family


def test_self_preference_sign() -> None:
    rng = np.random.default_rng(4)
    system = np.repeat(["llm_a", "llm_b", "llm_c"], 40)
    human = rng.normal(3, 1, 120)
    judge = human + np.where(system == "llm_a", 1.0, 0.0) + rng.normal(0, 0.1, 120)
    paired = paired_scores(human, judge, list(range(120)), list(system))
    models = {"llm_a": "openai/gpt-4o", "llm_b": "llm-jp/llm-jp-13b", "llm_c": "tokyotech-llm/Swallow-7b"}
    result = self_preference(paired, "openai/gpt-4o-mini", models)
    assert result["family"] == "gpt"
    assert result["systems"] == ["llm_a"]
    assert result["value"]["value"] > 0.5
    unknown = self_preference(paired, None, models)
    assert unknown["value"]["undefined"] == "the judge's model is unknown"
    other = self_preference(paired, "anthropic/claude-3-haiku", models)
    assert other["value"]["undefined"] == "no system of the judge's family (claude)"

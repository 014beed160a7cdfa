"""The alternative-annotator test against its authors' published results.

Reference: Calderon, Reichart and Dror (2025), "The Alternative Annotator Test for LLM-as-a-Judge", ACL 2025; their
public repository github.com/nitaytech/AltTest. Its notebook ``alt_test_example.ipynb`` prints, for each dataset of
the paper and each LLM, the verdict, the winning rate and the advantage probability (two decimals) at the paper's ε
per dataset and q = 0.05. ``data/alt_test_mtbench.json`` and ``data/alt_test_lesion.json`` hold that repository's
``data/mtbench`` and ``data/lesion`` annotation files unchanged (humans and LLMs, keyed by annotator and instance).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from judging.statistics.alt_test import Labels, alt_test, by_adjusted

DATA = Path(__file__).parent / "data"

# alt_test_example.ipynb, cell "Example (paper's data)": (passed, winning rate, advantage probability).
MTBENCH_PUBLISHED = {
    "gemini_flash": (False, 0.00, 0.72),
    "gemini_pro": (False, 0.00, 0.76),
    "gpt-4o": (False, 0.00, 0.77),
    "llama-31": (False, 0.00, 0.69),
    "gpt-4o-mini": (False, 0.00, 0.74),
    "mistral-v03": (False, 0.00, 0.68),
}
LESION_PUBLISHED = {
    "gemini_flash": (False, 0.17, 0.71),
    "gemini_pro": (True, 1.00, 0.81),
    "gpt-4o": (False, 0.00, 0.62),
    "gpt-4o-mini": (True, 0.67, 0.73),
}


def _load(name: str, metric: str) -> tuple[Labels, dict[str, np.ndarray]]:
    raw = json.loads((DATA / f"alt_test_{name}.json").read_text())
    humans: dict[str, dict[str, Any]] = raw["humans"]
    llms: dict[str, dict[str, Any]] = raw["llms"]
    instances = sorted({i for labels in humans.values() for i in labels} | {i for p in llms.values() for i in p})
    index = {instance: row for row, instance in enumerate(instances)}
    codes: dict[str, float] = {}

    def encode(value: Any) -> float:
        if metric == "accuracy":
            return codes.setdefault(json.dumps(value), float(len(codes)))
        return float(value)

    answer, rater, value = [], [], []
    names = tuple(humans)
    for code, name in enumerate(names):
        for instance, label in humans[name].items():
            answer.append(index[instance])
            rater.append(code)
            value.append(encode(label))
    labels = Labels(np.array(answer), np.array(rater), np.array(value, dtype=float), names)
    judges = {}
    for llm, predictions in llms.items():
        scores = np.full(len(instances), np.nan)
        for instance, label in predictions.items():
            if label is not None:
                scores[index[instance]] = encode(label)
        judges[llm] = scores
    return labels, judges


@pytest.mark.parametrize(
    ("dataset", "metric", "epsilon", "published"),
    [("mtbench", "accuracy", 0.2, MTBENCH_PUBLISHED), ("lesion", "neg_rmse", 0.15, LESION_PUBLISHED)],
)
def test_reproduces_the_published_results(
    dataset: str, metric: str, epsilon: float, published: dict[str, tuple[bool, float, float]]
) -> None:
    labels, judges = _load(dataset, metric)
    assert set(judges) == set(published)
    for llm, (passed, winning_rate, advantage) in published.items():
        result = alt_test(labels, judges[llm], epsilon=epsilon, q=0.05, metric=metric)
        assert result["passed"]["value"] is passed, llm
        assert round(result["winning_rate"]["value"], 2) == winning_rate, llm
        assert round(result["advantage_probability"]["value"], 2) == advantage, llm
        assert result["raters_skipped"] == 0


def test_per_rater_p_value_is_scipys_one_sided_t_test() -> None:
    labels, judges = _load("lesion", "neg_rmse")
    result = alt_test(labels, judges["gpt-4o-mini"], epsilon=0.15, metric="neg_rmse")
    judge = judges["gpt-4o-mini"]
    for code, row in enumerate(result["raters"]):
        own, judged, rest = [], [], []
        for answer in np.unique(labels.answer):
            mine = labels.value[(labels.answer == answer) & (labels.rater == code)]
            others = labels.value[(labels.answer == answer) & (labels.rater != code)]
            if mine.size and others.size and np.isfinite(judge[answer]):
                own.append(-np.sqrt(np.mean((others - mine[0]) ** 2)))
                judged.append(-np.sqrt(np.mean((others - judge[answer]) ** 2)))
                rest.append(others)
        own_a, judged_a = np.array(own), np.array(judged)
        d = (own_a >= judged_a).astype(float) - (judged_a >= own_a).astype(float)
        expected = stats.ttest_1samp(d, 0.15, alternative="less").pvalue
        assert row["n"] == len(own)
        assert row["p_value"]["value"] == pytest.approx(expected, rel=1e-12)
        assert row["rho_judge"]["value"] == pytest.approx(np.mean(judged_a >= own_a))
        assert row["rho_human"]["value"] == pytest.approx(np.mean(own_a >= judged_a))


def test_benjamini_yekutieli_matches_statsmodels() -> None:
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(3)
    for p_values in (np.array([0.01, 0.02, 0.03, 0.04, 0.05]), np.array([0.001, 0.2, 0.01, 0.5]), rng.random(40) ** 3):
        rejected, expected, _, _ = multipletests(p_values, alpha=0.05, method="fdr_by")
        assert by_adjusted(p_values) == pytest.approx(expected, abs=1e-12)
        assert list(by_adjusted(p_values) <= 0.05) == list(rejected)
    # By hand for m = 4 (harmonic sum 25/12): sorted p 0.001, 0.01, 0.2, 0.5 scale to 0.00833, 0.04167, 0.5556, 1.0417.
    assert by_adjusted(np.array([0.001, 0.2, 0.01, 0.5])) == pytest.approx([1 / 120, 5 / 9, 1 / 24, 1.0])


def _campaign(judge_kind: str, seed: int) -> tuple[Labels, np.ndarray]:
    """200 answers on a 1-5 scale, 5 raters who each score every answer with rounding noise around a truth."""
    rng = np.random.default_rng(seed)
    items, raters = 200, 5
    truth = rng.uniform(1, 5, items)
    scores = np.clip(np.round(truth[:, None] + rng.normal(0, 0.6, (items, raters))), 1, 5)
    if judge_kind == "random":
        judge = rng.integers(1, 6, items).astype(float)
    else:
        # A judge answers on the aspect's scale: rater r0's score, off by one point on about 10% of the answers.
        judge = np.clip(np.round(scores[:, 0] + rng.normal(0, 0.3, items)), 1, 5)
    answer, rater = np.nonzero(np.ones((items, raters), dtype=bool))
    labels = Labels(answer, rater, scores[answer, rater], tuple(f"r{k}" for k in range(raters)))
    return labels, judge


def test_a_random_judge_fails_and_a_judge_copying_a_rater_passes() -> None:
    for seed in range(3):
        labels, random_judge = _campaign("random", seed)
        failed = alt_test(labels, random_judge, epsilon=0.1, metric="neg_rmse")
        assert failed["raters_tested"] == 5
        assert failed["passed"]["value"] is False
        assert failed["winning_rate"]["value"] == 0.0

        labels, copying_judge = _campaign("copy", seed)
        passed = alt_test(labels, copying_judge, epsilon=0.1, metric="neg_rmse")
        assert passed["raters_tested"] == 5
        assert passed["passed"]["value"] is True
        assert passed["winning_rate"]["value"] >= 0.6
        assert passed["advantage_probability"]["value"] > failed["advantage_probability"]["value"]


def test_raters_below_the_minimum_are_skipped_and_never_make_a_pass() -> None:
    labels, judge = _campaign("copy", 0)
    few = np.isin(labels.answer, np.arange(10))
    small = Labels(labels.answer[few], labels.rater[few], labels.value[few], labels.rater_labels)
    result = alt_test(small, judge, epsilon=0.1, metric="neg_rmse")
    assert result["passed"] == {"value": None, "undefined": result["winning_rate"]["undefined"]}
    assert "no rater has 30 answers" in result["winning_rate"]["undefined"]
    assert [row["skipped"] for row in result["raters"]] == [
        "only 10 answers scored by this rater, the judge and another rater; at least 30 are needed"
    ] * 5
    # Settable: with a minimum of 10 the same raters are tested.
    assert alt_test(small, judge, epsilon=0.1, metric="neg_rmse", min_instances=10)["raters_tested"] == 5
    # One rater below the minimum is named and left out of the winning rate.
    partial = labels.rater != 4
    partial |= np.isin(labels.answer, np.arange(20))
    mixed = Labels(labels.answer[partial], labels.rater[partial], labels.value[partial], labels.rater_labels)
    result = alt_test(mixed, judge, epsilon=0.1, metric="neg_rmse")
    assert result["raters_tested"] == 4
    assert result["raters"][4]["skipped"].startswith("only 20 answers")
    assert result["winning_rate"]["value"] == result["rejected"] / 4


def test_bad_parameters_are_refused_by_name() -> None:
    labels, judge = _campaign("copy", 0)
    with pytest.raises(ValueError, match="metric must be one of accuracy, neg_rmse"):
        alt_test(labels, judge, epsilon=0.1, metric="f1")
    with pytest.raises(ValueError, match="q must lie strictly between 0 and 1"):
        alt_test(labels, judge, epsilon=0.1, q=0)
    with pytest.raises(ValueError, match="epsilon must lie in"):
        alt_test(labels, judge, epsilon=-0.1)


def _per_answer_loop(labels: Labels, judge: np.ndarray, metric: str) -> dict[int, tuple[list[float], list[float]]]:
    """The test written answer by answer and rater by rater, as its definition reads: per rater, its own and the
    judge's alignment with the other raters of each usable answer, answers in the order they first appear."""
    by_answer: dict[int, list[tuple[int, float]]] = {}
    for answer, rater, value in zip(labels.answer.tolist(), labels.rater.tolist(), labels.value.tolist(), strict=True):
        by_answer.setdefault(answer, []).append((rater, value))

    def alignment(label: float, rest: np.ndarray) -> float:
        if metric == "accuracy":
            return float(np.mean(np.abs(rest - label) <= 1e-9))
        return -float(np.sqrt(np.mean((rest - label) ** 2)))

    scores: dict[int, tuple[list[float], list[float]]] = {}
    for code in range(len(labels.rater_labels)):
        human: list[float] = []
        judged: list[float] = []
        for answer, entries in by_answer.items():
            mine = [value for rater, value in entries if rater == code]
            rest = np.asarray([value for rater, value in entries if rater != code])
            if not np.isfinite(judge[answer]) or not mine or rest.size == 0:
                continue
            human.append(alignment(mine[0], rest))
            judged.append(alignment(float(judge[answer]), rest))
        scores[code] = (human, judged)
    return scores


@pytest.mark.parametrize("metric", ["neg_rmse", "accuracy"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_all_raters_left_out_at_once_equal_the_per_answer_loop(metric: str, seed: int) -> None:
    from judging.statistics.alt_test import _left_out_rows

    rng = np.random.default_rng(seed)
    n_answers, n_raters = 300, 15
    answers, raters, values = [], [], []
    for answer in rng.permutation(n_answers).tolist():
        # 1 to 12 labels per answer, some raters labelling an answer twice, continuous and whole-number values.
        for rater in rng.integers(0, n_raters, rng.integers(1, 13)).tolist():
            answers.append(answer)
            raters.append(rater)
            values.append(float(rng.integers(1, 6)) if metric == "accuracy" else float(rng.normal(3, 1)))
    order = rng.permutation(len(answers))
    labels = Labels(
        answer=np.asarray(answers, dtype=np.int64)[order],
        rater=np.asarray(raters, dtype=np.int64)[order],
        value=np.asarray(values)[order],
        rater_labels=tuple(f"r{k}" for k in range(n_raters)),
    )
    judge = rng.normal(3, 1, n_answers) if metric == "neg_rmse" else rng.integers(1, 6, n_answers).astype(float)
    judge[rng.random(n_answers) < 0.1] = np.nan

    left_out = _left_out_rows(labels, judge, metric)
    expected = _per_answer_loop(labels, judge, metric)
    assert sum(len(human) for human, _ in expected.values()) == left_out.rater.size > 1000
    for code, (human, judged) in expected.items():
        mine = left_out.rater == code
        assert left_out.human[mine].tolist() == human
        assert left_out.judge[mine].tolist() == judged

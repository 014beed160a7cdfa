"""Rater models: Dawid–Skene and MACE against crowd-kit 1.4.2, and all three recovering simulated raters."""

import warnings

import numpy as np
import pytest
from scipy.stats import spearmanr

from judging.statistics.rater_models import dawid_skene, fit_rater_model, mace, severity


def _categorical(seed, n_items, accuracies, n_classes=3, coverage=1.0, sorted_first=False):
    """Ratings of ``n_items`` items by raters of the given accuracies: right with that probability, else a label
    drawn uniformly from all classes (the true one included), each item rated by each rater with probability
    ``coverage``. With ``sorted_first`` the first rater's first three ratings are l0, l1, l2, so raters and labels
    first appear in sorted order."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, n_classes, n_items)
    if sorted_first:
        truth[:n_classes] = np.arange(n_classes)
    rows = []
    for j, accuracy in enumerate(accuracies):
        for i in range(n_items):
            if sorted_first and j == 0 and i < n_classes:
                rows.append((f"t{i:03d}", f"w{j}", f"l{truth[i]}"))
                continue
            if rng.random() < coverage:
                label = truth[i] if rng.random() < accuracy else rng.integers(0, n_classes)
                rows.append((f"t{i:03d}", f"w{j}", f"l{int(label)}"))
    return rows, truth


def _posteriors(result):
    return {row["item"]: row["posterior"] for row in result["items"]}


def test_dawid_skene_matches_crowd_kit():
    """crowd-kit 1.4.2 ``DawidSkene(n_iter=1000, tol=1e-12)`` on the same 120 items × 6 raters (70% of the pairs
    rated): both run to the fixed point from the same start (vote shares), so the posteriors agree to 1e-6 and each
    rater's accuracy Σ_t p_t π[t | t] from crowd-kit's ``priors_`` and ``errors_`` to 1e-6."""
    import pandas as pd
    from crowdkit.aggregation import DawidSkene

    rows, _ = _categorical(11, 120, [0.9, 0.8, 0.7, 0.6, 0.5, 0.4], coverage=0.7, sorted_first=True)
    frame = pd.DataFrame(rows, columns=["task", "worker", "label"])
    with warnings.catch_warnings():
        # crowd-kit's pandas calls raise pandas 3's deprecation warnings, one per round; they say nothing of the result.
        warnings.simplefilter("ignore")
        reference = DawidSkene(n_iter=1000, tol=1e-12).fit(frame)
    result = dawid_skene(rows, max_iter=1000, tol=1e-12)
    assert result["converged"]
    posteriors = _posteriors(result)
    for task, row in reference.probas_.iterrows():
        for label, value in row.items():
            assert posteriors[task][label] == pytest.approx(value, abs=1e-6)
    for rater in result["raters"]:
        errors = reference.errors_.loc[rater["rater"]]
        accuracy = sum(reference.priors_[label] * errors.loc[label, label] for label in reference.priors_.index)
        assert rater["reliability"]["value"] == pytest.approx(accuracy, abs=1e-6)
    assert {row["item"]: row["label"] for row in result["items"]} == reference.labels_.to_dict()


def test_mace_em_matches_crowd_kit():
    """crowd-kit 1.4.2 ``MACE(method="em", n_restarts=1, n_iter=500, random_state=0)``: the EM variant with the same
    smoothing 0.01 / K. Its start is random and ours deterministic, but both reach the same fixed point on these data:
    competences (crowd-kit's ``spamming_[:, 1]``) agree to 1e-5 and posteriors to 1e-6. The data are built so that
    raters and labels first appear in sorted order, because crowd-kit indexes its parameters by order of first
    appearance and groups its expected counts in sorted order; with other orders the two would not line up."""
    import pandas as pd
    from crowdkit.aggregation import MACE

    rows, _ = _categorical(11, 120, [0.9, 0.8, 0.7, 0.6, 0.5, 0.4], coverage=0.7, sorted_first=True)
    frame = pd.DataFrame(rows, columns=["task", "worker", "label"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # crowd-kit's pandas deprecation warnings, as above
        reference = MACE(method="em", n_restarts=1, n_iter=500, random_state=0).fit(frame)
    result = mace(rows, max_iter=2000, tol=1e-12)
    workers = pd.factorize(frame["worker"])[1].tolist()
    for rater in result["raters"]:
        competence = reference.spamming_[workers.index(rater["rater"]), 1]
        assert rater["reliability"]["value"] == pytest.approx(competence, abs=1e-5)
    posteriors = _posteriors(result)
    for task, row in reference.probas_.iterrows():
        for label, value in row.items():
            assert posteriors[task][label] == pytest.approx(value, abs=1e-6)


RATERS = 10
ITEMS = 500


def test_simulated_dawid_skene_and_mace_recover_rater_accuracy():
    """10 raters of accuracy 0.35–0.95 (shuffled), 500 items of 3 classes, each item rated by each rater with
    probability 0.6; a wrong rating is uniform over the other classes. Reliability should rank the raters as their
    true accuracy does."""
    rng = np.random.default_rng(3)
    accuracy = np.linspace(0.35, 0.95, RATERS)
    rng.shuffle(accuracy)
    truth = rng.integers(0, 3, ITEMS)
    rated = rng.random((ITEMS, RATERS)) < 0.6
    right = rng.random((ITEMS, RATERS)) < accuracy[None, :]
    wrong = (truth[:, None] + rng.integers(1, 3, (ITEMS, RATERS))) % 3
    labels = np.where(right, truth[:, None], wrong)
    rows = [(i, f"r{j}", int(labels[i, j])) for i in range(ITEMS) for j in range(RATERS) if rated[i, j]]
    for model in (dawid_skene, mace):
        result = model(rows)
        estimated = {row["rater"]: row["reliability"]["value"] for row in result["raters"]}
        rho = spearmanr([estimated[f"r{j}"] for j in range(RATERS)], accuracy)[0]
        correct = np.mean([row["label"] == truth[row["item"]] for row in result["items"]])
        message = f"{result['model']}: Spearman {rho:.3f} with the true accuracies; {correct:.3f} of labels right"
        print(message)
        assert rho >= 0.9, message
        assert correct > 0.9, message


def test_simulated_severity_recovers_error_and_bias():
    """x = μ_i + b_j + N(0, σ_j²) with μ ~ N(3, 1), b ~ N(0, 0.5²) and σ from 0.2 to 1.5 (shuffled), each item rated
    by each rater with probability 0.6."""
    rng = np.random.default_rng(4)
    sd = np.linspace(0.2, 1.5, RATERS)
    rng.shuffle(sd)
    bias = rng.normal(0.0, 0.5, RATERS)
    mu = rng.normal(3.0, 1.0, ITEMS)
    scores = mu[:, None] + bias[None, :] + rng.normal(0.0, 1.0, (ITEMS, RATERS)) * sd[None, :]
    rated = rng.random((ITEMS, RATERS)) < 0.6
    rows = [(i, f"r{j}", float(scores[i, j])) for i in range(ITEMS) for j in range(RATERS) if rated[i, j]]
    result = severity(rows)
    assert result["converged"]
    by_name = {row["rater"]: row for row in result["raters"]}
    reliability = [by_name[f"r{j}"]["reliability"]["value"] for j in range(RATERS)]
    error_sd = np.array([by_name[f"r{j}"]["error_sd"]["value"] for j in range(RATERS)])
    severity_hat = np.array([by_name[f"r{j}"]["severity"]["value"] for j in range(RATERS)])
    rho = spearmanr(reliability, -sd)[0]
    message = (
        f"severity: Spearman {rho:.3f} of reliability with -σ; largest |σ̂ − σ| {np.abs(error_sd - sd).max():.3f}, "
        f"largest |b̂ − b| {np.abs(severity_hat - (bias - bias.mean())).max():.3f}"
    )
    print(message)
    assert rho >= 0.9, message
    assert np.abs(error_sd - sd).max() < 0.15, message
    assert np.abs(severity_hat - (bias - bias.mean())).max() < 0.15, message
    scores_hat = np.array([row["score"]["value"] for row in sorted(result["items"], key=lambda r: r["item"])])
    assert np.corrcoef(scores_hat, mu)[0, 1] > 0.95


def test_too_little_data_is_undefined_with_the_reason():
    assert dawid_skene([])["undefined"] == "no ratings"
    assert "two raters" in mace([(1, "a", "x"), (2, "a", "y")])["undefined"]
    assert "same label" in dawid_skene([(1, "a", "x"), (1, "b", "x")])["undefined"]
    assert "same value" in severity([(1, "a", 3), (1, "b", 3)])["undefined"]
    assert "two ratings" in severity([(1, "a", 3), (2, "b", 4)])["undefined"]


def test_bad_input_names_the_problem():
    with pytest.raises(ValueError, match="twice"):
        dawid_skene([(1, "a", "x"), (1, "a", "y"), (1, "b", "x")])
    with pytest.raises(ValueError, match="finite"):
        severity([(1, "a", float("nan")), (1, "b", 2.0)])
    with pytest.raises(ValueError, match="model"):
        fit_rater_model("glad", [])

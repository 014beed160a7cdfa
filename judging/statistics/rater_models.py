"""Rater models: each item's label (or score) and each rater's reliability, estimated together.

Input is one (item, rater, value) triple per rating; not every rater needs to rate every item.

- **Dawid–Skene** (Dawid and Skene 1979), categorical labels. Each item has one true class t with prior p_t; rater j
  reports class a with probability π_j[a | t] (a full confusion matrix per rater), independently of the other raters
  given t. Estimated by EM from the vote shares as the first posterior: the M-step sets p to the mean posterior and
  π_j[a | t] to the posterior mass of t on the items j labelled a, floored at 1e-10 and normalised over a; the E-step
  gives each item's posterior ∝ p_t Π_j π_j[a_j | t]. It stops when the log-likelihood rises by less than ``tol`` per
  rating. A rater's reliability is the model's accuracy Σ_t p_t π_j[t | t].
- **MACE** (Hovy, Berg-Kirkpatrick, Vaswani and Hovy, NAACL 2013), the EM variant (not the paper's variational Bayes
  one): rater j knows the true label with probability θ_j and then reports it, otherwise "spams" a label drawn from
  its own distribution ξ_j, so P(a | t) = θ_j 1[a = t] + (1 − θ_j) ξ_j(a); the true labels are uniform a priori. The
  M-step adds 0.01 / K to the expected counts before normalising (as crowd-kit's EM does). One deterministic start
  (θ = 1/2, ξ uniform) replaces the paper's random restarts. A rater's reliability is its competence θ_j.
- **Severity** (ordinal or interval scores): x_ij = μ_i + b_j + e_ij with e_ij ~ N(0, σ_j²): an additive rater
  severity b_j (Σ_j b_j = 0) and a rater-specific error variance, the linear counterpart of a many-facet Rasch model
  (it treats the scale's steps as equally spaced). Estimated by alternating weighted least squares: μ_i is the
  1/σ²-weighted mean of x_ij − b_j, b_j the mean of x_ij − μ_i over j's items (then centred). σ_j² is estimated
  against the other raters only, mean (x_ij − b_j − μ_i^(−j))² − mean 1/Σ_(k≠j) σ_k^(−2), floored at 1% of the
  scores' variance, because against a μ that includes j's own rating a rater who rates everything could fit its own
  scores exactly (the likelihood has no maximum there). Reliability is the rater's share of true-score variance,
  var(μ) / (var(μ) + σ_j²). Items rated by one rater get a score but tell nothing about σ.

All three assume raters err independently given the item's true label; raters who copy each other, or items that all
raters find ambiguous in the same way, break it, and the model then trusts a shared error. Too little data (no
ratings, fewer than two raters or, for the categorical models, one class) makes the result undefined with the reason.

Pure: numpy is imported by the functions that use it.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

from judging.statistics.results import Stat, defined, undefined

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

MODELS = ("dawid-skene", "mace", "severity")
PROBABILITY_FLOOR = 1e-10
MACE_SMOOTHING = 0.01
SEVERITY_VARIANCE_FLOOR = 0.01


class ItemEstimate(TypedDict):
    item: Hashable
    label: Any
    posterior: dict[Any, float]
    score: Stat


class RaterEstimate(TypedDict):
    rater: Hashable
    n: int
    reliability: Stat
    severity: Stat
    error_sd: Stat


class RaterModelResult(TypedDict):
    model: str
    labels: list[Any]
    items: list[ItemEstimate]
    raters: list[RaterEstimate]
    iterations: int
    converged: bool
    log_likelihood: Stat
    undefined: str | None


class _Coded:
    def __init__(self, ratings: Sequence[tuple[Hashable, Hashable, Any]], *, numeric: bool) -> None:
        import numpy as np  # noqa: PLC0415 - numpy is heavy; only the statistics that need it load it

        items: dict[Hashable, int] = {}
        raters: dict[Hashable, int] = {}
        labels: dict[Any, int] = {}
        ti, rj, lk, values = [], [], [], []
        for position, triple in enumerate(ratings):
            if len(triple) != 3:
                raise ValueError(f"rating {position} must be an (item, rater, value) triple")
            item, rater, value = triple
            if value is None:
                raise ValueError(f"rating {position} has no value")
            if numeric:
                number = float(value)
                if not math.isfinite(number):
                    raise ValueError(f"rating {position} must be a finite number")
                values.append(number)
            else:
                lk.append(labels.setdefault(value, len(labels)))
            ti.append(items.setdefault(item, len(items)))
            rj.append(raters.setdefault(rater, len(raters)))
        self.items, self.raters = list(items), list(raters)
        self.labels = sorted(labels, key=_sort_key)
        order = {label: position for position, label in enumerate(self.labels)}
        remap = [order[label] for label in labels]
        self.item = np.asarray(ti, dtype=np.int64)
        self.rater = np.asarray(rj, dtype=np.int64)
        self.label = np.asarray([remap[k] for k in lk], dtype=np.int64)
        self.value = np.asarray(values, dtype=np.float64)
        pairs = set(zip(ti, rj, strict=True))
        if len(pairs) != len(ti):
            raise ValueError("a rater rated one item twice; keep one rating per item and rater")


def _sort_key(label: Any) -> tuple[int, Any]:
    return (0, label) if isinstance(label, (int, float)) else (1, str(label))


def _empty(model: str, coded: _Coded, reason: str) -> RaterModelResult:
    return {
        "model": model,
        "labels": list(coded.labels),
        "items": [],
        "raters": [],
        "iterations": 0,
        "converged": False,
        "log_likelihood": undefined(reason),
        "undefined": reason,
    }


def _too_little(coded: _Coded, *, categorical: bool) -> str | None:
    if coded.item.size == 0:
        return "no ratings"
    if len(coded.raters) < 2:
        return "one rater: a rater model needs at least two raters to compare"
    if categorical and len(coded.labels) < 2:
        return "every rating has the same label: there is nothing to tell raters apart"
    return None


def _log_posterior(
    coded: _Coded, log_prior: npt.NDArray[np.float64], log_p: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.float64], float]:
    """Normalised item posteriors and the log-likelihood from log P(rating r | true class k) (ratings × classes)."""
    import numpy as np  # noqa: PLC0415 - numpy is heavy; only the statistics that need it load it

    n_items, n_classes = len(coded.items), len(coded.labels)
    joint = np.tile(log_prior, (n_items, 1))
    for k in range(n_classes):
        joint[:, k] += np.bincount(coded.item, weights=log_p[:, k], minlength=n_items)
    top = joint.max(axis=1, keepdims=True)
    scaled = np.exp(joint - top)
    total = scaled.sum(axis=1, keepdims=True)
    return scaled / total, float((np.log(total) + top).sum())


def _item_rows(coded: _Coded, posterior: npt.NDArray[np.float64]) -> list[ItemEstimate]:
    rows: list[ItemEstimate] = []
    for i, item in enumerate(coded.items):
        best = int(posterior[i].argmax())
        rows.append(
            {
                "item": item,
                "label": coded.labels[best],
                "posterior": {label: float(posterior[i, k]) for k, label in enumerate(coded.labels)},
                "score": undefined("a categorical model gives a label, not a score"),
            }
        )
    return rows


def dawid_skene(
    ratings: Sequence[tuple[Hashable, Hashable, Any]], *, max_iter: int = 100, tol: float = 1e-5
) -> RaterModelResult:
    """Dawid–Skene by EM: each item's posterior class and each rater's accuracy under its confusion matrix."""
    import numpy as np  # noqa: PLC0415 - numpy is heavy; only the statistics that need it load it

    coded = _Coded(ratings, numeric=False)
    reason = _too_little(coded, categorical=True)
    if reason is not None:
        return _empty("dawid-skene", coded, reason)
    n_items, n_raters, n_classes = len(coded.items), len(coded.raters), len(coded.labels)
    votes = np.zeros((n_items, n_classes))
    np.add.at(votes, (coded.item, coded.label), 1.0)
    posterior = votes / votes.sum(axis=1, keepdims=True)
    previous = -math.inf
    converged = False
    iterations = 0
    log_likelihood = -math.inf
    confusion = np.zeros((n_raters, n_classes, n_classes))
    prior = posterior.mean(axis=0)
    for iterations in range(1, max_iter + 1):  # noqa: B007 - the count is reported
        prior = posterior.mean(axis=0)
        confusion = np.zeros((n_raters, n_classes, n_classes))
        np.add.at(confusion, (coded.rater, coded.label), posterior[coded.item])
        confusion = np.maximum(confusion, PROBABILITY_FLOOR)
        confusion /= confusion.sum(axis=1, keepdims=True)
        log_p = np.log(confusion[coded.rater, coded.label])
        posterior, log_likelihood = _log_posterior(coded, np.log(np.maximum(prior, PROBABILITY_FLOOR)), log_p)
        if (log_likelihood - previous) / coded.item.size < tol:
            converged = True
            break
        previous = log_likelihood
    accuracy = np.einsum("k,jkk->j", prior, confusion)
    return _categorical_fit(
        coded, "dawid-skene", accuracy, posterior, iterations, converged, log_likelihood, "a confusion matrix"
    )


def mace(
    ratings: Sequence[tuple[Hashable, Hashable, Any]], *, max_iter: int = 200, tol: float = 1e-7
) -> RaterModelResult:
    """MACE by EM: each item's posterior label and each rater's competence θ_j."""
    import numpy as np  # noqa: PLC0415 - numpy is heavy; only the statistics that need it load it

    coded = _Coded(ratings, numeric=False)
    reason = _too_little(coded, categorical=True)
    if reason is not None:
        return _empty("mace", coded, reason)
    n_raters, n_classes = len(coded.raters), len(coded.labels)
    smoothing = MACE_SMOOTHING / n_classes
    competence = np.full(n_raters, 0.5)
    spam = np.full((n_raters, n_classes), 1.0 / n_classes)
    own = coded.label[:, None] == np.arange(n_classes)[None, :]
    uniform = np.full(n_classes, -math.log(n_classes))
    previous = -math.inf
    converged = False
    iterations = 0
    log_likelihood = -math.inf
    posterior = np.zeros((len(coded.items), n_classes))
    for iterations in range(1, max_iter + 1):  # noqa: B007 - the count is reported
        theta = competence[coded.rater]
        spam_own = (1.0 - theta) * spam[coded.rater, coded.label]
        likelihood = theta[:, None] * own + spam_own[:, None]
        posterior, log_likelihood = _log_posterior(coded, uniform, np.log(likelihood))
        if (log_likelihood - previous) / coded.item.size < tol:
            converged = True
            break
        previous = log_likelihood
        # P(rater knew | rating, true class t) is θ / (θ + (1 − θ) ξ(a)) when a = t and 0 otherwise.
        on_label = posterior[coded.item, coded.label]
        knowing = on_label * theta / (theta + spam_own)
        spamming = 1.0 - knowing
        knew = np.bincount(coded.rater, weights=knowing, minlength=n_raters)
        spammed = np.bincount(coded.rater, weights=spamming, minlength=n_raters)
        competence = (knew + smoothing) / (knew + spammed + 2.0 * smoothing)
        spam_counts = np.zeros((n_raters, n_classes))
        np.add.at(spam_counts, (coded.rater, coded.label), spamming)
        spam = (spam_counts + smoothing) / (spam_counts + smoothing).sum(axis=1, keepdims=True)
    return _categorical_fit(coded, "mace", competence, posterior, iterations, converged, log_likelihood, "a competence")


def severity(
    ratings: Sequence[tuple[Hashable, Hashable, float]], *, max_iter: int = 200, tol: float = 1e-8
) -> RaterModelResult:
    """The additive rater-severity model: each item's adjusted score μ_i and each rater's severity b_j, error standard
    deviation σ_j and reliability."""
    import numpy as np  # noqa: PLC0415 - numpy is heavy; only the statistics that need it load it

    coded = _Coded(ratings, numeric=True)
    reason = _too_little(coded, categorical=False)
    if reason is not None:
        return _empty("severity", coded, reason)
    n_items, n_raters = len(coded.items), len(coded.raters)
    x = coded.value
    spread = float(np.var(x))
    if spread == 0.0:
        return _empty("severity", coded, "every rating has the same value: there is nothing to tell raters apart")
    per_item = np.bincount(coded.item, minlength=n_items)
    if not np.any(per_item >= 2):
        return _empty("severity", coded, "no item has two ratings, so raters cannot be compared")
    floor = SEVERITY_VARIANCE_FLOOR * spread
    bias = np.zeros(n_raters)
    variance = np.full(n_raters, spread)
    mu = np.zeros(n_items)
    converged = False
    iterations = 0
    for iterations in range(1, max_iter + 1):  # noqa: B007 - the count is reported
        weight = 1.0 / variance[coded.rater]
        total_weight = np.bincount(coded.item, weights=weight, minlength=n_items)
        mu = np.bincount(coded.item, weights=weight * (x - bias[coded.rater]), minlength=n_items) / total_weight
        new_bias = np.bincount(coded.rater, weights=x - mu[coded.item], minlength=n_raters) / np.bincount(
            coded.rater, minlength=n_raters
        )
        new_bias -= new_bias.mean()
        # Leave-one-rater-out: the other raters' weighted mean of the item, and that mean's own variance.
        other_weight = total_weight[coded.item] - weight
        shared = other_weight > 0
        other_sum = np.bincount(coded.item, weights=weight * (x - new_bias[coded.rater]), minlength=n_items)
        other_mu = (other_sum[coded.item] - weight * (x - new_bias[coded.rater]))[shared] / other_weight[shared]
        residual = (x[shared] - new_bias[coded.rater[shared]] - other_mu) ** 2 - 1.0 / other_weight[shared]
        shared_count = np.bincount(coded.rater[shared], minlength=n_raters)
        raw = np.bincount(coded.rater[shared], weights=residual, minlength=n_raters)
        new_variance = np.where(shared_count > 0, raw / np.maximum(shared_count, 1), spread)
        new_variance = np.maximum(new_variance, floor)
        change = max(float(np.abs(new_bias - bias).max()), float(np.abs(new_variance - variance).max()))
        bias, variance = new_bias, new_variance
        if change < tol:
            converged = True
            break
    weight = 1.0 / variance[coded.rater]
    total_weight = np.bincount(coded.item, weights=weight, minlength=n_items)
    mu = np.bincount(coded.item, weights=weight * (x - bias[coded.rater]), minlength=n_items) / total_weight
    raters = _severity_raters(coded, mu, bias, variance, weight, total_weight)
    items: list[ItemEstimate] = [
        {"item": item, "label": None, "posterior": {}, "score": defined(float(mu[i]))}
        for i, item in enumerate(coded.items)
    ]
    residual_all = x - mu[coded.item] - bias[coded.rater]
    log_likelihood = float(
        -0.5 * np.sum(np.log(2.0 * math.pi * variance[coded.rater]) + residual_all**2 / variance[coded.rater])
    )
    return {
        "model": "severity",
        "labels": [],
        "items": items,
        "raters": raters,
        "iterations": iterations,
        "converged": converged,
        "log_likelihood": defined(log_likelihood),
        "undefined": None,
    }


def _severity_raters(
    coded: _Coded,
    mu: npt.NDArray[np.float64],
    bias: npt.NDArray[np.float64],
    variance: npt.NDArray[np.float64],
    weight: npt.NDArray[np.float64],
    total_weight: npt.NDArray[Any],
) -> list[RaterEstimate]:
    import numpy as np  # noqa: PLC0415 - numpy is heavy; only the statistics that need it load it

    n_raters = len(coded.raters)
    true_variance = float(np.var(mu))
    counts = np.bincount(coded.rater, minlength=n_raters)
    shared_count = np.bincount(coded.rater[(total_weight[coded.item] - weight) > 0], minlength=n_raters)
    raters: list[RaterEstimate] = []
    for j, rater in enumerate(coded.raters):
        if shared_count[j] == 0:
            reason_j = "the rater shares no item with another rater"
            raters.append(
                {
                    "rater": rater,
                    "n": int(counts[j]),
                    "reliability": undefined(reason_j),
                    "severity": defined(float(bias[j])),
                    "error_sd": undefined(reason_j),
                }
            )
            continue
        raters.append(
            {
                "rater": rater,
                "n": int(counts[j]),
                "reliability": defined(true_variance / (true_variance + float(variance[j]))),
                "severity": defined(float(bias[j])),
                "error_sd": defined(math.sqrt(float(variance[j]))),
            }
        )
    return raters


def fit_rater_model(model: str, ratings: Sequence[tuple[Hashable, Hashable, Any]]) -> RaterModelResult:
    """Dispatch on the model's name (one of ``MODELS``)."""
    if model == "dawid-skene":
        return dawid_skene(ratings)
    if model == "mace":
        return mace(ratings)
    if model == "severity":
        return severity(ratings)
    raise ValueError(f"model must be one of {', '.join(MODELS)}, not {model!r}")


def _categorical_fit(
    coded: Any,
    model: str,
    reliability: Any,
    posterior: Any,
    iterations: int,
    converged: bool,
    log_likelihood: float,
    what_it_has: str,
) -> RaterModelResult:
    """The result of a categorical rater model (Dawid–Skene or MACE): each rater's reliability and the posterior
    labels; the severity and error variance belong to the ordinal model only."""
    import numpy as np  # noqa: PLC0415 - heavy; the statistics modules import it where used

    counts = np.bincount(coded.rater, minlength=len(coded.raters))
    label = "Dawid–Skene" if model == "dawid-skene" else "MACE"
    raters: list[RaterEstimate] = [
        {
            "rater": rater,
            "n": int(counts[j]),
            "reliability": defined(float(reliability[j])),
            "severity": undefined(f"{label} has {what_it_has}, not a severity"),
            "error_sd": undefined(f"{label} has {what_it_has}, not an error variance"),
        }
        for j, rater in enumerate(coded.raters)
    ]
    return {
        "model": model,
        "labels": list(coded.labels),
        "items": _item_rows(coded, posterior),
        "raters": raters,
        "iterations": iterations,
        "converged": converged,
        "log_likelihood": defined(log_likelihood),
        "undefined": None,
    }

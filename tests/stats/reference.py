"""Reference computations for statistics that have no Python library to compare with, written as plain loops."""

import math

import numpy as np

AGREEMENT_SUMMARY_KEYS = {
    "level",
    "n_items",
    "n_ratings",
    "alpha",
    "alpha_ci95",
    "fleiss_kappa",
    "gwet_ac1",
    "icc",
    "percent_agreement",
}


def ac1_by_hand(matrix: np.ndarray) -> float:
    """Gwet's AC1 following irrCAC's gwet.ac1.raw (answers x raters, NaN for missing)."""
    rows = [[v for v in row if not math.isnan(v)] for row in matrix]
    rows = [row for row in rows if row]
    categories = sorted({v for row in rows for v in row})
    q = len(categories)
    agreeing = []
    for row in rows:
        r = len(row)
        if r >= 2:
            agreeing.append(sum(row.count(k) * (row.count(k) - 1) for k in categories) / (r * (r - 1)))
    pa = sum(agreeing) / len(agreeing)
    pi = [sum(row.count(k) / len(row) for row in rows) / len(rows) for k in categories]
    pe = sum(p * (1 - p) for p in pi) / (q - 1)
    return (pa - pe) / (1 - pe)


def hedged_log_capital_by_hand(x: list[float], m: float, alpha: float, truncation: float = 0.5) -> list[float]:
    """Waudby-Smith & Ramdas's hedged capital process (θ = 1/2) with predictable plug-in bets, written as a plain loop
    from the paper's formulas: log max(K⁺_t(m), K⁻_t(m)) / 2 after each observation."""
    log_up = log_down = 0.0
    total = 0.0
    squares = 0.0
    sigma2_before = 0.25
    out = []
    for t, value in enumerate(x, start=1):
        bet = math.sqrt(2 * math.log(2 / alpha) / (sigma2_before * t * math.log(1 + t)))
        up = min(bet, truncation / m)
        down = min(bet, truncation / (1 - m))
        log_up += math.log(1 + up * (value - m))
        log_down += math.log(1 - down * (value - m))
        out.append(max(log_up, log_down) - math.log(2))
        total += value
        mean_t = (0.5 + total) / (t + 1)
        squares += (value - mean_t) ** 2
        sigma2_before = (0.25 + squares) / (t + 1)
    return out

"""Reference computations for statistics that have no Python library to compare with, written as plain loops."""

import math

import numpy as np


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

"""One JSON-serialisable shape for every statistic, defined or not.

Every scalar statistic is ``{"value": float | None, "undefined": str | None}``; every interval is
``{"low": float | None, "high": float | None, "undefined": str | None}``. Exactly one of value and
undefined is non-null, so a reader never meets NaN and always learns why a number is missing.
"""

from __future__ import annotations

import math
from typing import TypedDict


class Stat(TypedDict):
    value: float | None
    undefined: str | None


class Interval(TypedDict):
    low: float | None
    high: float | None
    undefined: str | None


def defined(value: float) -> Stat:
    number = float(value)
    if not math.isfinite(number):
        return undefined("not a finite number")
    return {"value": number, "undefined": None}


def undefined(reason: str) -> Stat:
    return {"value": None, "undefined": reason}


def interval(low: float, high: float) -> Interval:
    low_f, high_f = float(low), float(high)
    if not (math.isfinite(low_f) and math.isfinite(high_f)):
        return undefined_interval("not a finite number")
    return {"low": low_f, "high": high_f, "undefined": None}


def undefined_interval(reason: str) -> Interval:
    return {"low": None, "high": None, "undefined": reason}


def round_significant(value: float, digits: int = 12) -> float:
    """Round to significant digits so that means equal in exact arithmetic compare equal.

    Averaging the same multiset of numbers in a different order can differ in the last bit; ranking
    such means would split a true tie.
    """
    if value == 0 or not math.isfinite(value):
        return value
    return round(value, digits - 1 - math.floor(math.log10(abs(value))))

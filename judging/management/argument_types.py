"""Argument types the statistics commands share. argparse names the type in its error ("invalid <name> value"), so
each type carries a name that says what is allowed."""

from __future__ import annotations

from collections.abc import Callable


def open_unit_interval(name: str) -> Callable[[str], float]:
    """A number strictly between 0 and 1 (a probability level)."""

    def parse(text: str) -> float:
        value = float(text)
        if not 0.0 < value < 1.0:
            raise ValueError(text)
        return value

    parse.__name__ = f"{name} (a number strictly between 0 and 1)"
    return parse


def whole_number_at_least(minimum: int, name: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise ValueError(text)
        return value

    parse.__name__ = f"{name} (a whole number of at least {minimum})"
    return parse

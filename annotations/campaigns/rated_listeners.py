"""Who hears of a new answer to a campaign with a stopping rule: the judging app registers the enqueueing of its
stopping check when it is ready, as the annotations domain does not know the judge. This module imports nothing of
the submit path, so registering at start-up loads none of it."""

from __future__ import annotations

from collections.abc import Callable

_LISTENERS: list[Callable[[int], None]] = []


def campaign_rated_register(listener: Callable[[int], None]) -> None:
    if listener not in _LISTENERS:
        _LISTENERS.append(listener)


def campaign_rated_notify(campaign_id: int) -> None:
    for listener in _LISTENERS:
        listener(campaign_id)

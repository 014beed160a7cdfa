"""The answer and rating rows an import writes, in the column order of their tables, for the floors of the import
benchmarks, which COPY rows built with no checks."""

from __future__ import annotations

from datetime import datetime
from typing import Any


def response_row(
    response_id: int, turn_id: int, system_id: int, position: int, answer: dict[str, Any]
) -> tuple[Any, ...]:
    from psycopg.types.json import Jsonb

    evals = answer.get("human_evals", {})
    return (
        response_id,
        turn_id,
        system_id,
        position,
        answer["response"],
        Jsonb({k: v for k, v in answer.items() if k != "human_evals"}),
        Jsonb(list(evals)),
        bool(evals),
    )


def imported_rating_row(
    rating_id: int, response_id: int, aspect_id: int, rater_id: int, rater_position: int, token: Any, now: datetime
) -> tuple[Any, ...]:
    """An imported rating; a token of NA, 0 or none is a missing rating."""
    from psycopg.types.json import Jsonb

    missing = token in ("NA", 0, None)
    return (
        rating_id,
        response_id,
        aspect_id,
        rater_id,
        rater_position,
        Jsonb(token),
        None if missing else float(token),
        missing,
        "",
        "",
        None,
        "import",
        now,
        now,
    )

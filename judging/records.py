"""Plain data from the project's record types, for JSON, the cache and the database's JSON columns."""

from __future__ import annotations

from typing import Any


def record_fields(record: object, names: str) -> dict[str, Any]:
    """The attributes of `record` named in `names` (separated by white space, as namedtuple takes them), keyed by name
    in that order: stored forms and reports list their keys in an order of their own, not always the declared one."""
    return {name: getattr(record, name) for name in names.split()}

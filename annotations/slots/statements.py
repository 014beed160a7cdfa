"""Hand-written SQL statements run the way the ORM would run them: prepared on Postgres, counted and logged like
any Django query, and their rows turned into model instances with the ORM's own converters.

The annotator's every request runs the same few reads and writes. Written as SQL they cost a fraction of the
ORM's query building, which dominated the time of a request; the scoping rules are the same as in the ORM code.
"""

import functools
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.models import Model

ModelT = TypeVar("ModelT", bound=Model)


@functools.cache
def _preparing_cursor_class() -> type:
    import psycopg  # noqa: PLC0415 - the Postgres driver; SQLite deployments never load it

    class PreparingCursor(psycopg.Cursor):  # type: ignore[type-arg]
        """Binds values on the server and has Postgres prepare each statement the first time it runs on a
        connection (psycopg keeps the last 100 per connection), so it is parsed and planned once."""

        def execute(self, query: Any, params: Any = None, *, prepare: bool | None = None, binary: bool | None = None):  # type: ignore[no-untyped-def, override]
            return super().execute(query, params, prepare=True if prepare is None else prepare, binary=binary)

    return PreparingCursor


def statement_cursor() -> Any:
    """A cursor for the hand-written statements of the annotator side and the slot engine. On Postgres they are prepared
    statements: planning was most of the database time of these short queries, run thousands of times with new
    values. Django's own cursors bind on the client and never prepare (it keeps poolers such as PgBouncer in
    transaction mode working; with such a pooler, it needs prepared-statement support, PgBouncer 1.21+). The cursor
    is wrapped like any Django cursor: errors become django.db errors and queries are logged and counted."""
    # One lookup of this thread's connection: each attribute read through django.db.connection repeats it.
    wrapper = connections[DEFAULT_DB_ALIAS]
    if wrapper.vendor != "postgresql":
        return wrapper.cursor()
    wrapper.close_if_health_check_failed()
    wrapper.ensure_connection()
    database = wrapper.connection
    if database.prepare_threshold is None:
        # Django turns preparing off for the whole connection; allow it for cursors that ask for it (only this one:
        # Django's client-binding cursors cannot prepare, so the very high threshold never triggers for them).
        database.prepare_threshold = 2**31 - 1
    with wrapper.wrap_database_errors:
        return wrapper._prepare_cursor(_preparing_cursor_class()(database))  # type: ignore[attr-defined]


@functools.cache
def _row_loader(
    model: type[Model], names: tuple[str, ...], vendor: str
) -> tuple[list[int], list[tuple[str, list[Callable[..., Any]], Any]]]:
    """How to turn columns named `names` into `model` field values: their order among the model's fields, and the
    converters the ORM itself would apply (database adapters, JSON decoding)."""
    del vendor  # part of the cache key: converters differ between database backends
    position = {name: i for i, name in enumerate(names)}
    ordered = [f for f in model._meta.concrete_fields if f.attname in position]
    if len(ordered) != len(names):
        raise ValueError(f"unknown columns for {model.__name__}: {names}")
    plan = []
    for f in ordered:
        column = f.get_col(model._meta.db_table)
        plan.append((f.attname, [*connection.ops.get_db_converters(column), *f.get_db_converters(connection)], column))
    return [position[f.attname] for f in ordered], plan


def instance_from_row(model: type[ModelT], names: Sequence[str], values: Sequence[Any]) -> ModelT:
    """A model instance from columns read with SQL, as the ORM would have loaded it; other fields stay deferred."""
    wrapper = connections[DEFAULT_DB_ALIAS]
    order, plan = _row_loader(model, tuple(names), wrapper.vendor)
    converted = []
    for index, (_name, converters, column) in zip(order, plan, strict=True):
        value = values[index]
        for convert in converters:
            value = convert(value, column, wrapper)
        converted.append(value)
    return model.from_db(DEFAULT_DB_ALIAS, [name for name, _, _ in plan], converted)  # type: ignore[return-value]


def statement_rows(sql: str, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """Runs one statement. In autocommit it is its own transaction; inside a caller's transaction a savepoint keeps
    that transaction usable when the statement fails."""
    with ExitStack() as stack:
        if connection.in_atomic_block:
            stack.enter_context(transaction.atomic())
        with statement_cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall() if cursor.description else []
    raise AssertionError("unreachable")  # pragma: no cover - ExitStack does not swallow exceptions

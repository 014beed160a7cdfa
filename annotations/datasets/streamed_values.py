"""A values_list queryset read in chunks, as tuples equal to the ORM's. On Postgres the rows come through a named
psycopg cursor of their own, past Django's per-row converters: at a million ratings the ORM's iterator spent as
long turning rows into values (a pure-Python timestamp loader, a JSON decode through each field, a converter call
per cell) as the export spent writing them. Elsewhere, and for a queryset whose values need a converter other than
a JSON field's, the ORM's own iterator reads them."""

import json
from collections.abc import Callable, Iterator
from itertools import count
from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db import connections
from django.db.models import IntegerField, JSONField, QuerySet

_cursor_names = count()


def streamed_values(queryset: QuerySet[Any, Any], *, chunk_size: int) -> Iterator[tuple[Any, ...]]:
    connection = connections[queryset.db]
    if connection.vendor != "postgresql":
        return queryset.iterator(chunk_size=chunk_size)
    compiler = queryset.query.get_compiler(using=queryset.db)
    try:
        sql, params = compiler.as_sql()
    except EmptyResultSet:  # a filter no row can match (an empty __in list): Django asks nothing either
        return iter(())
    decoders = _json_columns(compiler)
    if decoders is None or compiler.col_count != len(compiler.select):
        return queryset.iterator(chunk_size=chunk_size)
    return _server_cursor_rows(connection, sql, params, decoders, chunk_size)


def _json_columns(compiler: Any) -> list[int] | None:
    """The positions of the JSON columns, which the connection loads as text; None when another column needs a
    converter of Django's. An integer expression's converter (int() of what the driver gives, an int already) is
    not needed."""
    expressions = [expression for expression, _, _ in compiler.select]
    positions = []
    for position, (_, expression) in compiler.get_converters(expressions).items():
        field = getattr(expression, "output_field", None)
        if isinstance(field, JSONField):
            positions.append(position)
        elif not isinstance(field, IntegerField):
            return None
    return positions


def _json_value(text: str | None, loads: Callable[[str], Any] = json.loads) -> Any:
    if text is None:
        return None
    # Most raw scores are small whole numbers; Postgres writes a jsonb number without sign or leading zeros.
    return int(text) if text.isdigit() else loads(text)


def _server_cursor_rows(
    connection: Any, sql: str, params: Any, json_positions: list[int], chunk_size: int
) -> Iterator[tuple[Any, ...]]:
    import psycopg  # noqa: PLC0415 - the Postgres driver, loaded by the backend already

    connection.ensure_connection()
    with connection.wrap_database_errors:
        # Outside a transaction the cursor must outlive the statement's own, as Django's iterator's does.
        cursor = connection.connection.cursor(
            name=f"streamed_values_{next(_cursor_names)}", withhold=connection.get_autocommit()
        )
        try:
            # The driver's own timestamp loader (in C when built so) in place of Django's pure-Python subclass: the
            # session's time zone is UTC, which Django sets, so the values are the same aware datetimes.
            timestamptz = psycopg.postgres.types["timestamptz"].oid
            cursor.adapters.register_loader(
                "timestamptz", psycopg.postgres.adapters.get_loader(timestamptz, psycopg.pq.Format.TEXT)
            )
            cursor.execute(sql, params)
            while rows := cursor.fetchmany(chunk_size):
                if json_positions:
                    for index, row in enumerate(rows):
                        values = list(row)
                        for position in json_positions:
                            values[position] = _json_value(values[position])
                        rows[index] = tuple(values)
                yield from rows
        finally:
            cursor.close()

"""Benchmarks name their own Postgres database in DATABASE_URL; on a fresh server it does not exist yet."""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit


def ensure_postgres_database() -> None:
    """Create the database DATABASE_URL names when it is a Postgres URL and the database is missing."""
    url = os.environ.get("DATABASE_URL", "")
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql") or not parts.path.strip("/"):
        return
    import psycopg
    from psycopg import sql

    name = parts.path.strip("/")
    server = urlunsplit((parts.scheme, parts.netloc, "/postgres", parts.query, ""))
    with psycopg.connect(server, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if exists is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))

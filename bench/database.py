"""The Postgres databases the benchmarks run in: created fresh, or created when missing."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit, urlunsplit


def _admin_connection(server_url: str) -> Any:
    import psycopg

    return psycopg.connect(f"{server_url.rstrip('/')}/postgres", autocommit=True)


def drop_database(server_url: str, name: str) -> None:
    from psycopg import sql

    with _admin_connection(server_url) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def recreate_database(server_url: str, name: str) -> str:
    """An empty database `name` on the server; returns its URL."""
    from psycopg import sql

    drop_database(server_url, name)
    with _admin_connection(server_url) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return f"{server_url.rstrip('/')}/{name}"


def ensure_postgres_database() -> None:
    """Create the database DATABASE_URL names when it is a Postgres URL and the database is missing."""
    parts = urlsplit(os.environ.get("DATABASE_URL", ""))
    name = parts.path.strip("/")
    if parts.scheme not in ("postgres", "postgresql") or not name:
        return
    from psycopg import sql

    server_url = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
    with _admin_connection(server_url) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def set_up_django_database() -> None:
    """Django set up on DATABASE_URL's database (created when missing) with every migration applied."""
    import django

    ensure_postgres_database()
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def set_up_django_on(server_url: str, name: str) -> None:
    """Django set up on the database `name` of a benchmark's Postgres server, with every migration applied."""
    os.environ["DATABASE_URL"] = f"{server_url}/{name}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    set_up_django_database()

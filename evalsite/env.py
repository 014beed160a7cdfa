"""Environment readers that refuse to guess: a bad value stops start-up with a message naming the variable."""

import math
import os
from pathlib import Path

import dj_database_url


class ImproperEnvironment(RuntimeError):
    pass


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ImproperEnvironment(f"{name} must be a boolean (true/false/1/0/yes/no/on/off), found {raw!r}")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperEnvironment(f"{name} must be an integer, found {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperEnvironment(f"{name} must be at least {minimum}, found {value}")
    return value


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperEnvironment(f"{name} must be a number, found {raw!r}") from None
    if not math.isfinite(value):
        raise ImproperEnvironment(f"{name} must be a finite number, found {raw!r}")
    if minimum is not None and value < minimum:
        raise ImproperEnvironment(f"{name} must be at least {minimum:g}, found {value:g}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [part.strip() for part in raw.split(",") if part.strip()]


def env_lists_by_name(name: str) -> dict[str, list[str]]:
    """`NAME=a|b,OTHER=c` as {"NAME": ["a", "b"], "OTHER": ["c"]}; an entry without a name or values is refused."""
    mapping: dict[str, list[str]] = {}
    for entry in env_list(name, []):
        key, _, values = entry.partition("=")
        parts = [v.strip() for v in values.split("|") if v.strip()]
        if not key.strip() or not parts:
            raise ImproperEnvironment(f"{name} entries must look like NAME=host1|host2, found {entry!r}")
        mapping.setdefault(key.strip(), []).extend(parts)
    return mapping


def sqlite_database(path: Path) -> dict:
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(path),
        # The web server and the worker share the file: wait for locks instead of failing at once.
        "OPTIONS": {"timeout": 30, "transaction_mode": "IMMEDIATE"},
        # A file, not pytest-django's in-memory default: test Celery workers open the same database.
        "TEST": {"NAME": str(path.with_name("test_" + path.name))},
    }


def env_database(name: str, default_sqlite_path: Path) -> dict:
    raw = os.environ.get(name)
    if not raw:
        return sqlite_database(default_sqlite_path)
    if not raw.startswith(("postgres://", "postgresql://", "sqlite://")):
        raise ImproperEnvironment(
            f"{name} must be a postgres:// or sqlite:// URL, found scheme of {raw.split(':', 1)[0]!r}"
        )
    try:
        # Connections are kept for a minute and checked before a request reuses one, so a database restart costs
        # each kept connection one reconnect instead of an error on the request that found it closed.
        config = dj_database_url.parse(raw, conn_max_age=60, conn_health_checks=True)
    except Exception as exc:  # dj_database_url raises several types for malformed URLs
        raise ImproperEnvironment(f"{name} is not a valid database URL: {exc}") from None
    if config["ENGINE"].endswith("sqlite3") and config["NAME"] not in ("", ":memory:"):
        return {**config, **sqlite_database(Path(config["NAME"]))}
    return dict(config)

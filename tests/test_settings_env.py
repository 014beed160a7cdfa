import subprocess
import sys

import pytest

from evalsite.env import ImproperEnvironment, env_bool, env_database, env_int, env_list

SETUP_DJANGO = "import django, os; os.environ['DJANGO_SETTINGS_MODULE']='evalsite.settings'; django.setup()"


def test_env_bool_accepts_common_spellings(monkeypatch: pytest.MonkeyPatch) -> None:
    for raw, expected in [("true", True), ("1", True), ("Yes", True), ("off", False), ("0", False)]:
        monkeypatch.setenv("FLAG", raw)
        assert env_bool("FLAG", not expected) is expected


def test_env_bool_refuses_garbage(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLAG", "maybe")
    with pytest.raises(ImproperEnvironment, match="FLAG must be a boolean"):
        env_bool("FLAG", False)


def test_env_int_refuses_non_numbers_and_values_below_minimum(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIZE", "12MB")
    with pytest.raises(ImproperEnvironment, match="SIZE must be an integer"):
        env_int("SIZE", 1)
    monkeypatch.setenv("SIZE", "3")
    with pytest.raises(ImproperEnvironment, match="at least 10"):
        env_int("SIZE", 1, minimum=10)


def test_env_list_splits_and_trims(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTS", " a.example , b.example,, ")
    assert env_list("HOSTS", []) == ["a.example", "b.example"]


def test_env_database_defaults_to_sqlite_and_refuses_unknown_schemes(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("DB_URL", raising=False)
    assert env_database("DB_URL", tmp_path / "x.sqlite3")["ENGINE"] == "django.db.backends.sqlite3"
    monkeypatch.setenv("DB_URL", "mysql://root@localhost/x")
    with pytest.raises(ImproperEnvironment, match="postgres:// or sqlite://"):
        env_database("DB_URL", tmp_path / "x.sqlite3")
    monkeypatch.setenv("DB_URL", "postgres://postgres@127.0.0.1:5432/evalsite")
    config = env_database("DB_URL", tmp_path / "x.sqlite3")
    assert config["ENGINE"] == "django.db.backends.postgresql" and config["NAME"] == "evalsite"


def test_settings_fail_loudly_on_a_bad_value() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django, os; os.environ['DJANGO_SETTINGS_MODULE']='evalsite.settings'; django.setup()",
        ],
        env={"DEBUG": "sometimes", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert "DEBUG must be a boolean" in result.stderr


def test_production_requires_a_secret_key() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django, os; os.environ['DJANGO_SETTINGS_MODULE']='evalsite.settings'; django.setup()",
        ],
        env={"EVALSITE_PRODUCTION": "true", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr

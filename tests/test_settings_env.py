import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from evalsite.env import (
    ImproperEnvironment,
    env_bool,
    env_database,
    env_float,
    env_int,
    env_list,
    env_lists_by_name,
)

SETUP_DJANGO = "import django, os; os.environ['DJANGO_SETTINGS_MODULE']='evalsite.settings'; django.setup()"


def assert_start_up_fails(env: dict[str, str], message: str) -> None:
    """Django set up with only these variables (and PATH) stops, naming the problem on stderr."""
    result = subprocess.run(
        [sys.executable, "-c", SETUP_DJANGO],
        env={**env, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert message in result.stderr


def test_env_bool_accepts_common_spellings(monkeypatch: pytest.MonkeyPatch) -> None:
    for raw, expected in [("true", True), ("1", True), ("Yes", True), ("off", False), ("0", False)]:
        monkeypatch.setenv("FLAG", raw)
        assert env_bool("FLAG", not expected) is expected


@pytest.mark.parametrize(
    ("variable", "read", "raw", "message"),
    [
        ("FLAG", lambda: env_bool("FLAG", False), "maybe", "FLAG must be a boolean"),
        ("SIZE", lambda: env_int("SIZE", 1), "12MB", "SIZE must be an integer"),
        ("SIZE", lambda: env_int("SIZE", 1, minimum=10), "3", "at least 10"),
        ("WAIT", lambda: env_float("WAIT", 1.0), "soon", "WAIT must be a number"),
        ("WAIT", lambda: env_float("WAIT", 1.0), "nan", "WAIT must be a finite number"),
        ("WAIT", lambda: env_float("WAIT", 1.0, minimum=1.0), "0.5", "WAIT must be at least 1"),
    ],
    ids=[
        "bool garbage",
        "int not a number",
        "int below minimum",
        "float not a number",
        "float nan",
        "float below minimum",
    ],
)
def test_env_readers_refuse_bad_values_naming_the_variable(
    variable: str, read: Callable[[], object], raw: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, raw)
    with pytest.raises(ImproperEnvironment, match=message):
        read()


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


def test_env_database_sqlite_url_waits_for_locks_like_the_default(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # A worker pointed at a SQLite file by URL shares it with the web server, as the default does.
    monkeypatch.setenv("DB_URL", f"sqlite:///{tmp_path}/shared.sqlite3")
    config = env_database("DB_URL", tmp_path / "x.sqlite3")
    assert config["ENGINE"] == "django.db.backends.sqlite3" and config["NAME"] == f"{tmp_path}/shared.sqlite3"
    assert config["OPTIONS"] == {"timeout": 30, "transaction_mode": "IMMEDIATE"}
    assert config["TEST"] == {"NAME": f"{tmp_path}/test_shared.sqlite3"}


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DEBUG": "sometimes"}, "DEBUG must be a boolean"),
        ({"EVALSITE_PRODUCTION": "true"}, "SECRET_KEY must be set"),
    ],
    ids=["a bad value fails loudly", "production requires a secret key"],
)
def test_settings_refuse_to_start(env: dict[str, str], message: str) -> None:
    assert_start_up_fails(env, message)


def test_env_float_reads_a_number_or_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WAIT", raising=False)
    assert env_float("WAIT", 2.5) == 2.5
    monkeypatch.setenv("WAIT", "0.25")
    assert env_float("WAIT", 2.5) == 0.25


def test_env_lists_by_name_parses_entries_and_refuses_an_entry_without_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HOSTS_BY_KEY", raising=False)
    assert env_lists_by_name("HOSTS_BY_KEY") == {}
    monkeypatch.setenv("HOSTS_BY_KEY", " VLLM_API_KEY = gpu1.lan|gpu2.lan , OTHER_KEY=h3")
    assert env_lists_by_name("HOSTS_BY_KEY") == {"VLLM_API_KEY": ["gpu1.lan", "gpu2.lan"], "OTHER_KEY": ["h3"]}
    for bad in ("VLLM_API_KEY", "VLLM_API_KEY=", "=gpu1.lan", "VLLM_API_KEY=|"):
        monkeypatch.setenv("HOSTS_BY_KEY", bad)
        with pytest.raises(ImproperEnvironment, match="HOSTS_BY_KEY entries must look like NAME=host1"):
            env_lists_by_name("HOSTS_BY_KEY")


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("JUDGE_WATCH_MAX_S", "ten", "JUDGE_WATCH_MAX_S must be a number"),
        ("JUDGE_CLAIM_BATCH", "-1", "JUDGE_CLAIM_BATCH must be at least 0"),
        ("JUDGE_RETRY_AFTER_CAP_S", "5m", "JUDGE_RETRY_AFTER_CAP_S must be an integer"),
        ("JUDGE_API_KEY_HOSTS", "VLLM_API_KEY", "JUDGE_API_KEY_HOSTS entries must look like"),
        ("JUDGE_LEASE_S", "1", "JUDGE_LEASE_S must be at least 2"),
    ],
)
def test_judge_settings_fail_at_start_up_naming_the_variable(variable: str, value: str, message: str) -> None:
    assert_start_up_fails({variable: value}, message)


def test_judge_settings_are_declared_with_their_defaults() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            SETUP_DJANGO + "; from django.conf import settings as s; "
            "print(s.JUDGE_WATCH_MAX_S, s.JUDGE_CLAIM_BATCH, s.JUDGE_RETRY_AFTER_CAP_S, "
            "repr(s.JUDGE_DELIMITER_SECRET), s.JUDGE_API_KEY_HOSTS)",
        ],
        env={"PATH": "/usr/bin:/bin", "JUDGE_API_KEY_HOSTS": "VLLM_API_KEY=gpu1.lan|gpu2.lan"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[-2] == "10.0 0 300 '' {'VLLM_API_KEY': ['gpu1.lan', 'gpu2.lan']}"


def test_app_code_reads_settings_as_declared_attributes() -> None:
    """A setting read with getattr(settings, NAME, default) restates its default away from evalsite/settings.py."""
    root = Path(__file__).resolve().parent.parent
    offenders = [
        f"{path.relative_to(root)}:{number}"
        for package in ("annotations", "judging", "evalsite")
        for path in sorted((root / package).rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if "getattr(settings," in line.replace(" ", "")
    ]
    assert offenders == []


@pytest.mark.parametrize(
    ("value", "message"),
    [("64k", "ANONYMOUS_MAX_BODY_BYTES must be an integer"), ("100", "ANONYMOUS_MAX_BODY_BYTES must be at least 1024")],
)
def test_anonymous_body_cap_fails_at_start_up_on_a_bad_value(value: str, message: str) -> None:
    assert_start_up_fails({"ANONYMOUS_MAX_BODY_BYTES": value}, message)

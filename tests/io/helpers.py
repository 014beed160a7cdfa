"""Helpers for the import/export tests: run the real commands, snapshot every table, compare JSONL files."""

import io
import json
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.core.management import CommandError, call_command
from django.db import connection


def row_counts() -> dict[str, int]:
    """Row count of every table of every installed app, so an atomic failure can be shown to write nothing at all."""
    # Only models whose table exists: another app's model may be ahead of its migration while work is in progress.
    tables = set(connection.introspection.table_names())
    return {
        model._meta.label: model._default_manager.count()
        for model in apps.get_models(include_auto_created=True)
        if model._meta.db_table in tables
    }


def write_lines(path: Path, lines: Iterable[Any]) -> Path:
    """Writes JSON objects (or raw str/bytes lines as given) one per line."""
    with open(path, "wb") as handle:
        for line in lines:
            if isinstance(line, bytes):
                handle.write(line if line.endswith(b"\n") else line + b"\n")
            elif isinstance(line, str):
                handle.write((line if line.endswith("\n") else line + "\n").encode("utf-8"))
            else:
                handle.write((json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8"))
    return path


def run_import_cli(path: Path, name: str, *extra: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Runs import_dataset in-process, returning (exit code, stdout, stderr) as `manage.py` would produce them.

    BaseCommand.run_from_argv prints a CommandError to stderr and exits with its returncode; it also closes every
    database connection, which would break the test transaction, so that step is mirrored here instead of called.
    test_cli_exit_code.py runs the real `manage.py` in a subprocess.
    """
    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        call_command("import_dataset", str(path), "--name", name, *extra, stdout=out, stderr=err)
    except CommandError as exc:
        code = exc.returncode
        err.write(f"CommandError: {exc}\n")
    return code, out.getvalue(), err.getvalue()


def export_lines(name: str, *extra: str) -> list[str]:
    out = io.StringIO()
    # export_dataset writes to sys.stdout directly when --out is missing; use a file to stay independent of capture.
    target = Path(tempfile.mkdtemp()) / "export.jsonl"
    call_command("export_dataset", name, "--out", str(target), *extra, stdout=out)
    return target.read_text(encoding="utf-8").splitlines()


def export_objects(name: str, *extra: str) -> list[Any]:
    return [json.loads(line) for line in export_lines(name, *extra)]


def read_objects(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def assert_json_equal(actual: Any, expected: Any) -> None:
    """JSON equality that also tells 1 from true and 1 from "1" (Python's == does not for bools)."""
    assert _canonical(actual) == _canonical(expected)


def _canonical(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return ("const", value)
    if isinstance(value, (int, float)):
        return ("num", float(value))
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, list):
        return ("list", [_canonical(v) for v in value])
    if isinstance(value, dict):
        return ("obj", sorted((k, _canonical(v)) for k, v in value.items()))
    raise TypeError(type(value))

"""``manage.py monitor``: the command prints the pure confidence sequence of a CSV stream and its stopping rule."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from judging.statistics.sequences import confidence_sequence, paired_difference_sequence
from tests.commands import command_json


def _stream(tmp_path: Path) -> tuple[Path, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(8)
    a = rng.choice([1, 2, 3, 4, 5], 120, p=[0.05, 0.05, 0.2, 0.4, 0.3])
    b = rng.choice([1, 2, 3, 4, 5], 120, p=[0.2, 0.3, 0.3, 0.15, 0.05])
    path = tmp_path / "stream.csv"
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["sys_a", "sys_b", "outcome"])
        for x, y in zip(a, b, strict=True):
            writer.writerow([x, y, "win" if x > y else "loss" if x < y else "tie"])
    return path, a.astype(float), b.astype(float)


def run(*args: str) -> dict[str, Any]:
    return command_json("monitor", *args)  # type: ignore[no-any-return]


def test_looks_equal_the_pure_sequence(tmp_path: Path) -> None:
    path, a, _ = _stream(tmp_path)
    report = run("--values", str(path), "--column", "sys_a", "--lower", "1", "--upper", "5", "--method", "betting")
    expected = confidence_sequence(a, lower=1, upper=5)
    assert report["looks"] == json.loads(json.dumps(expected))
    assert report["n"] == 120 and report["stopping_rule"] is None
    assert len(report["fixed_n"]) == 120


def test_a_beats_b_with_its_evidence_and_first_look(tmp_path: Path) -> None:
    path, a, b = _stream(tmp_path)
    args = ["--values", str(path), "--column", "sys_a", "--versus", "sys_b", "--lower", "1", "--upper", "5"]
    report = run(*args, "--stop-when", "beats")
    looks = paired_difference_sequence(a, b, lower=1, upper=5)
    rule = report["stopping_rule"]
    assert rule["met"] is True and rule["decision"] == "sys_a beats sys_b"
    assert rule["evidence"] == looks[-1]["interval"] and rule["n"] == 120
    first = next(look["n"] for look in looks if look["interval"]["low"] > 0)
    assert report["first_met_at"] == first
    out = io.StringIO()
    call_command("monitor", *args, "--stop-when", "beats", "--every", "20", stdout=out)
    text = out.getvalue()
    assert f"First met after {first} observations" in text
    assert "Stopping rule sys_a beats sys_b or sys_b beats sys_a: met (sys_a beats sys_b) at n = 120" in text
    assert text.count("\n") < 20  # every 20th look only


def test_win_rate_and_width_rule(tmp_path: Path) -> None:
    path, a, b = _stream(tmp_path)
    report = run("--values", str(path), "--column", "outcome", "--outcomes", "--stop-when", "width", "--width", "0.9")
    wins = np.where(a > b, 1.0, np.where(a < b, 0.0, 0.5))
    assert report["looks"][-1]["estimate"]["value"] == pytest.approx(wins.mean())
    assert report["stopping_rule"]["met"] is True


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--column", "sys_c", "--lower", "1", "--upper", "5"], "no column 'sys_c'"),
        (["--column", "sys_a"], "--lower and --upper"),
        (["--column", "sys_a", "--lower", "1", "--upper", "4"], "range"),
        (["--column", "sys_a", "--lower", "1", "--upper", "5", "--stop-when", "beats"], "--versus"),
        (["--column", "sys_a", "--lower", "1", "--upper", "5", "--stop-when", "width"], "--width"),
        (["--column", "sys_a", "--outcomes"], "win, tie or loss"),
    ],
)
def test_bad_input_is_a_command_error(tmp_path: Path, args: list[str], message: str) -> None:
    path, _, _ = _stream(tmp_path)
    with pytest.raises(CommandError, match=message):
        call_command("monitor", "--values", str(path), *args)


def test_unreadable_and_non_numeric_files(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="cannot read"):
        call_command(
            "monitor", "--values", str(tmp_path / "missing.csv"), "--column", "x", "--lower", "0", "--upper", "1"
        )
    path = tmp_path / "bad.csv"
    path.write_text("x\n0.5\nhigh\n", encoding="utf-8")
    with pytest.raises(CommandError, match=r"row 3, column 'x': 'high' is not a number"):
        call_command("monitor", "--values", str(path), "--column", "x", "--lower", "0", "--upper", "1")

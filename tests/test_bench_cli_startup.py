"""bench/cli_startup.py keeps working: one fast run of every measurement, and its pass/fail rule."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import cli_startup
from bench.cli_startup import Timing, over_limit

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def test_fast_run_measures_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [sys.executable, "bench/cli_startup.py", "--repeat", "1", "--worker-repeat", "1", "--no-limit", "--json", out],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    figures = json.loads(out.read_text())
    assert list(figures) == ["floor", "help", "agreement", "worker"]
    assert all(figure["wall"] > 0 for figure in figures.values())
    assert all(figures[name]["cpu"] > 0 for name in ("floor", "help", "agreement"))
    assert figures["worker"]["cpu"] is None
    for name in figures:
        assert any(line.startswith(name) and "x" in line for line in done.stdout.splitlines()), done.stdout


def figures(floor: float, help_: float, agreement: float) -> dict[str, Timing]:
    return {"floor": Timing(floor, 0.5), "help": Timing(help_, 0.5), "agreement": Timing(agreement, 0.5)}


def test_over_limit_names_the_commands_slower_than_the_ratio() -> None:
    assert over_limit(figures(1.0, 1.9, 2.0), 2.0) == []
    assert over_limit(figures(1.0, 2.1, 1.5), 2.0) == ["help"]
    assert over_limit(figures(1.0, 2.1, 3.0), 2.0) == ["help", "agreement"]
    assert over_limit({**figures(1.0, 1.0, 1.0), "worker": Timing(9.0, None)}, 2.0) == []


def test_over_limit_counts_cpu_time_as_well_as_wall_time() -> None:
    within_wall = {"floor": Timing(1.0, 0.5), "help": Timing(1.5, 1.1), "agreement": Timing(1.5, 0.9)}
    assert over_limit(within_wall, 2.0) == ["help"]


@pytest.mark.parametrize(("extra", "status"), [([], 1), (["--no-limit"], 0), (["--limit", "3"], 0)])
def test_exit_status_follows_the_limit(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], extra: list[str], status: int
) -> None:
    monkeypatch.setattr(cli_startup, "measure", lambda repeat, worker_repeat, var_dir: figures(1.0, 2.5, 1.0))
    assert cli_startup.main(["--worker-repeat", "0", *extra]) == status
    assert ("over 2x the floor: help" in capsys.readouterr().err) == (status == 1)

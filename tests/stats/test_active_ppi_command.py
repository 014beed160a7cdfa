"""``manage.py active_ppi``: on an export written by the test, the command reports what the pure active and
stratified PPI functions compute on the same numbers."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from judging.statistics.active_ppi import active_ppi_mean, sampling_probabilities
from judging.statistics.stratified_ppi import stratified_ppi_mean
from tests.commands import command_json


def _export(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    rng = np.random.default_rng(12)
    n = 400
    y = rng.normal(3.0, 1.0, n)
    u = np.where(rng.random(n) < 0.7, 0.2, 1.5)
    f = y + 0.2 + rng.normal(0.0, 1.0, n) * u
    pi = np.asarray(sampling_probabilities(u, 80))
    sent = rng.random(n) < pi
    stratum = np.where(u < 1, "sure", "unsure")
    path = tmp_path / "export.csv"
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["judge", "human", "probability", "bin"])
        for i in range(n):
            writer.writerow([repr(float(f[i])), repr(float(y[i])) if sent[i] else "", repr(float(pi[i])), stratum[i]])
    return path, {"y": y, "f": f, "pi": pi, "sent": sent, "stratum": stratum}


def run(*args: str) -> dict[str, Any]:
    return command_json("active_ppi", *args)  # type: ignore[no-any-return]


def text_of(path: Path, *design: str) -> str:
    """The command's text report on the values file's judge and human columns, with the design's options."""
    out = io.StringIO()
    call_command("active_ppi", "--values", str(path), "--judge", "judge", "--human", "human", *design, stdout=out)
    return out.getvalue()


def test_active_design_equals_the_pure_function(tmp_path: Path) -> None:
    path, plan = _export(tmp_path)
    report = run("--values", str(path), "--judge", "judge", "--human", "human", "--probability", "probability")
    expected = active_ppi_mean(np.where(plan["sent"], plan["y"], np.nan), plan["f"], plan["pi"])
    assert report["design"] == "active"
    assert report["active"]["estimate"] == pytest.approx(expected["active"]["estimate"])
    assert report["active"]["interval"] == pytest.approx(expected["active"]["interval"])
    assert report["ratings_saved"]["value"] == pytest.approx(expected["ratings_saved"]["value"])
    assert report["n"] == int(plan["sent"].sum())


def test_stratified_design_equals_the_pure_function(tmp_path: Path) -> None:
    path, plan = _export(tmp_path)
    report = run("--values", str(path), "--judge", "judge", "--human", "human", "--stratum", "bin")
    strata = []
    for name in ("sure", "unsure"):
        rows = plan["stratum"] == name
        rated = rows & plan["sent"]
        strata.append(
            {
                "name": name,
                "human": plan["y"][rated],
                "judge_labelled": plan["f"][rated],
                "judge_unlabelled": plan["f"][rows & ~plan["sent"]],
            }
        )
    expected = stratified_ppi_mean(strata)
    assert report["stratified"]["interval"] == pytest.approx(expected["stratified"]["interval"])
    assert [s["name"] for s in report["strata"]] == ["sure", "unsure"]
    text = text_of(path, "--stratum", "bin")
    assert "Stratified PPI (ppi++, 95% intervals)" in text
    assert "unsure" in text


def test_text_output_of_the_active_design(tmp_path: Path) -> None:
    path, _ = _export(tmp_path)
    text = text_of(path, "--probability", "probability")
    assert "Active PPI (ppi++, 95% intervals)" in text
    assert "uniform sampling (width)" in text and "ratings saved against uniform sampling" in text


def test_bad_input_is_a_command_error(tmp_path: Path) -> None:
    path, _ = _export(tmp_path)
    with pytest.raises(CommandError, match="one of the arguments --probability --stratum is required"):
        call_command("active_ppi", "--values", str(path), "--judge", "judge", "--human", "human")
    with pytest.raises(CommandError, match="no column 'p'"):
        call_command("active_ppi", "--values", str(path), "--judge", "judge", "--human", "human", "--probability", "p")
    bad = tmp_path / "bad.csv"
    bad.write_text("judge,human,probability\n3,4,0\n3,,0.5\n", encoding="utf-8")
    with pytest.raises(CommandError, match="probability must be more than 0"):
        call_command(
            "active_ppi", "--values", str(bad), "--judge", "judge", "--human", "human", "--probability", "probability"
        )
    few = tmp_path / "few.csv"
    few.write_text("judge,human,probability\n3,4,0.5\n3,,0.5\n", encoding="utf-8")
    assert "active PPI: undefined: 1 items have human scores; at least 10" in text_of(
        few, "--probability", "probability"
    )

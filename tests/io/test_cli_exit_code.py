"""The real `manage.py import_dataset` process: exit code 1 and a located message on bad input, 0 on success."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from annotations.models import Dataset
from tests.conftest import PROJECT_ROOT, database_url_for_subprocess
from tests.io.helpers import assert_json_equal, read_objects, row_counts, write_lines


def _manage(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": database_url_for_subprocess(), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.django_db(transaction=True)
def test_bad_file_exits_non_zero_with_the_location(tmp_path: Path) -> None:
    good = {
        "id": "a",
        "turns": [{"prompt": "p", "responses": {"s": {"response": "r", "human_evals": {"overall": [3]}}}}],
    }
    bad = {
        "id": "b",
        "turns": [{"prompt": "p", "responses": {"s": {"response": "r", "human_evals": {"overall": [7]}}}}],
    }
    path = write_lines(tmp_path / "bad.jsonl", [good, bad])
    before = row_counts()
    completed = _manage("import_dataset", str(path), "--name", "cli", "--preset", "llm-human-eval-jp")
    assert completed.returncode == 1
    assert "line 2, field turns[0].responses.s.human_evals.overall[0]" in completed.stderr
    assert "found 7" in completed.stderr and "nothing was imported" in completed.stderr
    assert row_counts() == before


@pytest.mark.django_db(transaction=True)
def test_good_file_exits_zero_and_exports_again(tmp_path: Path) -> None:
    sample = PROJECT_ROOT / "annotations" / "sample_data" / "lfqa_sample.jsonl"
    completed = _manage("import_dataset", str(sample), "--name", "cli", "--preset", "lfqa-multiaspect")
    assert completed.returncode == 0, completed.stderr
    assert "8 items" in completed.stdout
    assert Dataset.objects.get(name="cli").items.count() == 8
    out = tmp_path / "out.jsonl"
    exported = _manage("export_dataset", "cli", "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    exported_lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert_json_equal(exported_lines, read_objects(sample))

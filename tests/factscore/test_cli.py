"""`judge` runs a factscore config like any method; `factscore_report` then prints the table."""

import io
import json

import pytest
from django.core.management import call_command

from judging.models import JudgeRun, RunStatus
from tests.factscore.factories import factscore_config, make_fact_dataset, script_world


@pytest.mark.django_db(transaction=True)  # --wait needs the launch committed at once
def test_judge_command_runs_factscore_then_report(tmp_path, world, world_provider, eager) -> None:  # type: ignore[no-untyped-def]
    script_world(world)
    dataset = make_fact_dataset()
    config = tmp_path / "factscore.json"
    config.write_text(json.dumps(factscore_config(world_provider, name="fs cli Ξ")))
    call_command("judge", "--dataset", dataset.name, "--config", str(config), "--wait", stdout=io.StringIO())
    run = JudgeRun.objects.get(judge__name="fs cli Ξ")
    assert run.status == RunStatus.SUCCEEDED and run.method == "factscore"
    out = io.StringIO()
    call_command("factscore_report", "--dataset", dataset.name, "--judge", "fs cli Ξ", "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert {row["system"]: row["factscore"] for row in report["systems"]} == pytest.approx({"alpha": 0.5, "beta": 1.0})

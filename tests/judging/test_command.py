import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from judging.models import JudgeRun, RunStatus
from tests.fakeprovider import FakeProvider
from tests.judging.factories import make_dataset

pytestmark = pytest.mark.django_db


def judge(dataset_name: str, config_path: str, *options: str) -> str:
    """What ``manage.py judge`` on the named dataset with the config file prints."""
    out = io.StringIO()
    call_command("judge", "--dataset", dataset_name, "--config", config_path, *options, stdout=out)
    return out.getvalue()


def write_config(tmp_path: Path, fake: FakeProvider, **extra: object) -> str:
    path = tmp_path / "judge.json"
    path.write_text(
        json.dumps(
            {"name": "cli-judge", "method": "single", "model": "openai/gpt-4o-mini", "api_base": fake.base_url, **extra}
        )
    )
    return str(path)


@pytest.mark.django_db(transaction=True)  # --wait needs the launch committed (and its task sent) at once
def test_judge_wait_shows_progress_and_succeeds(tmp_path: Path, fake_provider: FakeProvider, eager: None) -> None:
    dataset = make_dataset(items=2, systems=2, name="BLEU Ξ§ data")
    text = judge(
        dataset.name, write_config(tmp_path, fake_provider), "--name", "Maintains Context", "--limit", "3", "--wait"
    )
    assert "launched judge run 'Maintains Context'" in text
    assert "[##############################] 100.0% 3/3" in text and "calls/s" in text
    assert "run 'Maintains Context' succeeded" in text
    assert JudgeRun.objects.get().total == 3


@pytest.mark.django_db(transaction=True)
def test_judge_wait_fails_non_zero_when_the_run_fails(tmp_path: Path, fake_provider: FakeProvider, eager: None) -> None:
    fake_provider.script(default={"status": 401})
    dataset = make_dataset(items=1, systems=1)
    with pytest.raises(CommandError, match="status failed"):
        judge(dataset.name, write_config(tmp_path, fake_provider), "--wait")
    assert JudgeRun.objects.get().status == RunStatus.FAILED


def test_judge_without_wait_only_launches(tmp_path: Path, fake_provider: FakeProvider) -> None:
    dataset = make_dataset(items=1, systems=1)
    out = io.StringIO()
    call_command("judge", "--dataset", dataset.name, "--config", write_config(tmp_path, fake_provider), stdout=out)
    assert "1 unit(s)" in out.getvalue()
    assert JudgeRun.objects.get().status == RunStatus.QUEUED


def test_judge_bad_inputs(tmp_path: Path, fake_provider: FakeProvider) -> None:
    dataset = make_dataset(items=1, systems=1)
    with pytest.raises(CommandError, match="no dataset"):
        call_command("judge", "--dataset", "nope", "--config", write_config(tmp_path, fake_provider))
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x", "method": "single", "model": "openai/m", "samples": 0, "api_key": "k"}')
    with pytest.raises(CommandError) as info:
        call_command("judge", "--dataset", dataset.name, "--config", str(bad))
    assert "samples" in str(info.value) and "unknown field" in str(info.value)
    bad.write_text("{not json")
    with pytest.raises(CommandError, match="not valid JSON"):
        call_command("judge", "--dataset", dataset.name, "--config", str(bad))
    with pytest.raises(CommandError, match="aspect"):
        call_command(
            "judge", "--dataset", dataset.name, "--config", write_config(tmp_path, fake_provider, aspects=["nope"])
        )
    assert not JudgeRun.objects.exists()


def test_judge_estimate_prints_the_admin_estimate_and_launches_nothing(
    tmp_path: Path, fake_provider: FakeProvider
) -> None:
    from judging.config import validate_config
    from judging.models import Judge, Judgment
    from judging.run_plans import estimate_run

    dataset = make_dataset(items=3, systems=2, name="estimate Ξ")
    config = write_config(tmp_path, fake_provider)
    out = io.StringIO()
    call_command("judge", "--dataset", dataset.name, "--config", config, "--limit", "4", "--estimate", stdout=out)
    text = out.getvalue()
    expected = estimate_run(dataset=dataset, cfg=validate_config(json.loads(Path(config).read_text())), limit=4)
    assert expected.units == 4 and expected.calls == 4 and expected.cost_usd
    assert "nothing was launched" in text
    assert f"units:             {expected.units}\n" in text
    assert f"calls:             {expected.calls}\n" in text
    assert f"cached calls:      {expected.cached_calls}\n" in text
    assert f"prompt tokens:     {expected.prompt_tokens}\n" in text
    assert f"cost:              ${expected.cost_usd:.4f}\n" in text
    assert not JudgeRun.objects.exists() and not Judge.objects.exists() and not Judgment.objects.exists()
    assert fake_provider.snapshot()["calls"] == 0


def test_judge_estimate_names_config_errors(tmp_path: Path) -> None:
    dataset = make_dataset(items=1, systems=2, name="estimate errors")
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"name": "x", "method": "single", "model": "openai/gpt-4o-mini", "samples": 3}))
    with pytest.raises(CommandError, match="temperature 0"):
        call_command("judge", "--dataset", dataset.name, "--config", str(path), "--estimate")
    assert not JudgeRun.objects.exists()

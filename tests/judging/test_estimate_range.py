"""The launch estimate is a range that holds the bill: its lower end is what a provider with log-probabilities
costs, its upper end what one without them costs (each score estimated from sampled replies). The fake provider
on a real socket counts the calls actually made."""

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from judging import run_plans, services
from judging.config import validate_config
from judging.models import JudgeRun, RunStatus
from tests.fakeprovider import FakeProvider
from tests.judging.factories import judge_config, make_dataset

pytestmark = pytest.mark.django_db

SCORED = {"score": {"min": 1, "max": 5}, "usage": "counted"}
WITH_LOGPROBS = {**SCORED, "logprobs": {"4": 0.6, "5": 0.3, "3": 0.1}}


def config(fake: FakeProvider, **overrides: Any) -> dict[str, Any]:
    return judge_config(fake, name="estimate-range", logprobs=True, max_retries=1) | overrides


def _estimate_and_run(
    fake: FakeProvider, capture: Any, behaviour: dict[str, Any]
) -> tuple[run_plans.Estimate, JudgeRun]:
    fake.script(default=behaviour)
    dataset = make_dataset(items=6, systems=2, aspects=(("overall", 1, 5), ("clarity", 1, 5)))
    estimate = run_plans.estimate_run(dataset=dataset, cfg=validate_config(config(fake)))
    with capture(execute=True):
        run = services.judge_run_launch(dataset=dataset, config=config(fake), launched_by=None)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.notes
    assert run.calls == fake.snapshot()["calls"]  # the run's own count is the provider's
    assert run.estimate == estimate.stored()  # the launch kept the same estimate to compare the bill with
    return estimate, run


def test_the_lower_end_matches_a_provider_with_logprobs(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks: Any
) -> None:
    estimate, run = _estimate_and_run(fake_provider, django_capture_on_commit_callbacks, WITH_LOGPROBS)
    assert run.logprob_fallbacks == 0
    assert (estimate.units, estimate.calls, estimate.calls_max) == (24, 24, 24 * 4)
    assert run.calls == estimate.calls
    assert estimate.cost_usd is not None and estimate.cost_usd_max is not None
    assert 0 < estimate.cost_usd < estimate.cost_usd_max
    # The expected cost is of the order of the bill (token counts are estimated, the replies' lengths guessed).
    assert run.cost_usd <= estimate.cost_usd


def test_the_upper_end_is_within_ten_percent_of_a_provider_without_logprobs(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks: Any
) -> None:
    estimate, run = _estimate_and_run(fake_provider, django_capture_on_commit_callbacks, SCORED)
    assert run.sampled_fallbacks == run.total == 24
    assert abs(estimate.calls_max - run.calls) <= 0.1 * run.calls, (estimate.calls_max, run.calls)
    assert run.calls > 1.1 * estimate.calls  # the lower end alone would have undercounted the bill


def test_re_asks_widen_the_worst_case_and_a_first_reply_at_the_fallback_temperature_counts() -> None:
    from judging.engine.registry import calls_per_unit_range

    base = {"name": "x", "method": "single", "model": "openai/gpt-4o-mini", "logprobs": True}
    assert calls_per_unit_range(validate_config(base)) == (1, 4)
    assert calls_per_unit_range(validate_config({**base, "parse_retries": 2})) == (1, 6)
    assert calls_per_unit_range(validate_config({**base, "temperature": 1.0})) == (1, 3)
    assert calls_per_unit_range(validate_config({**base, "method": "summarize_then_judge"})) == (2, 5)
    assert calls_per_unit_range(validate_config({**base, "logprobs": False})) == (1, 1)
    assert calls_per_unit_range(validate_config({**base, "logprobs": False, "parse_retries": 1})) == (1, 2)


def test_the_command_prints_the_range_and_unknown_prices_as_unknown(
    fake_provider: FakeProvider, tmp_path: Path
) -> None:
    dataset = make_dataset(items=2, systems=2, name="estimate range")
    priced = tmp_path / "priced.json"
    priced.write_text(json.dumps(config(fake_provider)))
    out = io.StringIO()
    call_command("judge", "--dataset", dataset.name, "--config", str(priced), "--estimate", stdout=out)
    text = out.getvalue()
    assert "calls:             4 expected, up to 16 in the worst case\n" in text
    assert "cost:              $" in text and "expected, up to $" in text
    assert "the provider returns none" in text
    unpriced = tmp_path / "unpriced.json"
    unpriced.write_text(json.dumps(config(fake_provider, model="openai/an-unpriced-lab-model")))
    out = io.StringIO()
    call_command("judge", "--dataset", dataset.name, "--config", str(unpriced), "--estimate", stdout=out)
    text = out.getvalue()
    assert "unknown (litellm has no prices for this model)" in text
    assert "$0.0000" not in text


@pytest.mark.django_db(transaction=True)
def test_a_pilot_measures_five_units_and_projects_the_whole_scope(
    fake_provider: FakeProvider, eager: None, tmp_path: Path
) -> None:
    fake_provider.script(default=SCORED)  # no log-probabilities: each unit takes 1 + 3 sampled calls
    dataset = make_dataset(items=6, systems=2, aspects=(("overall", 1, 5), ("clarity", 1, 5)), name="pilot")
    path = tmp_path / "judge.json"
    path.write_text(json.dumps(config(fake_provider)))
    out = io.StringIO()
    call_command("judge", "--dataset", dataset.name, "--config", str(path), "--pilot", "--poll", "0.05", stdout=out)
    text = out.getvalue()
    run = JudgeRun.objects.get(dataset=dataset)
    # Two aspects per answer: three answers give the first six units, the fewest that hold five.
    assert (run.name, run.total, run.status) == ("estimate-range (pilot)", 6, RunStatus.SUCCEEDED)
    assert run.calls == fake_provider.snapshot()["calls"] == 24
    assert "pilot: 6 unit(s), 24 call(s) (4.00 per unit)" in text
    assert "6 unit(s) scored from sampled replies" in text
    assert "whole scope at the pilot's rate: 24 unit(s), about 96 call(s), $" in text
    assert "(estimated calls 24 expected, up to 96 in the worst case)" in text


def test_the_launch_page_and_the_run_page_show_the_range_and_the_bill_beside_it(
    researcher: Any, fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks: Any
) -> None:
    from django.test import Client
    from django.urls import reverse

    fake_provider.script(default=SCORED)
    dataset = make_dataset(items=2, systems=2, owner=researcher)
    saved = services.judge_config_create(raw=config(fake_provider), owner=researcher)
    client = Client()
    client.force_login(researcher)
    launch_url = reverse("admin:judging_dataset_launch", args=[dataset.pk])
    page = client.post(launch_url, {"config": saved.pk}).content.decode()
    assert "4 expected, up to 16 in the worst case" in page
    assert "Prompt language" in page and "judge --pilot" in page
    assert client.get(launch_url).status_code == 200
    assert client.put(launch_url).status_code == 405
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(launch_url, {"config": saved.pk, "confirm": "yes"})
    run = JudgeRun.objects.get(dataset=dataset)
    assert response.status_code == 302 and run.status == RunStatus.SUCCEEDED and run.calls == 16
    page = client.get(reverse("admin:judging_judgerun_change", args=[run.pk])).content.decode()
    assert "Estimated at launch" in page and "4 to 16 calls" in page and "Made: 16 calls." in page
    assert "More than the worst case" not in page
    assert 'data-live-outage role="status" hidden' in page and "js/run_progress.js" in page


def test_running_cost_of_an_unpriced_model_reads_unknown_not_zero(researcher: Any, fake_provider: FakeProvider) -> None:
    from django.test import Client
    from django.urls import reverse

    dataset = make_dataset(items=1, systems=1, owner=researcher)
    run = services.judge_run_launch(
        dataset=dataset, config=config(fake_provider, model="openai/an-unpriced-lab-model"), launched_by=researcher
    )
    assert run.estimate["cost_usd"] is None and run.cost_usd == 0
    client = Client()
    client.force_login(researcher)
    partial = client.get(reverse("admin:judging_judgerun_progress", args=[run.pk])).content.decode()
    assert "$0.0000" not in partial
    assert "cost unknown (litellm has no prices for this model)" in partial

"""The judges area of the research area: every page and action for success, wrong method and no access (anonymous,
annotator, another researcher), the config form's templates, preview and save, the provider statuses, the estimate,
the pilot and the launch, and the live run page with stop and retry."""

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from judging import run_plans, services
from judging.llm.calls import SUPPORTED_PROVIDERS
from judging.models import JudgeConfig, JudgeRun, RunStatus
from judging.research.forms import TEMPLATE_LABELS, research_template
from judging.research.selectors import PROVIDER_NEEDS, Missing, provider_statuses
from tests.conftest import client_for
from tests.fakeprovider import FakeProvider
from tests.judging.factories import make_dataset

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


Refusal = Callable[[str, str], None]


@pytest.fixture
def refused(annotator1: User, other_researcher: User) -> Refusal:
    """Checks that a URL, asked with a method, is refused to anonymous people, an annotator and another researcher."""

    def check(url: str, method: str) -> None:
        denied(url, method, annotator1, other_researcher)

    return check


def fake_config(fake: FakeProvider, **extra: Any) -> dict[str, Any]:
    return {
        **research_template("geval"),
        "name": "area-judge",
        "api_base": fake.base_url,
        "api_key_env": "EVALSITE_FAKE_KEY",
        **extra,
    }


def denied(url: str, method: str, annotator: User, other: User, data: Any = None) -> None:
    """Anonymous people go to the login page, annotators get 403, another researcher's objects are 404."""
    call = "get" if method == "get" else "post"
    assert getattr(client_for(None), call)(url, data or {}).status_code == 302
    assert getattr(client_for(annotator), call)(url, data or {}).status_code == 403
    if other is not None:
        assert getattr(client_for(other), call)(url, data or {}).status_code == 404


def test_every_template_validates_and_geval_scores_from_logprobs() -> None:
    from judging.config import validate_config

    for key in TEMPLATE_LABELS:
        validate_config(research_template(key), check_network=False)
    geval = research_template("geval")
    assert geval["method"] == "single" and geval["logprobs"] is True and geval["logprob_scoring"] == "weighted"
    assert research_template("single")["logprobs"] is False
    assert {research_template(k)["method"] for k in TEMPLATE_LABELS} == {
        "single",
        "reference",
        "pairwise",
        "summarize_then_judge",
        "factscore",
        "metric",
        "error_spans",
    }


def test_judges_home(researcher: User, annotator1: User) -> None:
    dataset = make_dataset(items=1, owner=researcher, name="home set")
    url = reverse("research-judges")
    page = client_for(researcher).get(url)
    assert page.status_code == 200
    text = page.content.decode()
    assert "home set" in text and reverse("research-judge-launch", args=[dataset.pk]) in text
    assert reverse("dashboard-certification", args=[dataset.pk]) in text and "?template=geval" in text
    assert client_for(researcher).post(url).status_code == 405
    denied(url, "get", annotator1, None)  # type: ignore[arg-type]


def test_config_form_from_a_template_shows_the_datasets_aspects_and_saves(
    researcher: User, other_researcher: User, annotator1: User, fake_provider: FakeProvider
) -> None:
    mine = make_dataset(items=2, owner=researcher, aspects=(("fluency", 1, 5), ("accuracy", 0, 3)), name="mine")
    make_dataset(items=1, owner=other_researcher, aspects=(("secret_aspect", 1, 5),), name="theirs")
    url = reverse("research-judge-config-new")
    page = client_for(researcher).get(url, {"template": "geval", "dataset": mine.pk})
    assert page.status_code == 200
    text = page.content.decode()
    assert "&quot;my-geval-judge&quot;" in text and 'value="fluency"' in text and "secret_aspect" not in text
    assert text.count('data-provider="') == len(SUPPORTED_PROVIDERS)
    assert client_for(researcher).put(url).status_code == 405
    denied(url, "get", annotator1, None)  # type: ignore[arg-type]
    raw = fake_config(fake_provider, aspects=["fluency"])
    posted = client_for(researcher).post(url, {"config_json": json.dumps(raw), "dataset": mine.pk})
    saved = JudgeConfig.objects.get(owner=researcher)
    assert posted.status_code == 302
    assert posted["Location"] == reverse("research-judge-launch", args=[mine.pk]) + f"?config={saved.pk}"
    assert saved.config["aspects"] == ["fluency"] and saved.config["logprobs"] is True
    # Editing a saved config stores its next version; someone else's config is not found.
    again = client_for(researcher).get(url, {"config": saved.pk})
    assert again.status_code == 200 and "area-judge" in again.content.decode()
    assert client_for(other_researcher).get(url, {"config": saved.pk}).status_code == 404
    client_for(researcher).post(url, {"config_json": json.dumps({**raw, "samples": 1})})
    assert list(JudgeConfig.objects.filter(owner=researcher).values_list("version", flat=True).order_by("version")) == [
        1,
        2,
    ]
    # Bad JSON and a bad value are named, and nothing is saved.
    broken = client_for(researcher).post(url, {"config_json": "{not json"})
    assert broken.status_code == 400 and "not valid JSON" in broken.content.decode()
    wrong = client_for(researcher).post(url, {"config_json": json.dumps({**raw, "samples": 0})})
    assert wrong.status_code == 400 and "samples" in wrong.content.decode()
    assert JudgeConfig.objects.filter(owner=researcher).count() == 2
    assert client_for(researcher, csrf=True).post(url, {"config_json": json.dumps(raw)}).status_code == 403


def test_preview_shows_the_exact_prompt_of_a_run(
    researcher: User, other_researcher: User, annotator1: User, fake_provider: FakeProvider
) -> None:
    dataset = make_dataset(items=2, owner=researcher, japanese=True)
    theirs = make_dataset(items=1, owner=other_researcher)
    url = reverse("research-judge-config-preview")
    data = {"config_json": json.dumps(fake_config(fake_provider)), "dataset": dataset.pk, "preview_item": 2}
    response = client_for(researcher).post(url, data, headers=HTMX)
    assert response.status_code == 200
    from judging.config import validate_config

    _item, previews = run_plans.prompt_preview(
        dataset=dataset, cfg=validate_config(fake_config(fake_provider)), item_number=2
    )
    text = response.content.decode()
    assert previews and previews[0].messages
    from django.utils.html import escape

    assert all(escape(m["content"]) in text for m in previews[0].messages)
    assert "ja" in text  # the run's prompt language, Japanese for this dataset
    whole = client_for(researcher).post(url, data)
    assert whole.status_code == 200 and "<h1>" in whole.content.decode()
    assert client_for(researcher).get(url).status_code == 405
    denied(url, "post", annotator1, None, data)  # type: ignore[arg-type]
    assert client_for(researcher).post(url, {**data, "dataset": theirs.pk}).status_code == 404


def test_provider_statuses_name_what_is_missing(settings, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    assert set(PROVIDER_NEEDS) == set(SUPPORTED_PROVIDERS)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    settings.JUDGE_API_KEY_HOSTS = {}
    statuses = provider_statuses(None)
    assert [s.provider for s in statuses] == list(SUPPORTED_PROVIDERS)
    by_name = {s.provider: s for s in statuses}
    assert Missing("not_set", "OPENAI_API_KEY") in by_name["openai"].missing
    assert not any(m.kind == "not_allowed" for m in by_name["openai"].missing)  # its own host needs no binding
    bedrock = "https://bedrock-runtime.us-east-1.amazonaws.com"
    assert Missing("not_allowed", "AWS_SECRET_KEY", bedrock) in by_name["bedrock"].missing
    assert Missing("needs_base") in by_name["azure"].missing
    monkeypatch.setenv("OPENAI_API_KEY", "set-for-the-test")
    ready = {s.provider: s for s in provider_statuses({"model": "openai/gpt-4o-mini", "api_key_env": "OPENAI_API_KEY"})}
    assert ready["openai"].ready and ready["openai"].chosen
    unnamed = {s.provider: s for s in provider_statuses({"model": "openai/gpt-4o-mini"})}
    assert unnamed["openai"].missing == (Missing("no_key_variable"),)
    # A key sent to a URL the operator bound it to is allowed; elsewhere it is named as not allowed.
    settings.JUDGE_API_KEY_HOSTS = {"LAB_AZURE_API_KEY": ["https://lab.openai.azure.com"]}
    monkeypatch.setenv("LAB_AZURE_API_KEY", "set-for-the-test")
    azure = {"model": "azure/gpt-4o-mini", "api_key_env": "LAB_AZURE_API_KEY"}
    bound = {s.provider: s for s in provider_statuses({**azure, "api_base": "https://lab.openai.azure.com"})}
    assert bound["azure"].ready
    elsewhere = {s.provider: s for s in provider_statuses({**azure, "api_base": "https://other.openai.azure.com"})}
    assert elsewhere["azure"].missing == (
        Missing("not_allowed", "LAB_AZURE_API_KEY", "https://other.openai.azure.com"),
    )


@pytest.mark.usefixtures("eager")
def test_launch_estimates_pilots_and_launches(
    researcher: User,
    other_researcher: User,
    refused: Refusal,
    fake_provider: FakeProvider,
    django_capture_on_commit_callbacks,
) -> None:  # type: ignore[no-untyped-def]
    dataset = make_dataset(items=4, systems=2, owner=researcher)
    config = services.judge_config_create(raw=fake_config(fake_provider), owner=researcher)
    url = reverse("research-judge-launch", args=[dataset.pk])
    client = client_for(researcher)
    page = client.get(url, {"config": config.pk})
    assert page.status_code == 200 and f'value="{config.pk}" selected' in page.content.decode()
    estimate = client.post(url, {"config": config.pk, "action": "estimate"})
    text = estimate.content.decode()
    assert estimate.status_code == 200 and "Provider calls" in text and "Pilot on a few items" in text
    expected = run_plans.estimate_run(dataset=dataset, cfg=config.judge_settings, launched_by=researcher)
    assert f"{expected.calls} expected, up to {expected.calls_max} in the worst case" in text
    assert not JudgeRun.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        pilot = client.post(url, {"config": config.pk, "action": "pilot"})
    run = JudgeRun.objects.get()
    assert pilot.status_code == 302 and pilot["Location"] == reverse("research-judge-run", args=[run.pk])
    assert run.name == "area-judge pilot" and run_plans.PILOT_UNITS <= run.total < 8
    with django_capture_on_commit_callbacks(execute=True):
        whole = client.post(url, {"config": config.pk, "action": "launch"})
    assert whole.status_code == 302
    full = JudgeRun.objects.exclude(pk=run.pk).get()
    assert full.total == 8 and full.status == RunStatus.SUCCEEDED
    assert client.put(url).status_code == 405
    refused(url, "get")
    their_config = services.judge_config_create(raw=fake_config(fake_provider), owner=other_researcher)
    refused = client.post(url, {"config": their_config.pk, "action": "launch"})
    assert refused.status_code == 400 and JudgeRun.objects.count() == 2
    assert client_for(researcher, csrf=True).post(url, {"config": config.pk, "action": "launch"}).status_code == 403


@pytest.mark.usefixtures("eager")
def test_runs_list_and_live_page(
    researcher: User, refused: Refusal, fake_provider: FakeProvider, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    dataset = make_dataset(items=1, systems=2, owner=researcher)
    with django_capture_on_commit_callbacks(execute=True):
        run = services.judge_run_launch(dataset=dataset, config=fake_config(fake_provider), launched_by=researcher)
    run.refresh_from_db()
    runs_url = reverse("research-judge-runs", args=[dataset.pk])
    listing = client_for(researcher).get(runs_url)
    assert listing.status_code == 200
    assert reverse("research-judge-run", args=[run.pk]) in listing.content.decode()
    assert client_for(researcher).post(runs_url).status_code == 405
    refused(runs_url, "get")
    page_url = reverse("research-judge-run", args=[run.pk])
    page = client_for(researcher).get(page_url)
    text = page.content.decode()
    assert page.status_code == 200 and "<progress" in text and "Estimated at launch" in text
    assert run.version is not None and run.version.short in text
    for name in ("dashboard-judges", "dashboard-certification", "dashboard-calibrate"):
        assert reverse(name, args=[dataset.pk]) in text
    assert "/admin/" not in text
    assert client_for(researcher).post(page_url).status_code == 405
    refused(page_url, "get")
    progress_url = reverse("research-judge-run-progress", args=[run.pk])
    assert client_for(researcher).get(progress_url).status_code == 200
    assert client_for(researcher).get(progress_url, headers=HTMX).status_code == 286
    assert client_for(researcher).post(progress_url).status_code == 405
    refused(progress_url, "get")


@pytest.mark.usefixtures("eager")
def test_stop_and_retry(
    researcher: User, refused: Refusal, fake_provider: FakeProvider, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    dataset = make_dataset(items=1, systems=1, owner=researcher)
    run = services.judge_run_launch(dataset=dataset, config=fake_config(fake_provider), launched_by=researcher)
    page = client_for(researcher).get(reverse("research-judge-run", args=[run.pk])).content.decode()
    assert 'hx-trigger="every 1s"' in page and "Stop the run" in page
    assert reverse("research-judge-run-cancel", args=[run.pk]) in page
    stop = reverse("research-judge-run-cancel", args=[run.pk])
    assert client_for(researcher).get(stop).status_code == 405
    assert client_for(researcher, csrf=True).post(stop).status_code == 403
    refused(stop, "post")
    assert JudgeRun.objects.get(pk=run.pk).status == RunStatus.QUEUED
    assert client_for(researcher).post(stop).status_code == 302
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    retry = reverse("research-judge-run-retry", args=[run.pk])
    assert client_for(researcher).get(retry).status_code == 405
    refused(retry, "post")
    with django_capture_on_commit_callbacks(execute=True):
        assert client_for(researcher).post(retry).status_code == 302
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED

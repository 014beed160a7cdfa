from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from judging import services
from judging.models import JudgeConfig, JudgeRun, RunStatus
from tests.fakeprovider import FakeProvider
from tests.judging.factories import make_dataset

pytestmark = pytest.mark.django_db


def client_for(user: User | None, csrf: bool = False) -> APIClient:
    client = APIClient(enforce_csrf_checks=csrf)
    if user is not None:
        client.force_login(user)
    return client


def cfg(fake: FakeProvider | None = None, **extra: Any) -> dict[str, Any]:
    values = {"name": "api-judge", "method": "single", "model": "openai/gpt-4o-mini"}
    if fake is not None:
        values["api_base"] = fake.base_url
    values.update(extra)
    return values


def test_config_create_validates_and_versions(researcher: User, fake_provider: FakeProvider) -> None:
    client = client_for(researcher)
    first = client.post("/api/judging/configs/new/", {"config": cfg(fake_provider)}, format="json")
    second = client.post("/api/judging/configs/new/", {"config": cfg(fake_provider)}, format="json")
    assert first.status_code == 201 and second.status_code == 201
    assert (first.json()["version"], second.json()["version"]) == (1, 2)
    listed = client.get("/api/judging/configs/").json()
    assert [c["version"] for c in listed] == [2, 1]


def test_config_with_a_key_or_private_url_is_rejected(researcher: User, settings) -> None:  # type: ignore[no-untyped-def]
    settings.JUDGE_API_BASE_ALLOWLIST = []
    client = client_for(researcher)
    with_key = client.post("/api/judging/configs/new/", {"config": cfg(api_key="sk-live-123")}, format="json")
    assert with_key.status_code == 400 and "unknown field" in with_key.json()["errors"][0]
    private = client.post(
        "/api/judging/configs/new/", {"config": cfg(api_base="http://169.254.169.254/v1")}, format="json"
    )
    assert private.status_code == 400
    assert not JudgeConfig.objects.exists()


def test_wrong_method_and_no_access(researcher: User, outsider: User) -> None:
    assert client_for(researcher).get("/api/judging/configs/new/").status_code == 405
    assert client_for(researcher).post("/api/judging/runs/", {}).status_code == 405
    assert client_for(outsider).get("/api/judging/runs/").status_code == 403
    assert client_for(None).get("/api/judging/configs/").status_code in (401, 403)


def test_launch_estimate_detail_and_scoping(
    researcher: User, other_researcher: User, fake_provider: FakeProvider, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("EVALSITE_FAKE_KEY", "sk-never-shown-4411")
    mine = make_dataset(items=2, systems=2, owner=researcher)
    theirs = make_dataset(items=1, systems=1, owner=other_researcher)
    client = client_for(researcher)
    config = cfg(fake_provider, api_key_env="EVALSITE_FAKE_KEY")

    estimate = client.post("/api/judging/runs/estimate/", {"dataset": mine.pk, "config": config}, format="json")
    assert estimate.status_code == 200 and estimate.json()["calls"] == 4

    launched = client.post(
        "/api/judging/runs/launch/", {"dataset": mine.pk, "config": config, "limit": 3}, format="json"
    )
    assert launched.status_code == 201
    body = launched.json()
    assert body["status"] == RunStatus.QUEUED and body["total"] == 3 and body["name"] == "api-judge"
    assert "sk-never-shown-4411" not in launched.content.decode()

    foreign = client.post("/api/judging/runs/launch/", {"dataset": theirs.pk, "config": config}, format="json")
    assert foreign.status_code == 404
    their_config = services.judge_config_create(raw=cfg(fake_provider), owner=other_researcher)
    stolen = client.post("/api/judging/runs/launch/", {"dataset": mine.pk, "config_id": their_config.pk}, format="json")
    assert stolen.status_code == 404
    both = client.post(
        "/api/judging/runs/launch/",
        {"dataset": mine.pk, "config": config, "config_id": their_config.pk},
        format="json",
    )
    assert both.status_code == 400

    run_id = body["id"]
    assert client.get(f"/api/judging/runs/{run_id}/").status_code == 200
    assert client_for(other_researcher).get(f"/api/judging/runs/{run_id}/").status_code == 404
    assert [r["id"] for r in client.get("/api/judging/runs/").json()] == [run_id]
    judgments = client.get(f"/api/judging/runs/{run_id}/judgments/?status=pending").json()
    assert len(judgments) == 3 and judgments[0]["status"] == "pending"
    assert client.get(f"/api/judging/runs/{run_id}/judgments/?status=bogus").status_code == 400


def test_cancel_and_retry(researcher: User, other_researcher: User, fake_provider: FakeProvider) -> None:
    dataset = make_dataset(items=1, systems=1, owner=researcher)
    run = services.judge_run_launch(dataset=dataset, config=cfg(fake_provider), launched_by=researcher)
    client = client_for(researcher)
    assert client.get(f"/api/judging/runs/{run.pk}/cancel/").status_code == 405
    assert client_for(other_researcher).post(f"/api/judging/runs/{run.pk}/cancel/").status_code == 404
    cancelled = client.post(f"/api/judging/runs/{run.pk}/cancel/")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == RunStatus.CANCELLED
    retried = client.post(f"/api/judging/runs/{run.pk}/retry-failed/")
    assert retried.status_code == 200 and retried.json()["status"] == RunStatus.QUEUED


def test_post_without_csrf_token_is_refused(researcher: User, fake_provider: FakeProvider) -> None:
    dataset = make_dataset(items=1, systems=1, owner=researcher)
    run = services.judge_run_launch(dataset=dataset, config=cfg(fake_provider), launched_by=researcher)
    response = client_for(researcher, csrf=True).post(f"/api/judging/runs/{run.pk}/cancel/")
    assert response.status_code == 403
    assert JudgeRun.objects.get(pk=run.pk).status == RunStatus.QUEUED


def test_over_posting_is_ignored(researcher: User, fake_provider: FakeProvider) -> None:
    dataset = make_dataset(items=1, systems=1, owner=researcher)
    response = client_for(researcher).post(
        "/api/judging/runs/launch/",
        {"dataset": dataset.pk, "config": cfg(fake_provider), "status": "succeeded", "done": 99, "launched_by": 999},
        format="json",
    )
    assert response.status_code == 201
    run = JudgeRun.objects.get(pk=response.json()["id"])
    assert run.status == RunStatus.QUEUED and run.done == 0 and run.launched_by == researcher

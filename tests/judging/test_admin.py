from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from judging import services
from judging.models import JudgeRun, Judgment, RunStatus
from tests.conftest import client_for
from tests.fakeprovider import FakeProvider
from tests.judging.factories import make_dataset

pytestmark = pytest.mark.django_db


def cfg(fake: FakeProvider, **extra: Any) -> dict[str, Any]:
    return {
        "name": "admin-judge",
        "method": "single",
        "model": "openai/gpt-4o-mini",
        "api_base": fake.base_url,
        **extra,
    }


def test_dataset_action_leads_to_the_launch_page(researcher: User, fake_provider: FakeProvider) -> None:
    researcher.user_permissions.add(Permission.objects.get(codename="view_dataset"))
    dataset = make_dataset(items=1, systems=1, owner=researcher)
    response = client_for(researcher).post(
        reverse("admin:annotations_dataset_changelist"),
        {"action": "launch_judge_run", "_selected_action": [dataset.pk]},
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:judging_dataset_launch", args=[dataset.pk])


def test_launch_page_estimates_then_launches(
    researcher: User, fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    dataset = make_dataset(items=2, systems=2, owner=researcher)
    config = services.judge_config_create(raw=cfg(fake_provider), owner=researcher)
    client = client_for(researcher)
    url = reverse("admin:judging_dataset_launch", args=[dataset.pk])
    page = client.get(url)
    assert page.status_code == 200 and b"admin-judge v1" in page.content
    preview = client.post(url, {"config": config.pk, "limit": 3})
    assert preview.status_code == 200
    assert b"Provider calls" in preview.content and b"Confirm and launch" in preview.content
    assert not JudgeRun.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        launched = client.post(url, {"config": config.pk, "limit": 3, "confirm": "yes", "name": "first try"})
    run = JudgeRun.objects.get()
    assert launched.status_code == 302 and launched["Location"] == reverse(
        "admin:judging_judgerun_change", args=[run.pk]
    )
    assert run.name == "first try" and run.total == 3 and run.launched_by == researcher
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED


def test_launch_page_access(
    researcher: User, other_researcher: User, outsider: User, fake_provider: FakeProvider
) -> None:
    dataset = make_dataset(items=1, systems=1, owner=researcher)
    url = reverse("admin:judging_dataset_launch", args=[dataset.pk])
    assert client_for(other_researcher).get(url).status_code == 404
    assert client_for(outsider).get(url).status_code == 302  # admin login
    assert Client().get(url).status_code == 302
    assert client_for(researcher).put(url).status_code == 405
    their_config = services.judge_config_create(raw=cfg(fake_provider), owner=other_researcher)
    response = client_for(researcher).post(url, {"config": their_config.pk})
    assert response.status_code == 200 and b"Select a valid choice" in response.content


def _finished_run(researcher: User, fake: FakeProvider, capture, content: str = "Score: 4") -> JudgeRun:  # type: ignore[no-untyped-def]
    fake.script(default={"content": content})
    dataset = make_dataset(items=1, systems=2, owner=researcher)
    with capture(execute=True):
        run = services.judge_run_launch(dataset=dataset, config=cfg(fake), launched_by=researcher)
    run.refresh_from_db()
    return run


@pytest.mark.usefixtures("eager")
def test_run_page_and_progress_partial(
    researcher: User, other_researcher: User, fake_provider: FakeProvider, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    run = _finished_run(researcher, fake_provider, django_capture_on_commit_callbacks)
    client = client_for(researcher)
    page = client.get(reverse("admin:judging_judgerun_change", args=[run.pk]))
    assert page.status_code == 200
    assert b"<progress" in page.content and b"Cost so far" in page.content
    assert b"Retry failed" not in page.content and b"Cancel run" not in page.content  # succeeded, nothing failed
    # the run page leads back to its dataset's overview and to the comparison with the humans
    assert reverse("dashboard-overview", args=[run.dataset_id]).encode() in page.content
    assert reverse("dashboard-judges", args=[run.dataset_id]).encode() in page.content
    assert b"hx-trigger" not in page.content  # finished: nothing to poll
    assert client.post(reverse("admin:judging_judgerun_change", args=[run.pk])).status_code == 405
    progress_url = reverse("admin:judging_judgerun_progress", args=[run.pk])
    assert client.get(progress_url).status_code == 200
    assert client.get(progress_url, headers={"HX-Request": "true"}).status_code == 286
    assert client.post(progress_url).status_code == 405
    assert client_for(other_researcher).get(progress_url).status_code == 404
    assert client_for(other_researcher).get(reverse("admin:judging_judgerun_change", args=[run.pk])).status_code == 404


def test_active_run_polls(researcher: User, fake_provider: FakeProvider) -> None:
    dataset = make_dataset(items=1, systems=1, owner=researcher)
    run = services.judge_run_launch(dataset=dataset, config=cfg(fake_provider), launched_by=researcher)
    client = client_for(researcher)
    page = client.get(reverse("admin:judging_judgerun_change", args=[run.pk]))
    assert b'hx-trigger="every 1s"' in page.content and b"Cancel run" in page.content
    partial = client.get(reverse("admin:judging_judgerun_progress", args=[run.pk]), headers={"HX-Request": "true"})
    assert partial.status_code == 200


@pytest.mark.usefixtures("eager")
def test_cancel_and_retry_buttons(
    researcher: User, other_researcher: User, fake_provider: FakeProvider, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    dataset = make_dataset(items=1, systems=1, owner=researcher)
    run = services.judge_run_launch(dataset=dataset, config=cfg(fake_provider), launched_by=researcher)
    cancel_url = reverse("admin:judging_judgerun_cancel", args=[run.pk])
    assert client_for(researcher).get(cancel_url).status_code == 405
    assert client_for(researcher, csrf=True).post(cancel_url).status_code == 403
    assert client_for(other_researcher).post(cancel_url).status_code == 404
    assert client_for(researcher).post(cancel_url).status_code == 302
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    retry_url = reverse("admin:judging_judgerun_retry_failed", args=[run.pk])
    with django_capture_on_commit_callbacks(execute=True):
        assert client_for(researcher).post(retry_url).status_code == 302
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED


def test_judge_output_is_escaped_on_the_run_page(
    researcher: User, fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    hostile = "<script>alert(1)</script><img src=x onerror=alert(2)> {{7*7}}"
    run = _finished_run(researcher, fake_provider, django_capture_on_commit_callbacks, content=hostile)
    assert Judgment.objects.filter(run=run, raw_output=hostile).exists()
    page = client_for(researcher).get(reverse("admin:judging_judgerun_change", args=[run.pk])).content.decode()
    assert "<script>alert(1)" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_config_admin_saves_new_versions(researcher: User, fake_provider: FakeProvider) -> None:
    client = client_for(researcher)
    import json

    add = client.post(reverse("admin:judging_judgeconfig_add"), {"config_json": json.dumps(cfg(fake_provider))})
    assert add.status_code == 302
    bad = client.post(reverse("admin:judging_judgeconfig_add"), {"config_json": '{"name": "x", "api_key": "k"}'})
    assert bad.status_code == 200 and b"unknown field" in bad.content
    from judging.models import JudgeConfig

    first = JudgeConfig.objects.get()
    edited = client.post(
        reverse("admin:judging_judgeconfig_change", args=[first.pk]),
        {"config_json": json.dumps(cfg(fake_provider, samples=3, temperature=0.7))},
    )
    assert edited.status_code == 302
    versions = list(JudgeConfig.objects.order_by("version").values_list("version", "config__samples"))
    assert versions == [(1, 1), (2, 3)]


def test_changelists_are_scoped(researcher: User, other_researcher: User, fake_provider: FakeProvider) -> None:
    mine = make_dataset(items=1, systems=1, owner=researcher)
    theirs = make_dataset(items=1, systems=1, owner=other_researcher)
    services.judge_run_launch(dataset=mine, config=cfg(fake_provider, name="mine-run"), launched_by=researcher)
    services.judge_run_launch(dataset=theirs, config=cfg(fake_provider, name="their-run"), launched_by=None)
    services.judge_config_create(raw=cfg(fake_provider, name="their-config"), owner=other_researcher)
    services.judge_config_create(raw=cfg(fake_provider, name="my-config"), owner=researcher)
    client = client_for(researcher)
    runs = client.get(reverse("admin:judging_judgerun_changelist")).content.decode()
    assert "mine-run" in runs and "their-run" not in runs
    configs = client.get(reverse("admin:judging_judgeconfig_changelist")).content.decode()
    assert "my-config" in configs and "their-config" not in configs and "gpt-4o-mini" in configs


def test_the_run_list_shows_parse_errors(
    researcher: User, fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    fake_provider.script(
        default={"content": "No idea."},
        rules=[{"match": "Answer 0 from system 0", "behaviour": {"content": "Score: 4"}}],
    )
    dataset = make_dataset(items=3, systems=1, owner=researcher)
    with django_capture_on_commit_callbacks(execute=True):
        run = services.judge_run_launch(dataset=dataset, config=cfg(fake_provider), launched_by=researcher)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and run.parse_errors == 2
    page = client_for(researcher).get(reverse("admin:judging_judgerun_changelist")).content.decode()
    assert "Parse errors" in page and '<td class="field-parse_errors">2</td>' in page

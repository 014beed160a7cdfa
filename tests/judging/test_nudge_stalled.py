"""Runs whose task was lost are woken by a periodic task, never by a page that shows them."""

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse

from judging import services, tasks
from judging.models import JudgeRun
from tests.factories import DatasetFactory, ResponseFactory, TurnFactory
from tests.judging.stalled import make_stalled_runs, recording_enqueued_tasks

pytestmark = pytest.mark.django_db


@pytest.fixture
def stalled():  # type: ignore[no-untyped-def]
    dataset = DatasetFactory()
    responses = [ResponseFactory(turn=TurnFactory(item__dataset=dataset)) for _ in range(2)]
    return make_stalled_runs(dataset, responses)


def test_the_periodic_task_wakes_each_silent_run_once(stalled, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    with recording_enqueued_tasks(monkeypatch) as enqueued:
        assert tasks.judge_runs_nudge_stalled() == 2
        assert sorted(enqueued.calls) == sorted(
            [("judging.judge_run_work", (stalled.running.pk,)), ("judging.judge_run_start", (stalled.queued.pk,))]
        )
        # Run twice (two schedulers, or the next beat before the task ran): the heartbeat it took says "woken".
        assert tasks.judge_runs_nudge_stalled() == 0
        assert len(enqueued.calls) == 2
    for run in (stalled.running, stalled.queued):
        before = run.heartbeat_at
        run.refresh_from_db()
        assert run.heartbeat_at is not None and (before is None or run.heartbeat_at > before)
    lively = JudgeRun.objects.get(pk=stalled.lively.pk)
    assert lively.heartbeat_at == stalled.lively.heartbeat_at


def test_a_run_silent_for_less_than_three_leases_is_left_alone(stalled, monkeypatch, settings) -> None:  # type: ignore[no-untyped-def]
    settings.JUDGE_LEASE_S = 300  # three leases: fifteen minutes, more than the ten the runs have been silent
    with recording_enqueued_tasks(monkeypatch) as enqueued:
        assert services.judge_runs_nudge_stalled() == 0
    assert enqueued.calls == []


def test_resume_after_a_worker_start_wakes_every_active_run(stalled, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    with recording_enqueued_tasks(monkeypatch) as enqueued:
        assert tasks.judge_runs_resume() == 3
    assert sorted(enqueued.calls) == sorted(
        [
            ("judging.judge_run_work", (stalled.running.pk,)),
            ("judging.judge_run_start", (stalled.queued.pk,)),
            ("judging.judge_run_work", (stalled.lively.pk,)),
        ]
    )


def test_the_admin_run_page_only_reads(stalled, monkeypatch, researcher) -> None:  # type: ignore[no-untyped-def]
    researcher.is_superuser = True
    researcher.save()
    client = Client()
    client.force_login(researcher)
    with recording_enqueued_tasks(monkeypatch) as enqueued:
        page = client.get(reverse("admin:judging_judgerun_change", args=[stalled.running.pk]))
    assert page.status_code == 200
    assert enqueued.calls == []
    run = JudgeRun.objects.get(pk=stalled.running.pk)
    assert run.heartbeat_at == stalled.running.heartbeat_at


def test_the_worker_schedules_the_upkeep() -> None:
    from evalsite.celery import app

    app.loader.import_default_modules()
    scheduled = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert scheduled == {
        "judging.judge_runs_nudge_stalled",
        "judging.judge_runs_settle_ended",
        "judging.factscore_results_project_pending",
        "judging.drift_checks_start",
        "judging.evaluations_reclaim_stale",
    }
    assert scheduled <= set(app.tasks)

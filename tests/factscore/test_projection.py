"""FActScore results are projected when the engine writes a run's scores, never by a page that reads them.

A failed projection keeps the judgments and scores, is recorded on the run and is retried by the periodic task; a
run finished before projection happened on write (an old database) is projected by the same task, and until then
every report says its results are being prepared.
"""

from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from judging import tasks
from judging.factscore import results
from judging.factscore.models import AtomicFact, FactAnswer
from judging.factscore.results import factscore_runs_unprojected
from judging.factscore.selectors import factscore_report, factscore_results_pending
from judging.models import JudgeRun, JudgeScore, Judgment, RunStatus
from tests.factscore.factories import factscore_config, make_fact_dataset, script_world
from tests.judging.factories import launch

pytestmark = pytest.mark.django_db


def forget_projection(run: JudgeRun) -> None:
    """The run as a database from before projection on write holds it: judgments, no facts, never projected."""
    FactAnswer.objects.filter(run=run).delete()
    JudgeRun.objects.filter(pk=run.pk).update(results_projected_at=None, results_error="")


def test_a_finished_run_is_projected_without_anyone_reading_it(  # type: ignore[no-untyped-def]
    world, world_provider, eager, django_capture_on_commit_callbacks
):
    script_world(world)
    run = launch(make_fact_dataset(), factscore_config(world_provider), django_capture_on_commit_callbacks)
    assert run.status == RunStatus.SUCCEEDED
    assert run.results_projected_at is not None and run.results_error == ""
    assert FactAnswer.objects.filter(run=run).count() == 6
    assert AtomicFact.objects.filter(answer__run=run).count() == 9
    assert not factscore_results_pending(run)
    assert factscore_report(run)["results_pending"] is False
    assert results.factscore_project(run=run) == 0  # nothing left for a reader to project


def test_a_failed_projection_keeps_the_judgments_is_recorded_and_retried(  # type: ignore[no-untyped-def]
    world, world_provider, eager, django_capture_on_commit_callbacks, monkeypatch
):
    script_world(world)
    real_project = results.factscore_project

    def broken(*, run: JudgeRun) -> int:
        real_project(run=run)  # everything it wrote goes with the failure
        raise RuntimeError("disk full")

    monkeypatch.setattr(results, "factscore_project", broken)
    run = launch(make_fact_dataset(), factscore_config(world_provider), django_capture_on_commit_callbacks)
    assert run.status == RunStatus.SUCCEEDED
    assert run.results_error == "RuntimeError: disk full"
    assert Judgment.objects.filter(run=run, status="done").count() == 6
    assert JudgeScore.objects.filter(judge=run.judge, aspect_name="factscore").count() == 5
    assert not FactAnswer.objects.filter(run=run).exists()
    assert factscore_results_pending(run)
    assert list(factscore_runs_unprojected().values_list("pk", flat=True)) == [run.pk]

    # Still broken: the periodic task tries, records again, and does not pretend.
    assert tasks.factscore_results_project_pending() == 0
    run.refresh_from_db()
    assert run.results_error == "RuntimeError: disk full"

    monkeypatch.setattr(results, "factscore_project", real_project)
    assert tasks.factscore_results_project_pending() == 1
    run.refresh_from_db()
    assert run.results_error == "" and run.results_projected_at is not None
    assert FactAnswer.objects.filter(run=run).count() == 6
    assert not factscore_results_pending(run)
    assert tasks.factscore_results_project_pending() == 0  # safe to run again: nothing to do


def test_an_unprojected_run_is_reported_as_being_prepared_and_projected_by_the_periodic_task(  # type: ignore[no-untyped-def]
    world, world_provider, eager, django_capture_on_commit_callbacks, researcher
):
    script_world(world)
    run = launch(
        make_fact_dataset(owner=researcher), factscore_config(world_provider), django_capture_on_commit_callbacks
    )
    forget_projection(run)
    client = Client()
    client.force_login(researcher)

    page = client.get(reverse("factscore:report", args=[run.pk]))
    assert page.status_code == 200
    assert b"data-results-pending" in page.content and b"being prepared" in page.content
    api = client.get(reverse("factscore:api-report", args=[run.pk]))
    assert api.status_code == 200 and api.json()["results_pending"] is True
    out = StringIO()
    call_command("factscore_report", dataset=run.dataset.name, judge=run.judge.name, stdout=out)
    assert "still preparing" in out.getvalue()
    assert not FactAnswer.objects.filter(run=run).exists()  # none of the reads projected

    assert tasks.factscore_results_project_pending() == 1
    assert FactAnswer.objects.filter(run=run).count() == 6
    page = client.get(reverse("factscore:report", args=[run.pk]))
    assert b"data-results-pending" not in page.content
    assert client.get(reverse("factscore:api-report", args=[run.pk])).json()["results_pending"] is False


def test_a_judgment_finished_after_the_projection_makes_the_run_pending_again(  # type: ignore[no-untyped-def]
    world, world_provider, eager, django_capture_on_commit_callbacks
):
    script_world(world)
    run = launch(make_fact_dataset(), factscore_config(world_provider), django_capture_on_commit_callbacks)
    assert not factscore_results_pending(run)
    run.refresh_from_db()
    Judgment.objects.filter(run=run).update(finished_at=run.results_projected_at)
    assert factscore_results_pending(run)
    assert results.factscore_results_project(run_id=run.pk)
    assert not factscore_results_pending(run)


def test_active_runs_are_left_to_the_engine(  # type: ignore[no-untyped-def]
    world, world_provider, eager, django_capture_on_commit_callbacks
):
    script_world(world)
    run = launch(make_fact_dataset(), factscore_config(world_provider), django_capture_on_commit_callbacks)
    forget_projection(run)
    JudgeRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
    assert tasks.factscore_results_project_pending() == 0
    assert not FactAnswer.objects.filter(run=run).exists()

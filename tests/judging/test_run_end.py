"""A run ends in one step: it reads as ended only once its scores are written and its version is fixed, a run stopped
half-way is finished again, an ended run left without them is settled by the periodic upkeep, a leftover work task
of a settled run writes nothing, and the database's score check reads one unit's judgments per score (Postgres and
SQLite)."""

import importlib
import io
import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotations.models import Response
from judging import services
from judging.models import JudgeRun, JudgeScore, Judgment, JudgmentStatus, RunStatus
from tests.fakeprovider import FakeProvider
from tests.judging.factories import judge_config, make_dataset

score_check = importlib.import_module("judging.migrations.0022_judge_score_check_uses_the_unit_index")

SNAPSHOT = "gpt-4o-mini-2024-07-18"


def config(fake: FakeProvider, **overrides: Any) -> dict[str, Any]:
    return judge_config(fake, name="end-judge", max_concurrency=4, max_retries=2) | overrides


def _execute(*statements: str) -> None:
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def _install_trigger(name: str, table: str, timing: str, when: str, body_pg: str, body_sqlite: str) -> None:
    """A row trigger written for the test (a witness or a fault); removed by `_drop_trigger`."""
    if connection.vendor == "postgresql":
        _execute(
            f"CREATE FUNCTION {name}() RETURNS trigger AS $$ BEGIN {body_pg} RETURN NEW; END; $$ LANGUAGE plpgsql",
            f"CREATE TRIGGER {name} {timing} ON {table} FOR EACH ROW WHEN ({when}) EXECUTE FUNCTION {name}()",
        )
    else:
        _execute(f"CREATE TRIGGER {name} {timing} ON {table} FOR EACH ROW WHEN {when} BEGIN {body_sqlite} END")


def _drop_trigger(name: str, table: str) -> None:
    if connection.vendor == "postgresql":
        _execute(f"DROP TRIGGER IF EXISTS {name} ON {table}", f"DROP FUNCTION IF EXISTS {name}()")
    else:
        _execute(f"DROP TRIGGER IF EXISTS {name}")


@pytest.fixture
def end_witness() -> Iterator[Callable[[], list[tuple[int, int, bool]]]]:
    """What the database held at the moment a run's status became succeeded: (run, its scores, version fixed).

    A trigger on the run's row writes it down inside the very statement that changes the status, so the record does
    not depend on when anyone looks."""
    _execute("CREATE TABLE test_run_end_seen (run_id integer, scores integer, version_fixed boolean)")
    seen = """INSERT INTO test_run_end_seen SELECT NEW.id,
        (SELECT COUNT(*) FROM judging_judgescore s WHERE s.judge_id = NEW.judge_id),
        NEW.version_id IS NOT NULL OR NEW.version_problem <> '';"""
    _install_trigger(
        "test_run_end_seen",
        "judging_judgerun",
        "AFTER UPDATE",
        "NEW.status = 'succeeded' AND OLD.status <> 'succeeded'",
        seen,
        seen,
    )

    def witnessed() -> list[tuple[int, int, bool]]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT run_id, scores, version_fixed FROM test_run_end_seen ORDER BY run_id")
            return [(run_id, scores, bool(fixed)) for run_id, scores, fixed in cursor.fetchall()]

    try:
        yield witnessed
    finally:
        _drop_trigger("test_run_end_seen", "judging_judgerun")
        _execute("DROP TABLE IF EXISTS test_run_end_seen")


def _write_config(tmp_path: Path, fake: FakeProvider, **overrides: Any) -> str:
    path = tmp_path / "judge.json"
    path.write_text(json.dumps(config(fake, **overrides)))
    return str(path)


@pytest.mark.django_db(transaction=True)  # --wait needs the launch committed (and its task sent) at once
def test_judge_wait_reports_succeeded_only_with_the_scores_and_version_written(
    tmp_path: Path,
    fake_provider: FakeProvider,
    eager: None,
    end_witness: Callable[[], list[tuple[int, int, bool]]],
) -> None:
    fake_provider.script(default={"served_model": SNAPSHOT})
    dataset = make_dataset(items=3, systems=2, aspects=(("overall", 1, 5), ("fluency", 1, 5)))
    out = io.StringIO()
    call_command(
        "judge", "--dataset", dataset.name, "--config", _write_config(tmp_path, fake_provider), "--wait", stdout=out
    )
    run = JudgeRun.objects.get()
    assert "run 'end-judge' succeeded" in out.getvalue()
    # Six answers, two aspects: at the moment the status changed and whenever the command's report is read after.
    assert JudgeScore.objects.filter(judge=run.judge).count() == 12
    assert run.version is not None and run.version.provider_model == SNAPSHOT
    assert end_witness() == [(run.pk, 12, True)]


def _finished_but_not_ended(fake: FakeProvider) -> JudgeRun:
    """A running run all of whose units are done, as its slices leave it just before it is finalized."""
    dataset = make_dataset(items=2, systems=2)
    run = services.judge_run_launch(dataset=dataset, config=config(fake), launched_by=None)  # start not sent
    JudgeRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, started_at=timezone.now())
    for judgment in Judgment.objects.filter(run=run):
        judgment.status = JudgmentStatus.DONE
        judgment.score = float(1 + judgment.response_id % 5)
        judgment.provider_model = SNAPSHOT
        judgment.save()
    return JudgeRun.objects.get(pk=run.pk)


@pytest.mark.django_db
def test_a_run_whose_score_write_fails_is_not_left_ended_and_the_upkeep_finishes_it(
    fake_provider: FakeProvider, eager: None
) -> None:
    run = _finished_but_not_ended(fake_provider)
    # The database refuses the score write, as it would for a worker that lost it between the steps of the end.
    _install_trigger(
        "test_score_write_fails",
        "judging_judgescore",
        "BEFORE INSERT",
        "NEW.value IS NOT NULL",
        "RAISE EXCEPTION 'the database went away';",
        "SELECT RAISE(ABORT, 'the database went away');",
    )
    with pytest.raises(DatabaseError, match="the database went away"):
        services.judge_run_finalize(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and run.finished_at is None
    assert not JudgeScore.objects.filter(judge=run.judge).exists() and run.version is None

    _drop_trigger("test_score_write_fails", "judging_judgescore")
    JudgeRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    assert services.judge_runs_nudge_stalled() == 1
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert JudgeScore.objects.filter(judge=run.judge).count() == 4
    assert run.version is not None and run.version.provider_model == SNAPSHOT


@pytest.mark.django_db
def test_the_upkeep_settles_an_ended_run_left_without_scores_and_version(fake_provider: FakeProvider) -> None:
    run = _finished_but_not_ended(fake_provider)
    # What the end in several steps left when its worker stopped after the status: succeeded, nothing else.
    JudgeRun.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED, finished_at=timezone.now(), done=4)
    # A run stopped at its budget whose slice still holds a unit is left to that slice.
    held = _finished_but_not_ended(fake_provider)
    JudgeRun.objects.filter(pk=held.pk).update(status=RunStatus.STOPPED_BUDGET, finished_at=timezone.now())
    held_unit = Judgment.objects.filter(run=held).order_by("pk")[:1]
    Judgment.objects.filter(pk__in=held_unit).update(
        status=JudgmentStatus.CLAIMED, claim_token="slice", lease_until=timezone.now() + timedelta(hours=1)
    )

    assert services.judge_runs_settle_ended() == 1
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and run.is_settled
    assert run.version is not None and run.version.provider_model == SNAPSHOT
    expected = {
        response_id: float(1 + response_id % 5)
        for response_id in Response.objects.filter(turn__item__dataset=run.dataset).values_list("pk", flat=True)
    }
    assert dict(JudgeScore.objects.filter(judge=run.judge).values_list("response_id", "value")) == expected
    held.refresh_from_db()
    assert not held.is_settled and not JudgeScore.objects.filter(judge=held.judge).exists()
    # Safe twice: a settled run is not written again.
    assert services.judge_runs_settle_ended() == 0


@pytest.mark.django_db
def test_a_leftover_work_task_of_a_finished_run_writes_nothing(
    fake_provider: FakeProvider, eager: None, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    fake_provider.script(default={"served_model": SNAPSHOT})
    dataset = make_dataset(items=2, systems=2)
    with django_capture_on_commit_callbacks(execute=True):
        run = services.judge_run_launch(dataset=dataset, config=config(fake_provider), launched_by=None)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and run.version is not None
    scores_before = list(JudgeScore.objects.filter(judge=run.judge).order_by("pk").values_list("pk", "value"))
    assert len(scores_before) == 4

    with CaptureQueriesContext(connection) as queries:
        assert services.judge_run_work(run_id=run.pk) == "stopped"
        assert services.judge_run_work(run_id=run.pk) == "stopped"
    writes = [q["sql"] for q in queries.captured_queries if not q["sql"].lstrip().upper().startswith("SELECT")]
    assert writes == []
    assert [q["sql"] for q in queries.captured_queries if "FOR UPDATE" in q["sql"].upper()] == []
    assert list(JudgeScore.objects.filter(judge=run.judge).order_by("pk").values_list("pk", "value")) == scores_before


@pytest.mark.django_db(transaction=True)
def test_judge_wait_returns_a_budget_stopped_run_with_its_scores_and_version(
    tmp_path: Path, fake_provider: FakeProvider, eager: None
) -> None:
    # gpt-4o-mini: 100k prompt tokens cost $0.015, so a $0.05 budget allows about four calls.
    fake_provider.script(
        default={"served_model": SNAPSHOT, "usage": {"prompt_tokens": 100_000, "completion_tokens": 10}}
    )
    dataset = make_dataset(items=10, systems=2)
    path = _write_config(tmp_path, fake_provider, max_concurrency=2, budget_usd=0.05)
    with pytest.raises(CommandError, match="stopped_budget"):
        call_command("judge", "--dataset", dataset.name, "--config", path, "--wait", stdout=io.StringIO())
    run = JudgeRun.objects.get()
    assert run.status == RunStatus.STOPPED_BUDGET
    assert run.version is not None and run.version.provider_model == SNAPSHOT
    done = Judgment.objects.filter(run=run, status=JudgmentStatus.DONE, score__isnull=False)
    assert JudgeScore.objects.filter(judge=run.judge).count() == done.values("response_id").distinct().count() > 0


# -- the database's score check -----------------------------------------------------------------------------------


def _unit_lookup(placeholders: tuple[str, str, str]) -> str:
    run, response, aspect = placeholders
    where = (
        score_check.UNIT_JUDGMENTS.replace("r.id", run)
        .replace("NEW.response_id", response)
        .replace("NEW.aspect_name", aspect)
    )
    return f"SELECT MIN({score_check.FINISHED_SCORE}) FROM {where} GROUP BY j.run_id"  # noqa: S608 - the check's own SQL


def _installed_check() -> str:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT prosrc FROM pg_proc WHERE proname = %s", [score_check.NAME])
        else:
            cursor.execute(
                "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = %s", [f"{score_check.NAME}_insert"]
            )
        return str(cursor.fetchone()[0])


@pytest.mark.django_db
def test_the_score_check_reads_one_units_judgments_through_the_unit_index() -> None:
    """The plan a long run's score write gets: judgments analysed while pending (as after the launch), then done."""
    dataset = make_dataset(items=15, systems=2, aspects=(("overall", 1, 5), ("fluency", 1, 5)))
    answers = list(Response.objects.filter(turn__item__dataset=dataset).values_list("pk", flat=True))
    run = services.judge_run_launch(
        dataset=dataset, config={"name": "kw", "method": "metric", "metric": "keyword"}, launched_by=None
    )
    Judgment.objects.bulk_create(
        [
            Judgment(run=run, response_id=answer, aspect_name=aspect, sample=sample)
            for answer in answers
            for aspect in ("overall", "fluency")
            for sample in (1, 2, 3)
        ]
    )
    _execute("ANALYZE judging_judgment")
    Judgment.objects.filter(run=run).update(status=JudgmentStatus.DONE, score=3.0)

    assert score_check.UNIT_JUDGMENTS in _installed_check()
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # The generic plan, as PL/pgSQL caches it for the trigger.
            cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            cursor.execute(f"PREPARE unit_lookup(bigint, bigint, text) AS {_unit_lookup(('$1', '$2', '$3'))}")
            cursor.execute(f"EXPLAIN (FORMAT JSON) EXECUTE unit_lookup({run.pk}, {answers[0]}, 'overall')")
            plan = json.dumps(cursor.fetchone()[0])
            cursor.execute("DEALLOCATE unit_lookup")
            assert '"Index Name": "one_judgment_per_unit"' in plan, plan
        else:
            cursor.execute(f"EXPLAIN QUERY PLAN {_unit_lookup(('%s', '%s', '%s'))}", [run.pk, answers[0], "overall"])
            plan = " | ".join(str(row[-1]) for row in cursor.fetchall())
            assert "USING INDEX one_judgment_per_unit" in plan, plan

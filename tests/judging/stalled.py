"""Runs left behind by a lost task, and a recorder of the Celery tasks enqueued meanwhile."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from celery import Celery
from celery.app.task import Task
from django.utils import timezone

from annotations.models import Dataset, Response
from judging.models import Judge, JudgeKind, JudgeRun, Judgment, JudgmentStatus, RunStatus

SINGLE_CONFIG = {"name": "stalled", "method": "single", "model": "openai/gpt-4o-mini", "aspects": ["quality"]}


@dataclass
class StalledRuns:
    running: JudgeRun  # silent for ten minutes: one unit claimed with an expired lease, one pending
    queued: JudgeRun  # queued ten minutes ago, its start task never delivered
    lively: JudgeRun  # running, heartbeat a second ago: left alone


def _run(dataset: Dataset, name: str, status: str, responses: list[Response]) -> JudgeRun:
    judge = Judge.objects.create(dataset=dataset, name=name, kind=JudgeKind.RUN, params={"method": "single"})
    run = JudgeRun.objects.create(
        judge=judge,
        dataset=dataset,
        config_snapshot={**SINGLE_CONFIG, "name": name},
        method="single",
        status=status,
        total=len(responses),
    )
    Judgment.objects.bulk_create(
        [Judgment(run=run, response=response, aspect_name="quality") for response in responses]
    )
    return run


def make_stalled_runs(dataset: Dataset, responses: list[Response], *, prefix: str = "stalled") -> StalledRuns:
    long_ago = timezone.now() - timedelta(minutes=10)
    running = _run(dataset, f"{prefix}-running", RunStatus.RUNNING, responses[:2])
    JudgeRun.objects.filter(pk=running.pk).update(started_at=long_ago, heartbeat_at=long_ago, created_at=long_ago)
    first = Judgment.objects.filter(run=running).order_by("pk").first()
    assert first is not None
    Judgment.objects.filter(pk=first.pk).update(
        status=JudgmentStatus.CLAIMED, claim_token="lost-worker", lease_until=long_ago + timedelta(seconds=60)
    )
    queued = _run(dataset, f"{prefix}-queued", RunStatus.QUEUED, responses[:1])
    JudgeRun.objects.filter(pk=queued.pk).update(created_at=long_ago)
    lively = _run(dataset, f"{prefix}-lively", RunStatus.RUNNING, responses[:1])
    now = timezone.now()
    JudgeRun.objects.filter(pk=lively.pk).update(started_at=now, heartbeat_at=now)
    for run in (running, queued, lively):
        run.refresh_from_db()
    return StalledRuns(running=running, queued=queued, lively=lively)


@dataclass
class EnqueuedTasks:
    calls: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)


@contextmanager
def recording_enqueued_tasks(monkeypatch: Any) -> Iterator[EnqueuedTasks]:
    """Every task sent (delay, apply_async, and delay_on_commit once its transaction commits) is recorded, not run."""
    recorded = EnqueuedTasks()

    def record(self: Task, args: Any = None, kwargs: Any = None, **options: Any) -> None:
        recorded.calls.append((self.name, tuple(args or ())))

    def record_by_name(self: Celery, name: str, args: Any = None, kwargs: Any = None, **options: Any) -> None:
        recorded.calls.append((name, tuple(args or ())))

    with monkeypatch.context() as patch:
        patch.setattr(Task, "apply_async", record)
        patch.setattr(Celery, "send_task", record_by_name)
        yield recorded

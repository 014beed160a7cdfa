"""Celery tasks: thin, take ids, call a service.

judge_run_work is acknowledged late and re-queued if its worker dies: it is idempotent because
every unit is claimed with a conditional update and written only under its claim token.
"""

import socket

from celery import shared_task
from celery.signals import worker_ready

from judging import services
from judging.factscore import results
from judging.models import WorkerPing


@shared_task(name=services.JUDGE_RUN_START, ignore_result=True)
def judge_run_start(run_id: int) -> int:
    return services.judge_run_start(run_id=run_id)


@shared_task(name=services.JUDGE_RUN_WORK, ignore_result=True, acks_late=True, reject_on_worker_lost=True)
def judge_run_work(run_id: int) -> str:
    return services.judge_run_work(run_id=run_id)


@shared_task(name="judging.judge_runs_resume", ignore_result=True)
def judge_runs_resume() -> int:
    return services.judge_runs_resume()


@shared_task(name="judging.worker_ping", ignore_result=True)
def worker_ping(token: str) -> None:
    WorkerPing.objects.get_or_create(token=token, defaults={"worker_hostname": socket.gethostname()})


@shared_task(name="judging.judge_runs_nudge_stalled", ignore_result=True)
def judge_runs_nudge_stalled() -> int:
    return services.judge_runs_nudge_stalled()


@shared_task(name="judging.factscore_results_project_pending", ignore_result=True)
def factscore_results_project_pending() -> int:
    return results.factscore_results_project_pending()


@worker_ready.connect
def _resume_after_worker_start(sender=None, **kwargs) -> None:  # type: ignore[no-untyped-def]
    # Work tasks that sat in a killed worker are only redelivered after the broker's visibility
    # timeout; a starting worker picks the runs up at once instead.
    judge_runs_resume.delay()

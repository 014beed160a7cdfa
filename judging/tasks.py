"""Celery tasks: thin, take ids, call a service.

judge_run_work is acknowledged late and re-queued if its worker dies: it is idempotent because
every unit is claimed with a conditional update and written only under its claim token.

A database or broker that is briefly away (a restart, a failover) fails no run: the run's tasks are
retried with backoff, and a worker that connects to its broker again gives every running run a work
task, since messages queued on a broker that restarted without its data are gone.
"""

import logging
import socket
from typing import Any

from celery import bootsteps, current_app, shared_task
from celery.signals import worker_init
from django.db import InterfaceError, OperationalError
from kombu.exceptions import OperationalError as BrokerUnavailable
from redis.exceptions import ConnectionError as RedisUnavailable
from redis.exceptions import TimeoutError as RedisTimeout

from judging import services
from judging.certification import certificates, drift, evaluations, teaching
from judging.enqueue import (
    CERTIFICATE_EVALUATE,
    DRIFT_CHECK_EVALUATE,
    JUDGE_RUN_START,
    JUDGE_RUN_WORK,
    TEACHING_EVALUATE,
)
from judging.factscore import results
from judging.llm import gateway
from judging.models import WorkerPing

log = logging.getLogger(__name__)

OUTAGES = (OperationalError, InterfaceError, BrokerUnavailable, RedisUnavailable, RedisTimeout)
# About fifteen minutes of retries, at most a minute apart.
RETRY_OUTAGES: dict[str, Any] = {
    "autoretry_for": OUTAGES,
    "retry_backoff": 1,
    "retry_backoff_max": 60,
    "retry_jitter": True,
    "max_retries": 20,
}


def outage_retrying_task(name: str, **options: Any) -> Any:
    """A Celery task by `name` that keeps no result and retries through an outage of the database or the broker."""
    return shared_task(name=name, ignore_result=True, **RETRY_OUTAGES, **options)


@outage_retrying_task(JUDGE_RUN_START)
def judge_run_start(run_id: int) -> int:
    return services.judge_run_start(run_id=run_id)


@outage_retrying_task(JUDGE_RUN_WORK, acks_late=True, reject_on_worker_lost=True)
def judge_run_work(run_id: int) -> str:
    return services.judge_run_work(run_id=run_id)


@outage_retrying_task("judging.judge_runs_resume")
def judge_runs_resume() -> int:
    return services.judge_runs_resume()


@shared_task(name="judging.worker_ping", ignore_result=True)
def worker_ping(token: str) -> None:
    WorkerPing.objects.get_or_create(token=token, defaults={"worker_hostname": socket.gethostname()})


@outage_retrying_task("judging.judge_runs_nudge_stalled")
def judge_runs_nudge_stalled() -> int:
    return services.judge_runs_nudge_stalled()


@outage_retrying_task("judging.judge_runs_settle_ended")
def judge_runs_settle_ended() -> int:
    return services.judge_runs_settle_ended()


@outage_retrying_task(CERTIFICATE_EVALUATE)
def certificate_evaluate(certificate_id: int) -> str:
    return certificates.certificate_evaluate(certificate_id=certificate_id)


@outage_retrying_task(DRIFT_CHECK_EVALUATE)
def drift_check_evaluate(check_id: int) -> str:
    return drift.drift_check_evaluate(check_id=check_id)


@outage_retrying_task(TEACHING_EVALUATE)
def judge_teaching_evaluate(teaching_id: int) -> str:
    return teaching.judge_teaching_evaluate(teaching_id=teaching_id)


@outage_retrying_task("judging.evaluations_reclaim_stale")
def evaluations_reclaim_stale() -> int:
    return evaluations.evaluations_reclaim_stale()


@outage_retrying_task("judging.drift_checks_start")
def drift_checks_start() -> int:
    from django.conf import settings  # noqa: PLC0415 - read at run time so tests and operators can change it

    return drift.drift_checks_start(sample_size=settings.JUDGE_DRIFT_SAMPLE_SIZE)


@shared_task(name="judging.factscore_results_project_pending", ignore_result=True)
def factscore_results_project_pending() -> int:
    return results.factscore_results_project_pending()


class ResumeRunsOnConnect(bootsteps.StartStopStep):
    """Started whenever the worker's consumer (re)connects to the broker: at start-up, and after a lost connection.

    Work tasks that sat in a killed worker are only redelivered after the broker's visibility timeout, and a broker
    that restarted may have lost its queue, so a connecting worker picks the running runs up at once instead."""

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def start(self, parent: Any) -> None:
        try:
            judge_runs_resume.delay()
        except OUTAGES:
            log.warning("could not enqueue the resume of running runs; the periodic nudge will wake them")


current_app.steps["consumer"].add(ResumeRunsOnConnect)


@worker_init.connect
def load_provider_client(**_: Any) -> None:
    gateway.load()

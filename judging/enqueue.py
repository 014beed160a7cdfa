"""Sending the judge's Celery tasks: their names, shared by the senders and by `judging.tasks`, and the one send.

`judging.tasks` imports the services its tasks call, so the services cannot import the task objects; both sides use
the names below instead, and "find usages" of a name leads from the launch to the worker's task.

The send goes through the project's Celery app (configured from the settings: broker, serializer, routes), imported
here on first send, so that processes which never enqueue (most commands and page views) do not load Celery. Celery's
`current_app` would not do: in a process that has not imported `evalsite.celery`, it is an unconfigured default app.
"""

from __future__ import annotations

from django.db import transaction

JUDGE_RUN_START = "judging.judge_run_start"
JUDGE_RUN_WORK = "judging.judge_run_work"
CERTIFICATE_EVALUATE = "judging.certificate_evaluate"
DRIFT_CHECK_EVALUATE = "judging.drift_check_evaluate"
TEACHING_EVALUATE = "judging.judge_teaching_evaluate"
HYBRID_FILL = "judging.hybrid_fill"
CAMPAIGN_STOP_CHECK = "judging.campaign_stop_check"

# Tasks enqueue their successors patiently: a broker restart of a minute or two must not end a run's chain of work.
BROKER_RETRY_POLICY = {"max_retries": 60, "interval_start": 0.2, "interval_step": 0.5, "interval_max": 3.0}
# A launch waits about ten seconds for the broker before it tells the researcher the run will start later.
LAUNCH_RETRY_POLICY = {"max_retries": 8, "interval_start": 0.2, "interval_step": 0.5, "interval_max": 2.0}


def run_task_enqueue(
    task_name: str, run_id: int, *, on_commit: bool = False, countdown: float | None = None, patient: bool = True
) -> None:
    """Send the task `task_name` for one run: at once (retrying while the broker is away: patiently for a worker's
    chain of work, about ten seconds for a launch), or once the current transaction commits, so the worker never
    looks for a run that is not saved yet."""
    from evalsite.celery import app  # noqa: PLC0415 - loads Celery; see the module's docstring

    signature = app.signature(task_name, args=(run_id,), countdown=countdown)
    if on_commit:
        transaction.on_commit(signature.delay)
    else:
        signature.apply_async(retry=True, retry_policy=BROKER_RETRY_POLICY if patient else LAUNCH_RETRY_POLICY)

"""The hybrid campaigns' Celery task: hand the judge the tasks it is confident about once its run has ended."""

from __future__ import annotations

from celery import shared_task

from judging.enqueue import HYBRID_FILL
from judging.hybrid import services
from judging.tasks import RETRY_OUTAGES


@shared_task(name=HYBRID_FILL, ignore_result=True, **RETRY_OUTAGES)
def hybrid_fill(calibration_id: int) -> str:
    return services.hybrid_fill(calibration_id=calibration_id)

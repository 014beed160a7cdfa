"""The hybrid campaigns' Celery tasks: hand the judge the tasks it is confident about once its run has ended, and
check a campaign's stopping rule after a rating was saved."""

from __future__ import annotations

from celery import shared_task

from judging.enqueue import CAMPAIGN_STOP_CHECK, HYBRID_FILL
from judging.hybrid import services
from judging.tasks import RETRY_OUTAGES


@shared_task(name=HYBRID_FILL, ignore_result=True, **RETRY_OUTAGES)
def hybrid_fill(calibration_id: int) -> str:
    return services.hybrid_fill(calibration_id=calibration_id)


@shared_task(name=CAMPAIGN_STOP_CHECK, ignore_result=True, **RETRY_OUTAGES)
def campaign_stop_check(campaign_id: int) -> str:
    return services.campaign_stop_check(campaign_id=campaign_id)

"""The hybrid campaigns' Celery tasks: hand the judge the tasks it is confident about once its run has ended, and
check a campaign's stopping rule after a rating was saved."""

from __future__ import annotations

from judging.enqueue import CAMPAIGN_STOP_CHECK, HYBRID_FILL
from judging.hybrid import services
from judging.tasks import outage_retrying_task


@outage_retrying_task(HYBRID_FILL)
def hybrid_fill(calibration_id: int) -> str:
    return services.hybrid_fill(calibration_id=calibration_id)


@outage_retrying_task(CAMPAIGN_STOP_CHECK)
def campaign_stop_check(campaign_id: int) -> str:
    return services.campaign_stop_check(campaign_id=campaign_id)

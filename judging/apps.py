import functools
from typing import Any

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class JudgingConfig(AppConfig):
    name = "judging"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = _("Judging")

    def ready(self) -> None:
        from annotations.campaigns.rated_listeners import campaign_rated_register  # noqa: PLC0415 - with the others
        from annotations.datasets.agreement_summary import agreement_report_register  # noqa: PLC0415
        from annotations.datasets.judge_scores import judge_score_store_register  # noqa: PLC0415 - it imports models
        from annotations.quality.rater_reliability import rater_reliability_register  # noqa: PLC0415
        from judging.dataset_scores import STORE  # noqa: PLC0415 - it imports models

        # The annotations domain stores and exports the judge scores a dataset file carries through this store.
        judge_score_store_register(STORE)
        # The dataset card of the Hugging Face folder export summarises the raters' agreement.
        agreement_report_register(_agreement_report)
        # A campaign with a stopping rule is checked after each new answer, by a worker once the answer commits.
        campaign_rated_register(_stop_check_enqueue)
        # The campaign quality panel shows each rater's reliability as a rater model estimates it.
        rater_reliability_register(_rater_reliability)


def _stop_check_enqueue(campaign_id: int) -> None:
    from django.db import transaction  # noqa: PLC0415 - only submits to campaigns with a stopping rule get here

    from judging.enqueue import CAMPAIGN_STOP_CHECK, run_task_enqueue  # noqa: PLC0415 - loads Celery on first send

    # Robust: the answer is already saved, so a broker outage is logged rather than turned into an error page; the
    # next answer's check reads every rating so far, so a missed check only delays the stop.
    transaction.on_commit(
        functools.partial(run_task_enqueue, CAMPAIGN_STOP_CHECK, campaign_id, patient=False), robust=True
    )


def _agreement_report(dataset: Any) -> dict[str, Any]:
    # numpy and the statistics load only when a dataset card is written.
    from judging.analysis.reports import agreement_report  # noqa: PLC0415

    return agreement_report(dataset)


def _rater_reliability(campaign: Any) -> list[Any]:
    # numpy and the rater models load only when a quality panel is drawn.
    from judging.analysis.rater_model_reports import campaign_rater_reliability  # noqa: PLC0415

    return campaign_rater_reliability(campaign)

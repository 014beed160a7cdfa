"""Researcher downloads of a campaign's rater quality: the quality table and the payment export, both CSV.

Only the payment export carries platform worker ids; the quality table names raters by pseudonym and user id."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from datetime import datetime

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from annotations.datasets.downloads import CSV_TYPE
from annotations.datasets.exporting import csv_safe
from annotations.quality.payment_selectors import payment_rows
from annotations.quality.rater_reliability import rater_reliability
from annotations.quality.selectors import posterior_rows, rater_quality
from annotations.selectors import campaign_for_researcher

QUALITY_FIELDS = [
    "rater",
    "user_id",
    "platform",
    "submissions",
    "gold_passed",
    "gold_answered",
    "gold_accuracy",
    "gold_in_order",
    "attention_passed",
    "attention_answered",
    "agreement",
    "agreement_shared",
    "agreement_counted",
    "agreement_note",
    "median_seconds",
    "straight_lined",
    "straight_lining_counted",
    "straight_lining_share",
    "flagged",
    "flag_reasons",
    "excluded",
    "exclusion_reason",
]
POSTERIOR_FIELDS = [
    "aspect",
    "model",
    "item",
    "turn",
    "system",
    "response_id",
    "posterior_label",
    "probability",
    "expected_score",
    "raters",
]
PAYMENT_FIELDS = [
    "platform",
    "worker_id",
    "rater",
    "user_id",
    "tasks_done",
    "gold_tasks",
    "seconds_spent",
    "first_activity",
    "last_activity",
    "sessions",
    "sessions_completed",
    "sessions_out_of_tasks",
    "skips",
    "session_ids",
    "completion_code",
    "flagged",
    "flag_reasons",
]


def _cell(value: object) -> object:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return round(value, 4)
    return csv_safe(value)


def _csv_response(fields: Sequence[str], rows: Iterable[Sequence[object]], filename: str) -> HttpResponse:
    buffer = io.StringIO()
    # CRLF rows, as in the dataset exports: a bare carriage return inside a cell cannot start a new row.
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(fields)
    for row in rows:
        writer.writerow([_cell(value) for value in row])
    response = HttpResponse(buffer.getvalue().encode("utf-8"), content_type=CSV_TYPE)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


@require_GET
@login_required
def quality_csv(request: HttpRequest, campaign_id: int) -> HttpResponse:
    campaign = campaign_for_researcher(request.user, campaign_id)
    rows = (
        [
            row.pseudonym,
            row.user_id,
            row.platform,
            row.submissions,
            row.gold_passed,
            row.gold_answered,
            row.gold_accuracy,
            row.gold_in_order,
            row.attention_passed,
            row.attention_answered,
            row.agreement.value,
            row.agreement.shared,
            row.agreement.counted,
            row.agreement_note,
            row.median_seconds,
            row.straight.straight,
            row.straight.counted,
            row.straight.share,
            row.flagged,
            "; ".join(row.flag_reasons),
            row.excluded,
            row.exclusion_reason,
        ]
        for row in rater_quality(campaign)
    )
    return _csv_response(QUALITY_FIELDS, rows, f"campaign-{campaign.pk}-quality.csv")


@require_GET
@login_required
def payment_csv(request: HttpRequest, campaign_id: int) -> HttpResponse:
    campaign = campaign_for_researcher(request.user, campaign_id)
    rows = (
        [
            row.platform,
            row.worker_id,
            row.rater,
            row.user_id,
            row.tasks_done,
            row.gold_tasks,
            row.seconds_spent,
            row.first_activity,
            row.last_activity,
            row.sessions,
            row.sessions_completed,
            row.sessions_out_of_tasks,
            row.skips,
            " ".join(row.session_ids),
            row.completion_code,
            bool(row.flag_reasons),
            "; ".join(row.flag_reasons),
        ]
        for row in payment_rows(campaign)
    )
    return _csv_response(PAYMENT_FIELDS, rows, f"campaign-{campaign.pk}-payments.csv")


@require_GET
@login_required
def posterior_csv(request: HttpRequest, campaign_id: int) -> HttpResponse:
    """Every answer's posterior label (with its probability) or, for the severity model, its expected score, per
    aspect whose rater model is defined: the whole table the quality panel shows the start of."""
    campaign = campaign_for_researcher(request.user, campaign_id)
    rows = (
        [
            fit.aspect,
            fit.model,
            row.item,
            row.turn,
            row.system,
            row.response_id,
            row.label,
            row.probability,
            row.score,
            row.raters,
        ]
        for fit, items in posterior_rows(rater_reliability(campaign))
        for row in items
    )
    return _csv_response(POSTERIOR_FIELDS, rows, f"campaign-{campaign.pk}-posterior-labels.csv")

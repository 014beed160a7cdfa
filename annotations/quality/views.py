"""Researcher downloads of a campaign's rater quality: the quality table and the payment export, both CSV.

Only the payment export carries platform worker ids; the quality table names raters by pseudonym and user id."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from operator import attrgetter
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from annotations.datasets.downloads import CSV_TYPE
from annotations.datasets.exporting import csv_safe
from annotations.models import Campaign
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


def _joined_reasons(row: Any) -> str:
    return "; ".join(row.flag_reasons)


# The cells that are not simply the row's attribute of the column's name.
_QUALITY_CELLS: dict[str, Callable[[Any], object]] = {
    "rater": attrgetter("pseudonym"),
    "agreement": attrgetter("agreement.value"),
    "agreement_shared": attrgetter("agreement.shared"),
    "agreement_counted": attrgetter("agreement.counted"),
    "straight_lined": attrgetter("straight.straight"),
    "straight_lining_counted": attrgetter("straight.counted"),
    "straight_lining_share": attrgetter("straight.share"),
    "flag_reasons": _joined_reasons,
}
_PAYMENT_CELLS: dict[str, Callable[[Any], object]] = {
    "session_ids": lambda row: " ".join(row.session_ids),
    "flagged": lambda row: bool(row.flag_reasons),
    "flag_reasons": _joined_reasons,
}


def _table_download(
    fields: Sequence[str],
    cells: dict[str, Callable[[Any], object]],
    rows_of: Callable[[Campaign], Iterable[Any]],
    name: str,
) -> Callable[[HttpRequest, int], HttpResponse]:
    """The view of a campaign's table as CSV, one line per row that `rows_of` gives, read by `fields` and `cells`."""

    @require_GET
    @login_required
    def download(request: HttpRequest, campaign_id: int) -> HttpResponse:
        campaign = campaign_for_researcher(request.user, campaign_id)
        read = [cells.get(field, attrgetter(field)) for field in fields]
        rows = ([cell(row) for cell in read] for row in rows_of(campaign))
        return _csv_response(fields, rows, f"campaign-{campaign.pk}-{name}.csv")

    return download


quality_csv = _table_download(QUALITY_FIELDS, _QUALITY_CELLS, rater_quality, "quality")
payment_csv = _table_download(PAYMENT_FIELDS, _PAYMENT_CELLS, payment_rows, "payments")


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

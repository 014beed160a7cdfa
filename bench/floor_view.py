"""The annotate benchmark's floor: the least a secure annotator submit can do, served by the same gunicorn.

`bench/annotate_load.py` sends its annotators here in a phase of its own, with the same clients, connections and
token authentication as the real task loop, and prints the real submit's server CPU and p95 against this view's.
The view claims the campaign's lowest free slot for the caller and stores their one answer row, in one statement (a
conditional UPDATE that takes the slot only while it is free and the caller is in the campaign's pool, and the
INSERT of a Submission for it), the irreducible database work of a submit.

Mounted only by `bench.floor_urls`, which the settings use only when EVALSITE_BENCH_FLOOR is set and never in
production (see evalsite.settings); the product's URL configuration does not know it.
"""

from __future__ import annotations

import functools
import time
from typing import Any

from django.db import connection, transaction
from django.utils import timezone
from rest_framework import status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from annotations.api.annotator import annotator_endpoint
from annotations.campaigns.answers import IDEMPOTENCY_KEY_RE
from annotations.models import Assignment, AssignmentStatus, Campaign, Submission
from annotations.slots import slot_pool_sql
from annotations.slots.campaign_slots import CAMPAIGN_SLOTS
from annotations.slots.statements import statement_cursor

# {in_pool} is the campaign pool's rule (annotations.slots), the one every claim checks.
_FLOOR_SQL = """
WITH pool AS (SELECT {in_pool} AS member),
picked AS (
    SELECT slot.id FROM annotations_assignment slot
    WHERE slot.campaign_id = %(campaign)s AND slot.status = 'free' AND (SELECT member FROM pool)
      AND NOT EXISTS (
          SELECT 1 FROM annotations_assignment mine WHERE mine.task_id = slot.task_id AND mine.annotator_id = %(user)s
      )
    ORDER BY slot.task_position, slot.slot
    LIMIT 1
    FOR UPDATE SKIP LOCKED
),
claimed AS (
    UPDATE annotations_assignment target
    SET annotator_id = %(user)s, status = 'submitted', leased_at = %(now)s, submitted_at = %(now)s, seconds_spent = 0
    FROM picked
    WHERE target.id = picked.id AND target.status = 'free'
    RETURNING target.id
),
stored AS (
    INSERT INTO annotations_submission
        (assignment_id, idempotency_key, none_appropriate, rationale, comment, seconds_spent, created_at, version,
         answer_digest)
    SELECT claimed.id, %(key)s, FALSE, '', '', 0, %(now)s, 1, '' FROM claimed
    RETURNING id
)
SELECT (SELECT member FROM pool), (SELECT id FROM stored)
"""


@functools.cache
def _floor_sql() -> str:
    return _FLOOR_SQL.replace("{in_pool}", slot_pool_sql(CAMPAIGN_SLOTS))


def _floor_portable(campaign_id: int, user: Any, key: str, now: Any) -> tuple[bool, int | None]:
    """The same claim and row where data-modifying CTEs do not exist (SQLite, which runs one writer at a time)."""
    with transaction.atomic():
        if not Campaign.objects.filter(pk=campaign_id, is_active=True, annotators=user).exists():
            return False, None
        mine = Assignment.objects.filter(campaign_id=campaign_id, annotator=user).values("task_id")
        free = Assignment.objects.filter(campaign_id=campaign_id, status=AssignmentStatus.FREE)
        free = free.exclude(task_id__in=mine)
        slot_id = free.order_by("task_position", "slot").values_list("pk", flat=True).first()
        if slot_id is None or not Assignment.objects.filter(pk=slot_id, status=AssignmentStatus.FREE).update(
            annotator=user, status=AssignmentStatus.SUBMITTED, leased_at=now, submitted_at=now, seconds_spent=0
        ):
            return True, None
        return True, Submission.objects.create(assignment_id=slot_id, idempotency_key=key, seconds_spent=0).pk


@annotator_endpoint(["POST"])
def floor_submit(request: Request, campaign_id: int) -> Response:
    """201 with the stored row's id; 204 when no free slot is left for the caller; 400 for a malformed key; 403 for
    someone outside the campaign's pool (or a closed campaign)."""
    key = request.data.get("idempotency_key") if isinstance(request.data, dict) else None
    if not isinstance(key, str) or not IDEMPOTENCY_KEY_RE.match(key):
        return Response({"detail": "idempotency_key must be 8 to 64 letters, digits, '-' or '_'"}, status=400)
    now = timezone.now()
    if connection.vendor == "postgresql":
        with statement_cursor() as cursor:
            cursor.execute(_floor_sql(), {"campaign": campaign_id, "user": request.user.pk, "now": now, "key": key})
            member, stored = cursor.fetchone()
    else:
        member, stored = _floor_portable(campaign_id, request.user, key, now)
    if not member:
        raise PermissionDenied("you are not an annotator of this campaign")
    if stored is None:
        return Response(status=status.HTTP_204_NO_CONTENT)
    return Response({"stored": stored}, status=status.HTTP_201_CREATED)


class ThreadCpuHeader:
    """Middleware of the benchmark's gunicorn: the CPU time the request's own thread spent on it, in a Server-Timing
    header, so the benchmark can tell a submit's CPU from the next-task and draft requests around it."""

    def __init__(self, get_response):  # type: ignore[no-untyped-def]
        self.get_response = get_response

    def __call__(self, request):  # type: ignore[no-untyped-def]
        started = time.thread_time()
        response = self.get_response(request)
        response["Server-Timing"] = f"cpu;dur={(time.thread_time() - started) * 1000:.3f}"
        return response

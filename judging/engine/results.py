"""A unit's tally while its calls come back, and the row that stores its result: written in one statement on
Postgres, only where the slice's claim token still matches."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.db.models import F

from judging.llm.calls import CallResult, CallSpec
from judging.methods.base import AnyFlow, CallBatch, Outcome, UnitContext
from judging.methods.geval import SAMPLED
from judging.models import Judgment, JudgmentStatus


@dataclass
class UnitState:
    ctx: UnitContext
    flow: AnyFlow
    calls: int = 0
    served_from_cache: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    unpriced: int = 0
    attempts: int = 0
    latency: float = 0.0
    batch: list[CallResult | None] | None = None  # the results of a CallBatch as they come back
    queue_wait: float = 0.0
    errors_seen: list[str] = field(default_factory=list)
    lost_calls: int = 0
    lost_cost: float = 0.0
    first_request: CallSpec | CallBatch | None = None  # what a lost call of this unit is priced from
    provider_models: set[str] = field(default_factory=set)

    def absorb(self, result: CallResult, *, from_cache: bool) -> None:
        self.calls += 1
        if result.ok and result.provider_model:
            self.provider_models.add(result.provider_model)
        if from_cache:
            self.served_from_cache += 1
            return
        self.prompt_tokens += result.prompt_tokens
        self.completion_tokens += result.completion_tokens
        self.attempts += result.attempts
        self.latency += result.latency_s
        self.queue_wait += result.queue_wait_s
        self.errors_seen.extend(result.errors_seen)
        if result.ok:
            if result.cost is None:
                self.unpriced += 1
            else:
                self.cost += result.cost


_RESULT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("status", "varchar"),
    ("prompt_hash", "varchar"),
    ("raw_output", "text"),
    ("score", "double precision"),
    ("verdict", "varchar"),
    ("reasoning", "text"),
    ("summary", "text"),
    ("distribution", "jsonb"),
    ("spans", "jsonb"),
    ("logprob_fallback", "boolean"),
    ("logprob_fallback_reason", "text"),
    ("score_mode", "varchar"),
    ("prompt_tokens", "integer"),
    ("completion_tokens", "integer"),
    ("cost_usd", "double precision"),
    ("latency_s", "double precision"),
    ("queue_wait_s", "double precision"),
    ("attempts", "smallint"),
    ("lost_calls", "smallint"),
    ("lost_cost_usd", "double precision"),
    ("cache_hit", "boolean"),
    ("provider_model", "varchar"),
    ("error_kind", "varchar"),
    ("error", "text"),
    ("finished_at", "timestamptz"),
)


def result_row(judgment_id: int, state: UnitState, outcome: Outcome, now: Any) -> dict[str, Any]:
    return {
        "id": judgment_id,
        "status": JudgmentStatus.DONE if outcome.ok else JudgmentStatus.FAILED,
        "prompt_hash": outcome.prompt_hash,
        "raw_output": outcome.raw_output,
        "score": outcome.score,
        "verdict": outcome.verdict,
        "reasoning": outcome.reasoning,
        "summary": outcome.summary,
        "distribution": outcome.distribution,
        "spans": outcome.spans,
        "logprob_fallback": outcome.logprob_fallback,
        "logprob_fallback_reason": outcome.logprob_fallback_reason,
        "score_mode": outcome.score_mode,
        "prompt_tokens": state.prompt_tokens,
        "completion_tokens": state.completion_tokens,
        "cost_usd": None if state.unpriced else state.cost,
        "latency_s": state.latency,
        "queue_wait_s": state.queue_wait,
        "attempts": state.attempts,
        "lost_calls": state.lost_calls,
        "lost_cost_usd": state.lost_cost,
        "cache_hit": state.calls > 0 and state.served_from_cache == state.calls,
        "provider_model": ",".join(sorted(state.provider_models))[:200],
        "error_kind": outcome.error_kind,
        "error": outcome.error,
        "finished_at": now,
    }


def write_results_postgres(rows: list[dict[str, Any]], token: str) -> set[int]:
    table = Judgment._meta.db_table
    placeholders = "(" + ", ".join(["%s::bigint"] + [f"%s::{kind}" for _, kind in _RESULT_COLUMNS]) + ")"
    params: list[Any] = []
    for row in rows:
        params.append(row["id"])
        for name, kind in _RESULT_COLUMNS:
            value = row[name]
            if kind == "jsonb" and value is not None:
                value = json.dumps(value)
            params.append(value)
    names = ", ".join(["id"] + [name for name, _ in _RESULT_COLUMNS])
    assignments = ", ".join(f"{name} = v.{name}" for name, _ in _RESULT_COLUMNS)
    sql = (
        f"UPDATE {table} AS j SET lease_until = NULL, {assignments} "  # noqa: S608  # nosec B608 - table and column names are constants, values are parameters
        f"FROM (VALUES {', '.join([placeholders] * len(rows))}) AS v({names}) "
        "WHERE j.id = v.id AND j.claim_token = %s AND j.status = %s RETURNING j.id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, token, JudgmentStatus.CLAIMED])
        return {int(r[0]) for r in cursor.fetchall()}


# The run's counters a slice adds to when it stores units (the cost is added apart, from micro-dollars).
RUN_COUNTERS = (
    "done",
    "failed",
    "parse_errors",
    "cache_hits",
    "calls",
    "prompt_tokens",
    "completion_tokens",
    "unpriced_calls",
    "logprob_fallbacks",
    "sampled_fallbacks",
)


def run_tally(finished: list[tuple[int, UnitState, Outcome]], written: set[int]) -> Counter[str]:
    """What the stored units add to their run's counters; a unit whose write did not land adds nothing."""
    counts: Counter[str] = Counter()
    for judgment_id, state, outcome in finished:
        if judgment_id not in written:
            continue  # our lease was taken over; the other slice's write is the one that counts
        counts["done" if outcome.ok else "failed"] += 1
        # Only an unreadable reply is a parse error; a FActScore refusal or an answer without
        # checkable facts has no score by definition and is no error.
        if outcome.ok and outcome.score is None and outcome.error_kind.startswith("parse:"):
            counts["parse_errors"] += 1
        if state.calls > 0 and state.served_from_cache == state.calls:
            counts["cache_hits"] += 1
        counts["calls"] += state.attempts + state.lost_calls
        counts["prompt_tokens"] += state.prompt_tokens
        counts["completion_tokens"] += state.completion_tokens
        counts["unpriced_calls"] += state.unpriced
        counts["logprob_fallbacks"] += int(outcome.logprob_fallback)
        counts["sampled_fallbacks"] += int(outcome.score_mode == SAMPLED)
        counts["cost_micro"] += round((state.cost + state.lost_cost) * 1_000_000_000)
    return counts


def run_counter_updates(counts: Counter[str], now: Any) -> dict[str, Any]:
    """The run's update for a tally: each counter added to in place, and the heartbeat."""
    updates: dict[str, Any] = {name: F(name) + counts[name] for name in RUN_COUNTERS if counts[name]}
    if counts["cost_micro"]:
        updates["cost_usd"] = F("cost_usd") + counts["cost_micro"] / 1_000_000_000
    updates["heartbeat_at"] = now
    return updates

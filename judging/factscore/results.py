"""Projecting factscore judgments into rows (FactAnswer, AtomicFact, FactVerdict) and the judge score.

The judgment's raw output (the flow's trace) is the durable record the engine writes once per
unit. This projection is idempotent and incremental: it runs whenever the engine writes a run's
scores (and periodically for runs whose projection failed or predates this), skips judgments whose
trace it already projected, updates facts in place by position and never deletes a fact a human
has labelled. Reports only read its rows.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from annotations.models import Response
from judging.factscore.corpus import item_passages
from judging.factscore.method import ASPECT_NAME
from judging.factscore.models import (
    AtomicFact,
    FactAnswer,
    FactAnswerOutcome,
    FactAnswerStage,
    FactOrigin,
    FactVerdict,
    Passage,
)
from judging.methods.base import context_text
from judging.models import Judge, JudgeRun, JudgeScore, Judgment, RunStatus

logger = logging.getLogger(__name__)


def parse_trace(raw: str | None) -> dict[str, Any] | None:
    if not raw or not raw.lstrip().startswith("{"):
        return None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) and "factscore" in data else None


def _evidence_texts(traces: Iterable[dict[str, Any]], responses: dict[int, Response]) -> dict[Any, str]:
    """Texts of every evidence key used: corpus passages by id; item passages rebuilt from the turn."""
    passage_ids: set[int] = set()
    for trace in traces:
        for fact in trace.get("facts") or []:
            for hit in fact.get("evidence") or []:
                if isinstance(hit.get("key"), int):
                    passage_ids.add(hit["key"])
    texts: dict[Any, str] = {}
    for start in range(0, len(passage_ids), 5000):
        chunk = list(passage_ids)[start : start + 5000]
        texts.update(dict(Passage.objects.filter(pk__in=chunk).values_list("pk", "text")))
    return texts


def _item_texts(response: Response) -> dict[str, str]:
    turn = response.turn
    return {r.key: r.text for r in item_passages(turn.reference, context_text(turn.context))}


def _counts(trace: dict[str, Any]) -> tuple[int, int]:
    prompt = completion = 0
    calls = [trace.get("refusal", {}).get("call"), trace.get("decomposition", {}).get("call")]
    calls += [fact.get("call") for fact in trace.get("facts") or []]
    for call in calls:
        if call:
            prompt += int(call.get("prompt_tokens") or 0)
            completion += int(call.get("completion_tokens") or 0)
    return prompt, completion


def _cost(trace: dict[str, Any]) -> float | None:
    calls = [trace.get("refusal", {}).get("call"), trace.get("decomposition", {}).get("call")]
    calls += [fact.get("call") for fact in trace.get("facts") or []]
    total = 0.0
    for call in calls:
        if not call:
            continue
        if call.get("cost") is None and (call.get("prompt_tokens") or call.get("completion_tokens")):
            return None  # one unpriced call makes the total unknown, never 0
        total += float(call.get("cost") or 0.0)
    return total


def factscore_runs_unprojected() -> QuerySet[JudgeRun]:
    """FActScore runs whose results lag their judgments: never projected (a run finished before
    projection happened on write), a judgment finished since the last projection began, or the last
    projection failed."""
    finished_since = Judgment.objects.filter(run=OuterRef("pk"), finished_at__gte=OuterRef("results_projected_at"))
    return JudgeRun.objects.filter(method="factscore").filter(
        Q(results_projected_at__isnull=True) | ~Q(results_error="") | Exists(finished_since)
    )


def factscore_results_project(*, run_id: int) -> bool:
    """Project a factscore run's judgments and record the outcome on the run; False when it failed.

    A failure leaves the judgments and scores as they are and is recorded in `results_error`, which
    the periodic projection (judging.factscore_results_project_pending) retries.
    """
    with transaction.atomic():
        # The row lock makes concurrent projections of one run take turns; the later one then sees
        # every judgment the earlier one saw, and more.
        run = JudgeRun.objects.select_for_update().select_related("judge").get(pk=run_id)
        started = timezone.now()
        try:
            with transaction.atomic():
                factscore_project(run=run)
        except Exception as exc:  # any failure: the judgments stay, the run says why, a retry follows
            logger.exception("projecting the FActScore results of run %s failed", run_id)
            JudgeRun.objects.filter(pk=run_id).update(results_error=f"{type(exc).__name__}: {exc}"[:2000])
            return False
        JudgeRun.objects.filter(pk=run_id).update(results_projected_at=started, results_error="")
    return True


def factscore_results_project_pending() -> int:
    """Project again every finished FActScore run whose results lag its judgments (an earlier
    failure, or a run that finished before results were projected on write). Returns how many
    projections succeeded."""
    run_ids = list(
        factscore_runs_unprojected()
        .exclude(status__in=[RunStatus.QUEUED, RunStatus.RUNNING])
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    return sum(factscore_results_project(run_id=run_id) for run_id in run_ids)


def factscore_project(*, run: JudgeRun) -> int:
    """Project every finished judgment of a factscore run; returns how many answers changed."""
    existing = {fa.response_id: fa for fa in FactAnswer.objects.filter(run=run)}
    # Raw outputs are only read for judgments finished since their last projection, so opening a
    # report of a large run does not re-read every trace.
    stale: list[int] = []
    seen_responses: set[int] = set()
    for judgment_id, response_id, finished_at in (
        Judgment.objects.filter(run=run, sample=0, status__in=["done", "failed"])
        .order_by("id")
        .values_list("id", "response_id", "finished_at")
    ):
        if response_id in seen_responses:
            continue  # one answer per run; several aspects would repeat the same cached work
        seen_responses.add(response_id)
        current = existing.get(response_id)
        if (
            current is None
            or current.judgment_id != judgment_id
            or finished_at is None
            or current.updated_at is None
            or finished_at >= current.updated_at
        ):
            stale.append(judgment_id)
    pending: list[tuple[Judgment, dict[str, Any], str]] = []
    for judgment in Judgment.objects.filter(pk__in=stale).exclude(raw_output="").order_by("id"):
        trace = parse_trace(judgment.raw_output)
        if trace is None:
            continue
        sha = hashlib.sha256(judgment.raw_output.encode()).hexdigest()
        current = existing.get(judgment.response_id)
        if current is not None and current.trace_sha == sha:
            FactAnswer.objects.filter(pk=current.pk).update(updated_at=timezone.now(), judgment=judgment)
            continue
        pending.append((judgment, trace, sha))
    if not pending:
        return 0
    responses = {
        r.pk: r for r in Response.objects.filter(pk__in=[j.response_id for j, _, _ in pending]).select_related("turn")
    }
    corpus_texts = _evidence_texts((t for _, t, _ in pending), responses)
    for judgment, trace, sha in pending:
        with transaction.atomic():
            _project_one(run, judgment, trace, sha, responses[judgment.response_id], corpus_texts)
    return len(pending)


def _outcome(judgment: Judgment, trace: dict[str, Any]) -> str:
    """The answer's outcome as its flow recorded it; derived for traces written before outcomes were."""
    if judgment.status == "failed":
        return FactAnswerOutcome.FAILED
    recorded = trace.get("outcome")
    if recorded in FactAnswerOutcome.values:
        return str(recorded)
    if (trace.get("refusal") or {}).get("is_refusal"):
        return FactAnswerOutcome.REFUSED
    if judgment.error_kind.startswith("parse:"):
        return FactAnswerOutcome.FAILED
    if "score" in trace:
        return FactAnswerOutcome.SCORED if isinstance(trace["score"], int | float) else FactAnswerOutcome.NO_FACTS
    return FactAnswerOutcome.PENDING


def _stage(judgment: Judgment, trace: dict[str, Any]) -> str:
    if judgment.status == "failed":
        return FactAnswerStage.FAILED
    if "score" in trace:
        return FactAnswerStage.DONE
    if "decomposition" in trace:
        return FactAnswerStage.DECOMPOSED
    return FactAnswerStage.REFUSAL_CHECKED if "refusal" in trace else FactAnswerStage.PENDING


def _project_one(
    run: JudgeRun,
    judgment: Judgment,
    trace: dict[str, Any],
    sha: str,
    response: Response,
    corpus_texts: dict[Any, str],
) -> None:
    refusal = trace.get("refusal") or {}
    decomposition = trace.get("decomposition") or {}
    facts = trace.get("facts") or []
    prompt_tokens, completion_tokens = _counts(trace)
    calls = [refusal.get("call"), decomposition.get("call"), *[f.get("call") for f in facts]]
    calls = [c for c in calls if c]
    score = trace.get("score")
    caps = [cap for cap in trace.get("caps") or [] if isinstance(cap, dict)]
    dropped = sum(int(cap.get("dropped") or 0) for cap in caps)
    answer, _created = FactAnswer.objects.update_or_create(
        run=run,
        response_id=response.pk,
        defaults={
            "judgment": judgment,
            "trace_sha": sha,
            "stage": _stage(judgment, trace),
            "outcome": _outcome(judgment, trace),
            "is_refusal": refusal.get("is_refusal") if refusal else None,
            "refusal_rule": refusal.get("rule") or "",
            "refusal_matched": refusal.get("matched") or "",
            "refusal_confirmed_by": refusal.get("confirmed_by") or "",
            "refusal_raw_output": refusal.get("raw_output") or "",
            "decomposition_raw_output": decomposition.get("raw_output") or "",
            "decomposition_prompt_hash": decomposition.get("prompt_hash") or "",
            "topic": trace.get("topic") or "",
            "n_facts": len(facts),
            "facts_found": len(facts) + dropped,
            "facts_dropped": dropped,
            "caps": caps,
            "repeated_facts": int(trace.get("repeated_facts") or 0),
            "n_supported": int(trace.get("n_supported") or 0),
            "n_unknown": int(trace.get("n_unknown") or 0),
            "score": score if isinstance(score, int | float) else None,
            "error_kind": judgment.error_kind if judgment.error_kind not in ("refusal",) else "",
            "error": judgment.error if judgment.error_kind not in ("refusal",) else "",
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "cost_usd": _cost(trace),
            "calls": sum(int(c.get("attempts") or 0) for c in calls),
            "cache_hits": sum(1 for c in calls if not c.get("attempts") and not c.get("error_kind")),
        },
    )
    item_texts: dict[str, str] | None = None
    kept_positions: set[int] = set()
    for position, entry in enumerate(facts):
        kept_positions.add(position)
        fact, _ = AtomicFact.objects.get_or_create(
            answer=answer, position=position, origin=FactOrigin.MODEL, defaults={"text": entry.get("text", "")}
        )
        if fact.text != entry.get("text", "") and not fact.human_labels.exists():
            fact.text = entry.get("text", "")
            fact.save(update_fields=["text"])
        if "label" not in entry:
            continue  # the call failed; the fact waits for a retry of the run
        evidence = []
        for hit in entry.get("evidence") or []:
            key = hit.get("key")
            if isinstance(key, int):
                text = corpus_texts.get(key, "")
            else:
                if item_texts is None:
                    item_texts = _item_texts(response)
                text = item_texts.get(str(key), "")
            evidence.append({"key": key, "title": hit.get("title", ""), "text": text, "score": hit.get("score")})
        call = entry.get("call") or {}
        FactVerdict.objects.update_or_create(
            fact=fact,
            defaults={
                "label": entry["label"],
                "source": entry.get("source") or "",
                "p_true": entry.get("p_true"),
                "p_false": entry.get("p_false"),
                "evidence_passage_ids": [hit.get("key") for hit in entry.get("evidence") or []],
                "evidence": evidence,
                "title_matched": bool(entry.get("title_matched", True)),
                "raw_output": entry.get("raw_output") or "",
                "prompt_hash": entry.get("prompt_hash") or "",
                "request_key": call.get("request_key") or "",
                "prompt_tokens": int(call.get("prompt_tokens") or 0),
                "completion_tokens": int(call.get("completion_tokens") or 0),
                "cost_usd": call.get("cost"),
                "latency_s": call.get("latency_s"),
                "queue_wait_s": call.get("queue_wait_s"),
                "attempts": int(call.get("attempts") or 0),
                "cache_hit": not call.get("attempts"),
                "error_kind": call.get("error_kind") or "",
                "error": call.get("error") or "",
            },
        )
    # Facts a new decomposition no longer has go, unless a reviewer already labelled them.
    (
        AtomicFact.objects.filter(answer=answer, origin=FactOrigin.MODEL)
        .exclude(position__in=kept_positions)
        .filter(human_labels__isnull=True, edits__isnull=True)
        .delete()
    )
    if isinstance(score, int | float):
        JudgeScore.objects.update_or_create(
            judge=run.judge, response_id=response.pk, aspect_name=ASPECT_NAME, defaults={"value": float(score)}
        )
    else:
        JudgeScore.objects.filter(judge=run.judge, response_id=response.pk, aspect_name=ASPECT_NAME).delete()


def factscore_runs(judge: Judge) -> bool:
    run = getattr(judge, "run", None)
    return run is not None and run.method == "factscore"

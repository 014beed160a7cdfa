"""Executes one slice of a run inside a Celery task.

Threads: the task's own thread does all database work (claims, cache reads, writes); a second
thread runs an asyncio loop that makes the provider calls through the gateway. Results come back
through a queue and are written within a fraction of a second, together with their cache entries,
so a worker killed at any moment loses at most the calls that were in flight.

Lost calls: each request is recorded (a `ProviderSend` row, written with the next batch, within one turn of the
slice's loop) once the gateway has handed it to the connection. The slice that stores a unit counts its own requests
in the unit's attempts and the ones other holders recorded for it as its lost calls, so a worker killed with calls in
flight costs the run exactly the requests it sent, and a unit it had claimed but not sent yet costs nothing.

Claims: units are claimed with a conditional UPDATE (status pending, or claimed with an expired
lease) under a per-slice token and a lease that this slice keeps renewing. Writes only land where
the token still matches, so a slice that lost its lease can never overwrite another's result.
Claims are ordered by the first request's cache key, so identical requests arrive in the same
batch and are sent once (the others wait on the same in-flight call).

Database blips: a query that fails because the database went away (a restart, a failover) is not
an error of the unit. The slice keeps receiving results while it waits, retries its writes with
backoff and stores what it holds as soon as the database answers again; only then does it claim
more.

A slice's claims, lease renewal, call dispatch and guarded writes share one claim token and one loop over the results
queue; their order is what bounds a killed worker's loss to the calls in flight, and it is read here in one place.
The calls' loop thread is `loop`; a unit's tally and its stored row are `results`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import queue
import random
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from judging.engine.loop import LoopThread, result_of
from judging.engine.registry import FLOWS
from judging.engine.results import UnitState, result_row, run_counter_updates, run_tally, write_results_postgres
from judging.engine.units import UnitKey, aspect_infos, build_contexts, with_factscore_knowledge
from judging.llm.calls import CallResult, CallSpec
from judging.llm.gateway import count_tokens, price_estimate
from judging.llm.ratelimit import run_scope
from judging.methods.base import CallBatch, Outcome
from judging.models import CachedCompletion, JudgeRun, Judgment, JudgmentStatus, ProviderSend, RunStatus

log = logging.getLogger(__name__)


# The database errors that mean "not reachable now" (a restart, a dropped connection), retried with backoff.
DB_DOWN = (OperationalError, InterfaceError)
DB_RETRY_FIRST_S = 0.1
DB_RETRY_CAP_S = 5.0
# How long a slice ending during an outage keeps trying to store the results it holds; their units' leases
# expire meanwhile and another slice sends them again.
DB_FINAL_WRITE_S = 600.0


def lease_seconds() -> float:
    return float(settings.JUDGE_LEASE_S)


def claimable_q() -> Q:
    return Q(status=JudgmentStatus.PENDING) | Q(status=JudgmentStatus.CLAIMED, lease_until__lt=timezone.now())


@dataclass
class SliceReport:
    state: str  # "more" | "idle" | "stopped"
    finished: int = 0
    released: int = 0
    provider_calls: int = 0


class SliceExecutor:
    def __init__(self, run: JudgeRun, *, time_slice_s: float | None = None, batch_size: int | None = None) -> None:
        self.run = run
        self.cfg = run.judge_settings
        self.token = uuid.uuid4().hex
        self.time_slice_s = float(time_slice_s or settings.JUDGE_TIME_SLICE_S)
        max_conc = self.cfg.max_concurrency
        # JUDGE_CLAIM_BATCH 0 sizes a claim from the config's concurrency.
        self.batch_size = int(batch_size or settings.JUDGE_CLAIM_BATCH or max(16, max_conc))
        self.target_active = max(2 * max_conc, self.batch_size)
        self.refill_at = max(1, min(self.batch_size, self.target_active // 4))
        self.use_cache = self.cfg.cache
        self.stop = threading.Event()
        self.results: queue.Queue[tuple[str, CallResult]] = queue.Queue()
        self.active: dict[int, UnitState] = {}
        # cache key -> (unit, position in its batch, or -1 for a single request) waiting on that in-flight call
        self.waiting: dict[str, list[tuple[int, int]]] = {}
        self.sent_models: dict[str, str] = {}  # cache key -> model of the request in flight
        self.memo: dict[str, dict[str, Any]] = {}  # cache entries seen in this slice
        self.absent: set[str] = set()  # this batch's first requests that the cache lookup did not find
        self.finished: list[tuple[int, UnitState, Outcome]] = []
        self.released: list[int] = []
        self.new_cache: dict[str, tuple[str, dict[str, Any]]] = {}
        self.aspects = aspect_infos(run.dataset_id)
        self.report = SliceReport(state="idle")
        self.lease = lease_seconds()
        self.stop_reason = ""
        self.db_retry_at = 0.0
        self.db_delay = DB_RETRY_FIRST_S
        # (unit, attempt id, when) of each request handed to the connection, put by the loop thread as it goes out
        self.sends: queue.SimpleQueue[tuple[int, str, Any]] = queue.SimpleQueue()
        self.unrecorded: list[ProviderSend] = []

    # -- claims ---------------------------------------------------------------------------------
    def _claim(self, limit: int) -> list[Judgment]:
        now = timezone.now()
        with transaction.atomic():
            candidates = Judgment.objects.filter(run_id=self.run.pk).filter(claimable_q())
            if connection.features.has_select_for_update_skip_locked:
                candidates = candidates.select_for_update(skip_locked=True)
            ids = list(candidates.order_by("request_key", "id").values_list("id", flat=True)[:limit])
            if not ids:
                return []
            Judgment.objects.filter(pk__in=ids).filter(claimable_q()).update(
                status=JudgmentStatus.CLAIMED, claim_token=self.token, lease_until=now + timedelta(seconds=self.lease)
            )
        return list(
            Judgment.objects.filter(pk__in=ids, claim_token=self.token, status=JudgmentStatus.CLAIMED).only(
                "id", "response_id", "other_response_id", "aspect_name", "sample", "pair_order"
            )
        )

    def _renew_leases(self) -> None:
        Judgment.objects.filter(claim_token=self.token, status=JudgmentStatus.CLAIMED).update(
            lease_until=timezone.now() + timedelta(seconds=self.lease)
        )

    # -- flows ------------------------------------------------------------------------------------
    def _start_units(self, judgments: list[Judgment]) -> None:
        keys = [
            UnitKey(j.pk, j.response_id, j.other_response_id, j.aspect_name, j.sample, j.pair_order) for j in judgments
        ]
        contexts = build_contexts(keys, cfg=self.cfg, aspects=self.aspects, language=self.run.prompt_language)
        if self.cfg.method == "factscore":
            contexts = with_factscore_knowledge(contexts, dataset_id=self.run.dataset_id, cfg=self.cfg)
        flow_factory = FLOWS[self.cfg.method]
        first: list[tuple[int, CallSpec | CallBatch | None]] = []
        for key in keys:
            state = UnitState(ctx=contexts[key.judgment_id], flow=flow_factory(contexts[key.judgment_id]))
            self.active[key.judgment_id] = state
            spec = self._step(key.judgment_id, None, first_step=True)
            state.first_request = spec
            first.append((key.judgment_id, spec))
        if self.use_cache:
            wanted = {key for _, request in first for key in _keys(request)} - set(self.memo)
            if wanted:
                for key_, payload in CachedCompletion.objects.filter(
                    owner_id=self.run.launched_by_id, key__in=wanted
                ).values_list("key", "payload"):
                    self.memo[key_] = payload
            # Remembered so dispatching this batch does not look each unit up again, one query per unit.
            self.absent = wanted - set(self.memo)
        for judgment_id, spec in first:
            if spec is not None:
                self._dispatch(judgment_id, spec)

    def _charge_lost_calls(self, state: UnitState, sends: int) -> None:
        """Requests other holders sent for this unit: counted, each priced like the unit's first request (its
        prompt's tokens and the expected completion, max_tokens, else 200 tokens), since their answers never came."""
        state.lost_calls = sends
        state.lost_cost = 0.0
        request = state.first_request
        if not sends or request is None:
            return  # counting a prompt's tokens costs CPU: only a lost call pays for it
        spec = request.specs[0] if isinstance(request, CallBatch) else request
        cost = price_estimate(spec.model, count_tokens(spec.model, spec.messages), self.cfg.max_tokens or 200)
        state.lost_cost = sends * (cost or 0.0)

    def _step(
        self, judgment_id: int, result: CallResult | list[CallResult] | None, *, first_step: bool = False
    ) -> CallSpec | CallBatch | None:
        """Advance a unit's flow; returns its next request(s), or None when it finished."""
        state = self.active[judgment_id]
        try:
            spec = next(state.flow) if first_step else state.flow.send(result)
        except StopIteration as done:
            self._finish(judgment_id, done.value)
            return None
        except Exception as exc:  # a bug in a method must not take the slice down
            log.exception("judge flow failed for judgment %s", judgment_id)
            self._finish(judgment_id, Outcome(ok=False, error_kind="internal", error=f"{type(exc).__name__}: {exc}"))
            return None
        return spec

    def _dispatch(self, judgment_id: int, spec: CallSpec | CallBatch) -> None:
        while True:
            if isinstance(spec, CallBatch):
                self._dispatch_batch(judgment_id, spec)
                return
            key = spec.cache_key()
            cached = self._cached(key)
            if cached is None:
                break
            state = self.active[judgment_id]
            state.absorb(CallResult.from_cache(cached), from_cache=True)
            next_spec = self._step(judgment_id, CallResult.from_cache(cached))
            if next_spec is None:
                return
            spec = next_spec
        self._send(judgment_id, -1, spec)

    def _dispatch_batch(self, judgment_id: int, batch: CallBatch) -> None:
        """Send every request of a batch at once (the gateway's limits pace them); the flow resumes once all are
        back."""
        state = self.active[judgment_id]
        state.batch = [None] * len(batch.specs)
        if self.use_cache:
            wanted = {spec.cache_key() for spec in batch.specs} - set(self.memo)
            if wanted:
                for key_, payload in CachedCompletion.objects.filter(
                    owner_id=self.run.launched_by_id, key__in=wanted
                ).values_list("key", "payload"):
                    self.memo[key_] = payload
        for position, spec in enumerate(batch.specs):
            cached = self.memo.get(spec.cache_key()) if self.use_cache else None
            if cached is not None:
                state.absorb(CallResult.from_cache(cached), from_cache=True)
                state.batch[position] = CallResult.from_cache(cached)
            else:
                self._send(judgment_id, position, spec)
        self._batch_progress(judgment_id)

    def _batch_progress(self, judgment_id: int) -> None:
        state = self.active[judgment_id]
        if state.batch is None or any(result is None for result in state.batch):
            return
        results = [result for result in state.batch if result is not None]
        state.batch = None
        if any(result.stopped for result in results):
            self._release(judgment_id)
            return
        self._go_on(judgment_id, self._step(judgment_id, results))

    def _go_on(self, judgment_id: int, next_spec: CallSpec | CallBatch | None) -> None:
        """Send the unit's next call or batch, if its method asks for one; a unit of a stopped run is let go."""
        if next_spec is None:
            return
        if self.stop.is_set():
            self._release(judgment_id)
        else:
            self._dispatch(judgment_id, next_spec)

    def _send(self, judgment_id: int, position: int, spec: CallSpec) -> None:
        key = spec.cache_key()
        waiters = self.waiting.get(key)
        if waiters is not None:
            waiters.append((judgment_id, position))
            return
        self.waiting[key] = [(judgment_id, position)]
        self.sent_models[key] = spec.model
        if self.stop.is_set():
            self.results.put((key, CallResult(stopped=True)))
            return
        self.report.provider_calls += 1
        future = self.loop.submit(spec, functools.partial(self._handed_over, judgment_id))
        future.add_done_callback(functools.partial(self._deliver, key))

    def _handed_over(self, judgment_id: int) -> None:
        """On the loop thread, as a request of this unit goes onto the connection: only queued, so sending waits for
        nothing. Its result is queued after this, so the send is recorded no later than the unit is stored."""
        self.sends.put((judgment_id, uuid.uuid4().hex, timezone.now()))

    def _deliver(self, key: str, future: Future[CallResult]) -> None:
        self.results.put((key, result_of(future)))

    def _cached(self, key: str) -> dict[str, Any] | None:
        if not self.use_cache:
            return None
        if key in self.memo:
            return self.memo[key]
        if key in self.absent:
            return None
        try:
            payload = (
                CachedCompletion.objects.filter(owner_id=self.run.launched_by_id, key=key)
                .values_list("payload", flat=True)
                .first()
            )
        except DB_DOWN as exc:
            self._db_failed(exc)
            return None  # a missed cache lookup only costs the call it would have saved
        if payload is not None:
            self.memo[key] = payload
        return payload

    def _on_result(self, key: str, result: CallResult) -> None:
        waiters = self.waiting.pop(key, [])
        model = self.sent_models.pop(key, "")
        if result.ok and self.use_cache:
            payload = result.to_cache()
            self.memo[key] = payload
            self.new_cache[key] = (model, payload)
        for index, (judgment_id, position) in enumerate(waiters):
            state = self.active[judgment_id]
            if position >= 0:
                if not result.stopped:
                    state.absorb(result, from_cache=index > 0 and result.ok)
                assert state.batch is not None
                state.batch[position] = result
                self._batch_progress(judgment_id)
                continue
            if result.stopped:
                self._release(judgment_id)
                continue
            # The first waiter paid for the call; the others shared it like a cache hit.
            state.absorb(result, from_cache=index > 0 and result.ok)
            self._go_on(judgment_id, self._step(judgment_id, result))

    def _finish(self, judgment_id: int, outcome: Outcome) -> None:
        state = self.active.pop(judgment_id)
        self.finished.append((judgment_id, state, outcome))

    def _release(self, judgment_id: int) -> None:
        state = self.active.pop(judgment_id, None)
        if state is not None:
            state.flow.close()
        self.released.append(judgment_id)

    # -- writes -----------------------------------------------------------------------------------
    def _take_sends(self) -> None:
        while True:
            try:
                judgment_id, attempt_id, sent_at = self.sends.get_nowait()
            except queue.Empty:
                return
            self.unrecorded.append(
                ProviderSend(judgment_id=judgment_id, attempt_id=attempt_id, holder=self.token, sent_at=sent_at)
            )

    def _has_writes(self) -> bool:
        self._take_sends()
        return bool(self.finished or self.released or self.new_cache or self.unrecorded)

    def _flush(self) -> None:
        if not self._has_writes():
            return
        finished, self.finished = self.finished, []
        released, self.released = self.released, []
        new_cache, self.new_cache = self.new_cache, {}
        sends, self.unrecorded = self.unrecorded, []
        try:
            self._store(finished, released, new_cache, sends)
        except BaseException:
            # Kept for the next attempt, which is safe to repeat: results land only where this slice's claim
            # still holds (so never twice), and cache entries and sends ignore conflicts (a send by its attempt id).
            self.finished = finished + self.finished
            self.released = released + self.released
            self.new_cache = {**new_cache, **self.new_cache}
            self.unrecorded = sends + self.unrecorded
            raise

    def _store(
        self,
        finished: list[tuple[int, UnitState, Outcome]],
        released: list[int],
        new_cache: dict[str, tuple[str, dict[str, Any]]],
        sends: list[ProviderSend],
    ) -> None:
        now = timezone.now()
        with transaction.atomic():
            if sends:
                ProviderSend.objects.bulk_create(sends, ignore_conflicts=True)
            uncounted = self._uncounted_sends([judgment_id for judgment_id, _, _ in finished])
            for judgment_id, state, _ in finished:
                others = sum(1 for _, holder in uncounted.get(judgment_id, []) if holder != self.token)
                self._charge_lost_calls(state, others)
            if new_cache:
                CachedCompletion.objects.bulk_create(
                    [
                        CachedCompletion(owner_id=self.run.launched_by_id, key=k, model=m[:200], payload=p)
                        for k, (m, p) in new_cache.items()
                    ],
                    ignore_conflicts=True,
                )
            rows = [result_row(judgment_id, state, outcome, now) for judgment_id, state, outcome in finished]
            written = self._write_results(rows)
            counts = run_tally(finished, written)
            # Counted now: this slice's own requests in the attempts, the others' in the lost calls.
            counted = [send_id for judgment_id in written for send_id, _ in uncounted.get(judgment_id, [])]
            if counted:
                ProviderSend.objects.filter(pk__in=counted).delete()
            if released:
                Judgment.objects.filter(pk__in=released, claim_token=self.token).update(
                    status=JudgmentStatus.PENDING, claim_token="", lease_until=None
                )
            JudgeRun.objects.filter(pk=self.run.pk).update(**run_counter_updates(counts, now))
        self.report.finished += sum(counts[k] for k in ("done", "failed"))
        self.report.released += len(released)
        if counts["cost_micro"] and self.cfg.budget_usd is not None:
            # Check the budget the moment money was spent, not on the next periodic check, so
            # the overshoot is bounded by the calls already in flight.
            self._guarded(self._check_run)

    def _uncounted_sends(self, judgment_ids: list[int]) -> dict[int, list[tuple[int, str]]]:
        """The recorded requests of these units not counted yet: unit -> [(row id, holder)]. Read by row, so a send
        recorded by a late holder after this read stays for whoever stores the unit next."""
        found: dict[int, list[tuple[int, str]]] = {}
        if not judgment_ids:
            return found
        for send_id, judgment_id, holder in ProviderSend.objects.filter(judgment_id__in=judgment_ids).values_list(
            "id", "judgment_id", "holder"
        ):
            found.setdefault(judgment_id, []).append((send_id, holder))
        return found

    def _write_results(self, rows: list[dict[str, Any]]) -> set[int]:
        """Store finished units still claimed by this slice; returns the ids written.

        On PostgreSQL one UPDATE ... FROM (VALUES ...) writes the whole batch (the per-row ORM
        update cost more CPU than the provider call itself); elsewhere one UPDATE per row."""
        if not rows:
            return set()
        if connection.vendor == "postgresql":
            return write_results_postgres(rows, self.token)
        written = set()
        for row in rows:
            values = {k: v for k, v in row.items() if k != "id"}
            if Judgment.objects.filter(pk=row["id"], claim_token=self.token, status=JudgmentStatus.CLAIMED).update(
                lease_until=None, **values
            ):
                written.add(row["id"])
        return written

    # -- control ----------------------------------------------------------------------------------
    def _stop_everywhere(self) -> None:
        self.stop.set()
        loop = getattr(self, "loop", None)
        if loop is not None and loop.gateway is not None:
            # Every worker also reads the run's status within half a second, so a stop flag that Redis could not
            # take in time is not worth failing the slice for.
            with contextlib.suppress(TimeoutError):
                asyncio.run_coroutine_threadsafe(loop.gateway.limiter.stop_all(), loop.loop).result(10)

    def _check_run(self) -> None:
        row = JudgeRun.objects.filter(pk=self.run.pk).values("status", "cost_usd").first()
        if row is None or row["status"] != RunStatus.RUNNING:
            self.stop_reason = row["status"] if row else "deleted"
            self._stop_everywhere()
            return
        budget = self.cfg.budget_usd
        if budget is not None and row["cost_usd"] >= float(budget):
            JudgeRun.objects.filter(pk=self.run.pk, status=RunStatus.RUNNING).update(
                status=RunStatus.STOPPED_BUDGET, finished_at=timezone.now(), notes=_budget_note(budget)
            )
            self.stop_reason = RunStatus.STOPPED_BUDGET
            self._stop_everywhere()

    # -- database outages ---------------------------------------------------------------------------
    def _db_failed(self, exc: BaseException) -> None:
        log.warning("database unreachable (%s: %s); retrying in %.1fs", type(exc).__name__, exc, self.db_delay)
        with contextlib.suppress(Exception):
            connection.close()  # the next query opens a fresh connection
        self.db_retry_at = time.monotonic() + self.db_delay * (0.5 + random.random())
        self.db_delay = min(2 * self.db_delay, DB_RETRY_CAP_S)

    def _db_up(self) -> bool:
        return time.monotonic() >= self.db_retry_at

    def _guarded(self, work: Callable[[], Any]) -> bool:
        """Run database work unless the database is known to be away; False when it is (or just went)."""
        if not self._db_up():
            return False
        try:
            work()
        except DB_DOWN as exc:
            self._db_failed(exc)
            return False
        self.db_delay = DB_RETRY_FIRST_S
        return True

    def _claim_and_start(self, limit: int) -> bool:
        """Claim up to `limit` units and set them going; False when nothing was claimable."""
        claimed = self._claim(limit)
        if not claimed:
            return False
        try:
            self._start_units(claimed)
        except DB_DOWN:
            # Loading a batch failed before any of it was sent: hand the claims back untouched.
            ids = {j.pk for j in claimed}
            for judgment_id in ids & set(self.active):
                self.active.pop(judgment_id).flow.close()
            self.finished = [entry for entry in self.finished if entry[0] not in ids]
            self.released.extend(ids)
            raise
        return True

    def _final_flush(self) -> None:
        deadline = time.monotonic() + DB_FINAL_WRITE_S
        while self._has_writes():
            if self._guarded(self._flush):
                return
            if time.monotonic() >= deadline:
                log.error(
                    "gave up storing %d result(s) after %.0fs without the database; their units are sent again",
                    len(self.finished),
                    DB_FINAL_WRITE_S,
                )
                return
            time.sleep(max(0.0, self.db_retry_at - time.monotonic()))

    def execute(self) -> SliceReport:
        self._check_run()
        if self.stop.is_set():
            return SliceReport(state="stopped")
        self.loop = LoopThread(self.cfg, scope=run_scope(self.run.pk), stop=self.stop)
        self.loop.start()
        started = last_check = last_renew = time.monotonic()
        exhausted = False
        try:
            while True:
                now = time.monotonic()
                if now - last_check >= 0.5 and self._guarded(self._check_run):
                    last_check = now
                if now - last_renew >= self.lease / 3 and self._guarded(self._renew_leases):
                    last_renew = now
                # What is held is stored before anything more is claimed, so after an outage the results
                # that arrived meanwhile land while their claims still hold.
                if self._has_writes():
                    self._guarded(self._flush)
                slice_over = now - started >= self.time_slice_s
                room = self.target_active - len(self.active)
                # Claim in batches: topping up one or two units as each result arrives cost a claim and a
                # context load per unit, and the units claimed already keep every slot busy meanwhile.
                if (
                    not (self.stop.is_set() or slice_over or exhausted)
                    and room >= self.refill_at
                    and not self.finished
                    and self._db_up()
                ):
                    try:
                        exhausted = not self._claim_and_start(min(self.batch_size, room))
                    except DB_DOWN as exc:
                        self._db_failed(exc)
                try:
                    key, result = self.results.get(timeout=0.05 if self.active else 0.0)
                    self._on_result(key, result)
                    while True:
                        key, result = self.results.get_nowait()
                        self._on_result(key, result)
                except queue.Empty:
                    pass
                # Write as soon as anything arrived: the batch is whatever came in meanwhile, so under
                # load writes group themselves and a crash loses only calls still in flight. New cache
                # entries count too: a multi-step unit (factscore: one check per fact) killed mid-way
                # then resumes from the cache.
                if self._has_writes():
                    self._guarded(self._flush)
                if not self.active and (self.stop.is_set() or slice_over or exhausted):
                    break
        finally:
            for judgment_id in list(self.active):
                self._release(judgment_id)
            try:
                self._final_flush()
            finally:
                self.loop.close()
                # Requests that went onto the connection while the last batch was being stored are recorded too.
                self._final_flush()
        if self.stop.is_set():
            self.report.state = "stopped"
        elif exhausted:
            self.report.state = "idle"
        else:
            self.report.state = "more"
        return self.report


def _keys(request: CallSpec | CallBatch | None) -> list[str]:
    if request is None:
        return []
    return [spec.cache_key() for spec in request.specs] if isinstance(request, CallBatch) else [request.cache_key()]


def _budget_note(budget: float) -> str:
    return f"Stopped: the cost reached the budget of ${budget:g}. Calls in flight were completed and recorded."

"""Every judge method by name: the built-in LLM and metric flows and FActScore's.

It lives with the engine, which runs the flows, because it composes both packages that define them: `judging.methods`
and `judging.factscore` (whose flow builds on `judging.methods.base`) sit below it, and neither imports the other's
flows. Pure: no ORM, web or network (held by the purity contract)."""

from __future__ import annotations

from collections.abc import Callable

from judging.factscore.method import flow as factscore_flow
from judging.llm.calls import CallSpec
from judging.methods.base import AnyFlow, CallBatch, UnitContext
from judging.methods.flows import (
    error_spans_flow,
    metric_flow,
    pairwise_flow,
    single_flow,
    summarize_then_judge_flow,
)
from judging.methods.judge_settings import JudgeSettings

FLOWS: dict[str, Callable[[UnitContext], AnyFlow]] = {
    "single": single_flow,
    "reference": single_flow,
    "summarize_then_judge": summarize_then_judge_flow,
    "pairwise": pairwise_flow,
    "metric": metric_flow,
    "factscore": factscore_flow,
    "error_spans": error_spans_flow,
}


def calls_per_unit(cfg: JudgeSettings) -> int:
    # factscore: one decomposition plus one check per fact; ~11 facts is a guess, the run records the real count.
    return {"metric": 0, "summarize_then_judge": 2, "factscore": 12}.get(cfg.method, 1)


def calls_per_unit_range(cfg: JudgeSettings) -> tuple[int, int]:
    """(expected, worst case) provider calls of one unit.

    Expected: every scoring reply parses and carries log-probabilities. Worst case: every reply needs each re-ask
    the config allows, and the provider returns no log-probabilities, so each score is estimated from
    `fallback_samples` sampled replies (the first reply counts as one only when it was sent at the fallback
    temperature and needed no re-ask). Retries of failed requests (rate limits, provider errors) are not in either."""
    expected = calls_per_unit(cfg)
    if cfg.method == "error_spans":
        return expected, expected + cfg.parse_retries
    if cfg.method not in ("single", "reference", "summarize_then_judge"):
        return expected, expected
    extra = cfg.parse_retries
    if (cfg.logprob_scoring or "off") != "off":
        first_counts = cfg.parse_retries == 0 and cfg.temperature == cfg.fallback_temperature
        extra += cfg.fallback_samples - (1 if first_counts else 0)
    return expected, expected + extra


def first_spec(ctx: UnitContext) -> CallSpec | None:
    """The first request a unit will make (its cache key groups identical work together)."""
    flow = FLOWS[ctx.cfg.method](ctx)
    try:
        request = next(flow)
        if isinstance(request, CallBatch):
            return request.specs[0] if request.specs else None
        return request
    except StopIteration:
        return None
    finally:
        flow.close()

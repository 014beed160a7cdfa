"""Every judge method by name: the built-in LLM and metric flows and FActScore's."""

from __future__ import annotations

from collections.abc import Callable

from judging.factscore.method import flow as factscore_flow
from judging.llm.calls import CallSpec
from judging.methods.base import AnyFlow, CallBatch, UnitContext
from judging.methods.flows import metric_flow, pairwise_flow, single_flow, summarize_then_judge_flow
from judging.methods.judge_settings import JudgeSettings

FLOWS: dict[str, Callable[[UnitContext], AnyFlow]] = {
    "single": single_flow,
    "reference": single_flow,
    "summarize_then_judge": summarize_then_judge_flow,
    "pairwise": pairwise_flow,
    "metric": metric_flow,
    "factscore": factscore_flow,
}


def calls_per_unit(cfg: JudgeSettings) -> int:
    # factscore: one decomposition plus one check per fact; ~11 facts is a guess, the run records the real count.
    return {"metric": 0, "summarize_then_judge": 2, "factscore": 12}.get(cfg.method, 1)


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

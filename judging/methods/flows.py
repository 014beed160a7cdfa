"""Judge methods as small state machines, plus the pure arithmetic around them.

A method is a generator: it yields the CallSpec it needs next, receives the CallResult, and finally
returns an Outcome. The engine decides where a result comes from (cache or provider) and when it
is written; methods never touch the database or the network, so each is testable on its own and
multi-step methods (summarize, then judge; re-ask after a parse error) cost nothing extra to
resume: every finished step is in the cache.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from judging.llm.calls import CallResult, CallSpec
from judging.methods import error_spans, metrics, prompts
from judging.methods.base import Flow, Outcome, UnitContext
from judging.methods.geval import NO_LOGPROBS, PARSED, SAMPLED, score_from_logprobs
from judging.methods.parsing import ParseResult, parse_score, parse_verdict


def _values(ctx: UnitContext, **extra: Any) -> dict[str, Any]:
    language = ctx.language
    label, description, value_labels = ctx.aspect.texts(language)
    aspect = ctx.aspect
    values: dict[str, Any] = {
        "question": ctx.question,
        "answer": ctx.answer,
        "reference": ctx.reference or "",
        "context": ctx.context or "",
        "aspect": label or aspect.name,
        "aspect_description": description or label or aspect.name,
        "scale_min": float(aspect.min_value),
        "scale_max": float(aspect.max_value),
        "scale": prompts.scale_text(float(aspect.min_value), float(aspect.max_value), aspect.ideal, language),
        "scale_labels": prompts.scale_labels_text(value_labels, language),
    }
    values.update(extra)
    return values


def _examples(ctx: UnitContext) -> list[prompts.RatedExample]:
    """The config's rated examples of this unit's aspect, in the order they were chosen."""
    return [
        prompts.RatedExample(question=e.question, answer=e.answer, score=e.label)
        for e in ctx.cfg.exemplars
        if e.aspect == ctx.aspect.name
    ]


def _template(ctx: UnitContext, method: str) -> str:
    custom = ctx.cfg.prompt
    if custom and method == ctx.cfg.method:
        return custom
    if method == "summarize" and ctx.cfg.summarizer_prompt:
        return ctx.cfg.summarizer_prompt
    return prompts.builtin_template(method, ctx.language)


def _spec(
    ctx: UnitContext, rendered: prompts.RenderedPrompt, *, model: str | None = None, logprobs: bool = False
) -> CallSpec:
    return ctx.call_spec(rendered.messages, model=model, logprobs=logprobs)


def _scale(ctx: UnitContext) -> tuple[float, float]:
    return (float(ctx.aspect.min_value), float(ctx.aspect.max_value))


# A permanent error: retrying cannot help until the dataset gives the item a reference.
NO_REFERENCE = "no_reference"


def _call_failed(result: CallResult, prompt_hash: str) -> Outcome:
    return Outcome(ok=False, error_kind=result.error_kind, error=result.error, prompt_hash=prompt_hash)


_REASK = {
    "en": "Your reply did not end with a score I could read. Reply again with only one line: "
    "Score: <number from {lo:g} to {hi:g}>",
    "ja": "点数を読み取れませんでした。次の 1 行だけで答え直してください。スコア: <{lo:g} から {hi:g} の数>",
}


def _score_with_reasks(ctx: UnitContext, spec: CallSpec, first: CallResult) -> Flow:
    """Parse a scoring reply; on a parse error optionally re-ask, keeping the raw output either way."""
    result = first
    parsed: ParseResult = parse_score(result.content, ctx.cfg.output.model_dump(), _scale(ctx))
    raw = result.content or ""
    messages = list(spec.messages)
    reasked = False
    for _ in range(ctx.cfg.parse_retries):
        if parsed.ok:
            break
        reasked = True
        lo, hi = _scale(ctx)
        messages = [
            *messages,
            {"role": "assistant", "content": result.content or ""},
            {"role": "user", "content": _REASK[ctx.language].format(lo=lo, hi=hi)},
        ]
        result = yield replace(spec, messages=messages, logprobs=False)
        if not result.ok:
            break
        raw = f"{raw}\n\n--- re-ask ---\n{result.content or ''}"
        parsed = parse_score(result.content, ctx.cfg.output.model_dump(), _scale(ctx))
    outcome = Outcome(raw_output=raw, reasoning=parsed.reasoning)
    if not parsed.ok:
        outcome.error_kind = f"parse:{parsed.error_kind}"
        outcome.error = parsed.error
        return outcome
    outcome.score, outcome.score_mode = parsed.score, PARSED
    mode = ctx.cfg.logprob_scoring or "off"
    if mode == "off" or parsed.score is None:
        return outcome
    if not spec.logprobs:
        reason = "log-probabilities were not requested for this call"
    elif not first.logprobs:
        return (yield from _sampled_fallback(ctx, spec, outcome, first_sampled=not reasked))
    elif reasked:
        reason = "the score came from a re-ask, which is sent without log-probabilities"
    else:
        token_score = score_from_logprobs(
            content=first.content,
            tokens=first.logprobs,
            span=parsed.span,
            parsed=parsed.score,
            scale=_scale(ctx),
            mode=mode,
        )
        if not token_score.fell_back:
            outcome.score, outcome.score_mode = token_score.score, token_score.mode
            outcome.distribution = token_score.distribution
            return outcome
        reason = token_score.fallback_reason
    outcome.logprob_fallback, outcome.logprob_fallback_reason = True, reason
    return outcome


def _sampled_fallback(ctx: UnitContext, spec: CallSpec, parsed: Outcome, *, first_sampled: bool) -> Flow:
    """The score estimated from replies sampled above temperature 0, for a provider that returned no
    log-probabilities: the mean of the scores they state.

    The first reply counts as one of the samples only when it was itself sampled at the fallback temperature and
    its score is its own (not a re-ask's); otherwise all of them are sent."""
    cfg = ctx.cfg
    temperature, wanted = cfg.fallback_temperature, cfg.fallback_samples
    scores: list[float] = []
    if first_sampled and spec.temperature == temperature and parsed.score is not None:
        scores.append(parsed.score)
    raw = parsed.raw_output
    sample_spec = replace(spec, temperature=temperature, logprobs=False)
    sent = unreadable = 0
    for draw in range(1, wanted - len(scores) + 1):
        result = yield replace(sample_spec, draw=draw)
        sent += 1
        if not result.ok:
            # A lost sample would bias the mean towards the replies that happened to arrive; the unit fails and a
            # retry resends only what the cache does not already hold.
            failed = _call_failed(result, "")
            failed.raw_output = raw
            return failed
        raw = f"{raw}\n\n--- sample {draw} (temperature {temperature:g}) ---\n{result.content or ''}"
        sample = parse_score(result.content, cfg.output.model_dump(), _scale(ctx))
        if sample.ok and sample.score is not None:
            scores.append(sample.score)
        else:
            unreadable += 1
    parsed.raw_output = raw
    parsed.logprob_fallback = True
    if not scores:
        parsed.logprob_fallback_reason = (
            f"{NO_LOGPROBS}; none of the {sent} replies sampled at temperature {temperature:g} stated a readable "
            "score, so the first reply's score stands"
        )
        return parsed
    counts: dict[float, int] = defaultdict(int)
    for score in scores:
        counts[score] += 1
    parsed.score, parsed.score_mode = sum(scores) / len(scores), SAMPLED
    parsed.distribution = {f"{value:g}": n / len(scores) for value, n in sorted(counts.items())}
    skipped = f" ({unreadable} unreadable sample(s) left out)" if unreadable else ""
    parsed.logprob_fallback_reason = (
        f"{NO_LOGPROBS}; the score is the mean of {len(scores)} sample(s) at temperature {temperature:g}{skipped}"
    )
    return parsed


def _missing_reference(ctx: UnitContext) -> Outcome | None:
    """A reference-guided judgment of an item without a reference is not sent: the judge would grade against
    an empty block and its score would look like any other."""
    if ctx.cfg.method != "reference" or (ctx.reference or "").strip():
        return None
    return Outcome(
        ok=False,
        error_kind=NO_REFERENCE,
        error="not sent: the reference method needs a reference answer and this item has none",
    )


def single_flow(ctx: UnitContext) -> Flow:
    skipped = _missing_reference(ctx)
    if skipped is not None:
        return skipped
    method = "reference" if ctx.cfg.method == "reference" else "single"
    rendered = prompts.render(_template(ctx, method), _values(ctx), _examples(ctx), ctx.language)
    spec = _spec(ctx, rendered, logprobs=ctx.cfg.logprobs)
    result = yield spec
    if not result.ok:
        return _call_failed(result, rendered.prompt_hash)
    outcome = yield from _score_with_reasks(ctx, spec, result)
    outcome.prompt_hash = rendered.prompt_hash
    return outcome


def summarize_then_judge_flow(ctx: UnitContext) -> Flow:
    summary_prompt = prompts.render(_template(ctx, "summarize"), _values(ctx))
    summary_spec = _spec(ctx, summary_prompt, model=ctx.cfg.summarizer_model)
    summary_result = yield summary_spec
    if not summary_result.ok:
        return _call_failed(summary_result, summary_prompt.prompt_hash)
    summary = (summary_result.content or "").strip()
    if not summary:
        return Outcome(ok=True, error_kind="parse:empty_summary", error="the summarizer returned nothing")
    rendered = prompts.render(
        _template(ctx, "summarize_then_judge"), _values(ctx, summary=summary), _examples(ctx), ctx.language
    )
    spec = _spec(ctx, rendered, logprobs=ctx.cfg.logprobs)
    result = yield spec
    if not result.ok:
        failed = _call_failed(result, rendered.prompt_hash)
        failed.summary = summary
        return failed
    outcome = yield from _score_with_reasks(ctx, spec, result)
    outcome.summary = summary
    outcome.prompt_hash = rendered.prompt_hash
    return outcome


def pairwise_flow(ctx: UnitContext) -> Flow:
    first, second = (
        (ctx.answer, ctx.other_answer or "") if ctx.pair_order == 0 else (ctx.other_answer or "", ctx.answer)
    )
    rendered = prompts.render(_template(ctx, "pairwise"), _values(ctx, answer_a=first, answer_b=second))
    result = yield _spec(ctx, rendered)
    if not result.ok:
        return _call_failed(result, rendered.prompt_hash)
    parsed = parse_verdict(result.content)
    outcome = Outcome(raw_output=result.content or "", reasoning=parsed.reasoning, prompt_hash=rendered.prompt_hash)
    if not parsed.ok or parsed.verdict is None:
        outcome.error_kind, outcome.error = f"parse:{parsed.error_kind}", parsed.error
        return outcome
    outcome.verdict = parsed.verdict
    outcome.score = verdict_score_for_response(parsed.verdict, ctx.pair_order)
    outcome.score_mode = PARSED
    return outcome


# Permanent: an aspect scored on a scale has no categories or severities for the judge to mark errors with.
NOT_SPAN_ASPECT = "not_span_aspect"
SPANS = "mqm"  # score_mode: the MQM score computed from the reported errors

_SPAN_REASK = {
    "en": "Your reply did not end with an errors list I could read ({problem}). Reply again with only the JSON "
    'object: {"errors": [{"quote": ..., "category": ..., "severity": ...}]}',
    "ja": "誤りの一覧を読み取れませんでした（{problem}）。JSON オブジェクトだけで答え直してください。"
    '{"errors": [{"quote": ..., "category": ..., "severity": ...}]}',
}


def error_spans_flow(ctx: UnitContext) -> Flow:
    """MQM-style error marking: the judge lists errors as quotes with a category and severity; the score is the
    answer's MQM score from them (higher is worse), normalised as the aspect's scheme says."""
    scheme = ctx.aspect.span_scheme
    if scheme is None:
        return Outcome(
            ok=False,
            error_kind=NOT_SPAN_ASPECT,
            error=f"not sent: aspect {ctx.aspect.name} is scored on a scale, not marked with error spans",
        )
    language = ctx.language
    values = _values(
        ctx,
        categories=error_spans.categories_text(scheme, language),
        severities=error_spans.severities_text(scheme, language),
    )
    rendered = prompts.render(_template(ctx, "error_spans"), values)
    spec = _spec(ctx, rendered)
    result = yield spec
    if not result.ok:
        return _call_failed(result, rendered.prompt_hash)
    raw = result.content or ""
    reply = error_spans.parse_error_spans(result.content, ctx.answer, scheme)
    messages = list(spec.messages)
    for _ in range(ctx.cfg.parse_retries):
        if reply.ok:
            break
        messages = [
            *messages,
            {"role": "assistant", "content": result.content or ""},
            # The reason is our own text; str.replace keeps the JSON braces of the instruction literal.
            {"role": "user", "content": _SPAN_REASK[language].replace("{problem}", reply.error)},
        ]
        result = yield replace(spec, messages=messages)
        if not result.ok:
            break
        raw = f"{raw}\n\n--- re-ask ---\n{result.content or ''}"
        reply = error_spans.parse_error_spans(result.content, ctx.answer, scheme)
    outcome = Outcome(raw_output=raw, reasoning=reply.reasoning, prompt_hash=rendered.prompt_hash)
    if not reply.ok:
        outcome.error_kind, outcome.error = f"parse:{reply.error_kind}", reply.error
        return outcome
    outcome.spans = [error.stored() for error in reply.errors]
    outcome.score, outcome.score_mode = error_spans.answer_score(reply.errors, ctx.answer, scheme), SPANS
    return outcome


def metric_flow(ctx: UnitContext) -> Flow:
    name = ctx.cfg.metric or ""
    value = metrics.compute(name, ctx.answer, ctx.reference, ctx.cfg.tokenize)
    if value is None:
        return Outcome(ok=True, error_kind="parse:no_reference", error=f"{name} needs a reference answer")
    return Outcome(ok=True, score=value, raw_output=f"{name}={value:.6g}", score_mode="metric")
    yield  # pragma: no cover - makes this a generator like the other flows


# --- pure arithmetic ------------------------------------------------------------------------------


def verdict_score_for_response(verdict: str, pair_order: int) -> float:
    """The shown-first answer is A in order 0 and B in order 1; 1 = the judged answer won."""
    if verdict == "tie":
        return 0.5
    response_label = "A" if pair_order == 0 else "B"
    return 1.0 if verdict == response_label else 0.0


def mean_scores(rows: Iterable[tuple[int, str, float | None]]) -> dict[tuple[int, str], float]:
    """Per (answer, aspect): the mean over samples of the scores that parsed."""
    sums: dict[tuple[int, str], list[float]] = defaultdict(list)
    for response_id, aspect, score in rows:
        if score is not None and math.isfinite(score):
            sums[(response_id, aspect)].append(score)
    return {key: sum(values) / len(values) for key, values in sums.items()}


@dataclass
class PairwiseSummary:
    scores: dict[tuple[int, str], float]
    consistency_rate: float | None
    consistent_pairs: int
    compared_pairs: int


def pairwise_scores(rows: Iterable[tuple[int, int, str, int, int, float | None]]) -> PairwiseSummary:
    """Rows: (response, other, aspect, sample, order, score for response).

    A pair judged in both orders is consistent when both orders agree; an inconsistent pair counts
    as a tie. Each answer's score is its mean result (win 1, tie 0.5, loss 0) over its pairs."""
    by_pair: dict[tuple[int, int, str, int], dict[int, float]] = defaultdict(dict)
    for response_id, other_id, aspect, sample, order, score in rows:
        if score is not None:
            by_pair[(response_id, other_id, aspect, sample)][order] = score
    results: dict[tuple[int, str], list[float]] = defaultdict(list)
    consistent = compared = 0
    for (response_id, other_id, aspect, _sample), orders in by_pair.items():
        if len(orders) == 2:
            compared += 1
            if orders[0] == orders[1]:
                consistent += 1
                outcome = orders[0]
            else:
                outcome = 0.5
        else:
            outcome = next(iter(orders.values()))
        results[(response_id, aspect)].append(outcome)
        results[(other_id, aspect)].append(1.0 - outcome)
    scores = {key: sum(v) / len(v) for key, v in results.items()}
    rate = consistent / compared if compared else None
    return PairwiseSummary(scores, rate, consistent, compared)

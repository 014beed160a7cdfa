"""The `factscore` judge method, run by the judge engine as one unit per answer.

The unit is a flow (see judging.methods.flows): it yields each provider request and receives the
reply, so every call goes through the engine's gateway, limits, retries, costs and cache. Steps:

1. refusal rules on the answer, plus, when `refusal_confirm` is on, an LLM verdict on every answer
   (it can overturn a rule and catch a refusal no rule knows);
2. atomic-fact decomposition (one call); the parser's cap and `max_facts` cuts are recorded;
3. for each fact: retrieve evidence (the item's reference/context and/or the dataset's corpus,
   optionally restricted to the topic's title), then one "true or false?" call, read from
   log-probabilities when the provider returns them, else from the text. The checks of one answer
   go out together as a CallBatch, so the engine sends them side by side within the run's limits.

Every answer ends with one outcome in its trace: "scored", "refused", "no_facts" (it answers but
states nothing checkable) or "failed" with the reason (the provider failed, or the decomposition
was empty or unreadable). Reports list every answer under its outcome.

Resuming: a unit interrupted by a worker kill is re-run from the start by the engine; every call
it already made is answered from the engine's cache, so no provider call is repeated. The whole
trace (refusal, facts, verdicts, evidence ids, raw outputs, per-call tokens and costs) is the
judgment's raw output; `judging.factscore.results` projects it into AtomicFact/FactVerdict rows.

The flow never touches the database: the engine loads each unit's knowledge (the topic from the
item's meta, the corpus index) and hands it over as `UnitContext.knowledge`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from judging.factscore import parsing as fs_parsing
from judging.factscore import prompts as fs_prompts
from judging.factscore.corpus import Hit, PassageIndex, item_passages, search_item_knowledge
from judging.factscore.refusal import RefusalCheck, match_rules
from judging.llm.calls import CallResult, CallSpec
from judging.methods.base import CallBatch, Outcome, UnitContext
from judging.methods.factscore_options import FactScoreOptions

TRACE_VERSION = 1
ASPECT_NAME = "factscore"


# --- knowledge for a unit ------------------------------------------------------------------------


@dataclass
class UnitKnowledge:
    """What a unit retrieves from: its item's passages, the corpus index, the topic title."""

    topic: str = ""
    corpus_index: PassageIndex | None = None
    corpus_error: str = ""


def topic_from(item_source: dict[str, Any], turn_source: dict[str, Any], key: str) -> str:
    """The title facts are checked against: the item's meta value for `key`, else the turn's field."""
    meta = item_source.get("meta")
    value = meta.get(key) if isinstance(meta, dict) else None
    if value is None:
        value = turn_source.get(key)
    return str(value).strip()[:500] if isinstance(value, str | int | float) and not isinstance(value, bool) else ""


# --- the flow ------------------------------------------------------------------------------------

Flow = Generator[CallSpec | CallBatch, Any, Outcome]

SCORED, REFUSED, NO_FACTS, FAILED = "scored", "refused", "no_facts", "failed"
OUTCOMES = (SCORED, REFUSED, NO_FACTS, FAILED)


def _spec(ctx: UnitContext, content: str, *, logprobs: bool = False) -> CallSpec:
    return ctx.call_spec([{"role": "user", "content": content}], logprobs=logprobs)


def _hash(content: str) -> str:
    return hashlib.sha256(content.encode()).hexdigest()


def _call_record(spec: CallSpec, result: CallResult) -> dict[str, Any]:
    return {
        "request_key": spec.cache_key(),
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "cost": result.cost,
        "latency_s": round(result.latency_s, 4),
        "queue_wait_s": round(result.queue_wait_s, 4),
        "attempts": result.attempts,
        "error_kind": result.error_kind or ("stopped" if result.stopped else ""),
        "error": result.error,
    }


@dataclass
class Trace:
    data: dict[str, Any] = field(default_factory=lambda: {"factscore": TRACE_VERSION})

    def dump(self) -> str:
        return json.dumps(self.data, ensure_ascii=False)


def _language(ctx: UnitContext) -> str:
    if ctx.cfg.language != "auto":
        return ctx.cfg.language
    return fs_prompts.language_of(ctx.answer, ctx.question)


def _evidence(
    ctx: UnitContext, options: FactScoreOptions, knowledge: UnitKnowledge, fact: str
) -> tuple[list[Hit], bool]:
    k = options.k
    mode = options.knowledge
    hits: list[Hit] = []
    title_matched = True
    records = item_passages(ctx.reference, ctx.context) if mode in ("auto", "item", "both") else []
    hits.extend(search_item_knowledge(records, fact, k=k))
    use_corpus = knowledge.corpus_index is not None and (mode in ("corpus", "both") or (mode == "auto"))
    if use_corpus and knowledge.corpus_index is not None:
        retrieval = knowledge.corpus_index.search(fact, k=k, title=knowledge.topic or None)
        title_matched = retrieval.title_matched
        hits.extend(retrieval.hits)
    return hits, title_matched


def _refusal_check(
    ctx: UnitContext, options: FactScoreOptions, language: str, trace: Trace
) -> Generator[CallSpec, CallResult, RefusalCheck | Outcome]:
    """The rules' verdict on the answer, and the model's on every non-empty answer when asked; an
    Outcome if that call failed."""
    check = match_rules(ctx.answer)
    refusal: dict[str, Any] = {"is_refusal": check.is_refusal, "rule": check.rule, "matched": check.matched}
    refusal["confirmed_by"] = "rules" if check.is_refusal else ""
    trace.data["refusal"] = refusal
    if not options.refusal_confirm or check.rule == "empty":
        return check
    content = fs_prompts.refusal_confirmation_prompt(answer=ctx.answer, language=language)
    spec = _spec(ctx, content)
    result = yield spec
    refusal["call"] = _call_record(spec, result)
    if not result.ok:
        return _failed(trace, result, "refusal confirmation")
    refusal["raw_output"] = result.content or ""
    said = fs_parsing.parse_yes_no(result.content)
    if said is None:
        refusal["llm_verdict"] = None  # unreadable reply: the rules' decision stands, and says so
        return check
    if said and not check.is_refusal:
        refusal["rule"] = "llm"  # no rule fired: the model alone found the refusal
    refusal.update(is_refusal=said, confirmed_by="llm", llm_verdict=said)
    return RefusalCheck(
        is_refusal=said, rule=refusal["rule"], matched=check.matched, confirmed_by="llm", llm_verdict=said
    )


def _scored(trace: Trace, facts: list[dict[str, Any]], options: FactScoreOptions, decomposition_hash: str) -> Outcome:
    supported = sum(1 for f in facts if f["label"] == "true")
    unknown = sum(1 for f in facts if f["label"] == "unknown")
    denominator = len(facts) - (unknown if options.unknown_as == "exclude" else 0)
    score = supported / denominator if denominator else None
    answered = SCORED if score is not None else NO_FACTS
    trace.data.update(outcome=answered, n_facts=len(facts), n_supported=supported, n_unknown=unknown, score=score)
    if score is None:
        summary = "no checkable facts" if not facts else f"0 of {len(facts)} facts readable"
    else:
        summary = f"{supported}/{len(facts)} facts supported" + (f", {unknown} unreadable" if unknown else "")
    # An answer without checkable facts is an outcome, not an error: it stays out of the run's errors.
    return Outcome(
        ok=True,
        score=score,
        raw_output=trace.dump(),
        reasoning=summary,
        prompt_hash=decomposition_hash,
        logprob_fallback=any(f.get("logprob_fallback") for f in facts),
    )


def factscore_flow(ctx: UnitContext, knowledge: UnitKnowledge | None = None) -> Flow:
    options = ctx.cfg.factscore or FactScoreOptions()
    trace = Trace()
    language = _language(ctx)
    trace.data["language"] = language

    # 1. refusal
    checked = yield from _refusal_check(ctx, options, language, trace)
    if isinstance(checked, Outcome):
        return checked
    check = checked
    if check.is_refusal:
        trace.data.update(outcome=REFUSED, n_facts=0, n_supported=0, n_unknown=0, score=None)
        return Outcome(ok=True, score=None, raw_output=trace.dump(), reasoning=f"refusal ({check.rule})")

    # 2. decomposition
    content = fs_prompts.decomposition_prompt(
        question=ctx.question, answer=ctx.answer, template=options.decompose_prompt, language=language
    )
    decomposition_hash = _hash(content)
    spec = _spec(ctx, content)
    result = yield spec
    decomposition: dict[str, Any] = {"prompt_hash": decomposition_hash, "call": _call_record(spec, result)}
    trace.data["decomposition"] = decomposition
    if not result.ok:
        return _failed(trace, result, "decomposition", prompt_hash=decomposition_hash)
    decomposition["raw_output"] = result.content or ""
    parsed = fs_parsing.parse_facts(result.content)
    if not parsed.ok:
        decomposition["error"] = parsed.error
        trace.data.update(outcome=FAILED, failure=f"decomposition: {parsed.error}")
        return Outcome(
            ok=True,
            raw_output=trace.dump(),
            error_kind="parse:facts",
            error=f"decomposition: {parsed.error}",
            prompt_hash=decomposition_hash,
        )
    facts_text = parsed.facts[: options.max_facts]
    trace.data["facts_found"] = parsed.found
    trace.data["caps"] = _caps(parsed, options, len(facts_text))
    trace.data["repeated_facts"] = len(facts_text) - len(set(facts_text))

    if knowledge is None:
        knowledge = ctx.knowledge if isinstance(ctx.knowledge, UnitKnowledge) else UnitKnowledge()
    trace.data["topic"] = knowledge.topic
    if knowledge.corpus_error:
        trace.data.update(outcome=FAILED, failure=knowledge.corpus_error)
        return Outcome(
            ok=False,
            error_kind="config",
            error=knowledge.corpus_error,
            raw_output=trace.dump(),
            prompt_hash=decomposition_hash,
        )

    return (yield from _verify(ctx, options, knowledge, language, facts_text, trace, decomposition_hash))


def _verify(
    ctx: UnitContext,
    options: FactScoreOptions,
    knowledge: UnitKnowledge,
    language: str,
    facts_text: list[str],
    trace: Trace,
    decomposition_hash: str,
) -> Flow:
    """One check per fact, all of an answer's checks at once; a repeated fact shares its request."""
    facts: list[dict[str, Any]] = []
    trace.data["facts"] = facts
    specs: list[CallSpec] = []
    first_of: dict[str, int] = {}  # request key -> the first fact that sends it
    sends: list[int] = []  # per fact, its request's index in the batch
    for fact in facts_text:
        hits, title_matched = _evidence(ctx, options, knowledge, fact)
        content = fs_prompts.verification_prompt(
            fact=fact,
            passages=[(hit.title, hit.text) for hit in hits],
            topic=knowledge.topic,
            template=options.verify_prompt,
            language=language,
        )
        spec = _spec(ctx, content, logprobs=ctx.cfg.logprobs)
        key = spec.cache_key()
        if key not in first_of:
            first_of[key] = len(specs)
            specs.append(spec)
        sends.append(first_of[key])
        facts.append(
            {
                "text": fact,
                "evidence": [{"key": hit.key, "title": hit.title, "score": round(hit.score, 6)} for hit in hits],
                "title_matched": title_matched,
                "prompt_hash": _hash(content),
            }
        )
    results: list[CallResult] = (yield CallBatch(tuple(specs))) if specs else []
    failed_at: tuple[int, CallResult] | None = None
    recorded: set[int] = set()
    for position, (entry, sent) in enumerate(zip(facts, sends, strict=True)):
        spec, result = specs[sent], results[sent]
        entry["call"] = _call_record(spec, result) if sent not in recorded else _shared_record(spec)
        recorded.add(sent)
        if not result.ok:
            failed_at = failed_at or (position, result)
            continue
        verdict = fs_parsing.parse_verdict(result.content, result.logprobs if spec.logprobs else None)
        entry.update(
            label=verdict.label,
            source=verdict.source,
            p_true=verdict.p_true,
            p_false=verdict.p_false,
            raw_output=result.content or "",
            logprob_fallback=bool(spec.logprobs and verdict.source != "logprobs"),
        )
    if failed_at is not None:
        position, result = failed_at
        return _failed(trace, result, f"verification of fact {position + 1}", prompt_hash=decomposition_hash)

    return _scored(trace, facts, options, decomposition_hash)


def _caps(parsed: fs_parsing.FactList, options: FactScoreOptions, kept: int) -> list[dict[str, Any]]:
    """Every cut made to the decomposition's facts, with its limit and what it removed."""
    caps: list[dict[str, Any]] = []
    if parsed.dropped:
        caps.append({"cap": "parser", "limit": fs_parsing.MAX_FACTS, "dropped": parsed.dropped})
    if len(parsed.facts) > kept:
        caps.append({"cap": "max_facts", "limit": options.max_facts, "dropped": len(parsed.facts) - kept})
    if parsed.shortened:
        caps.append({"cap": "fact_chars", "limit": fs_parsing.MAX_FACT_CHARS, "shortened": parsed.shortened})
    return caps


def _shared_record(spec: CallSpec) -> dict[str, Any]:
    """A repeated fact's check: the same request as an earlier fact's, sent once and paid once."""
    return {
        "request_key": spec.cache_key(),
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "cost": 0.0,
        "latency_s": 0.0,
        "attempts": 0,
        "error_kind": "",
        "error": "",
        "shared": True,
    }


def _failed(trace: Trace, result: CallResult, step: str, prompt_hash: str = "") -> Outcome:
    kind = result.error_kind or ("stopped" if result.stopped else "error")
    error = f"{step}: {result.error}".strip()
    trace.data.update(outcome=FAILED, failure=f"{error} ({kind})")
    return Outcome(ok=False, raw_output=trace.dump(), error_kind=kind, error=error, prompt_hash=prompt_hash)


def flow(ctx: UnitContext) -> Flow:
    return factscore_flow(ctx)

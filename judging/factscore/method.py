"""The `factscore` judge method, run by the judge engine as one unit per answer.

The unit is a flow (see judging.methods): it yields each provider request and receives the
reply, so every call goes through the engine's gateway, limits, retries, costs and cache. Steps:

1. refusal rules on the answer, plus an optional LLM confirmation when a rule fires;
2. atomic-fact decomposition (one call);
3. for each fact: retrieve evidence (the item's reference/context and/or the dataset's corpus,
   optionally restricted to the topic's title), then one "true or false?" call, read from
   log-probabilities when the provider returns them, else from the text.

Resuming: a unit interrupted by a worker kill is re-run from the start by the engine; every call
it already made is answered from the engine's cache, so no provider call is repeated. The whole
trace (refusal, facts, verdicts, evidence ids, raw outputs, per-call tokens and costs) is the
judgment's raw output; `judging.factscore.results` projects it into AtomicFact/FactVerdict rows.

Only the flow's knowledge lookup touches the database (item meta for the topic, the corpus index),
and it does so in a helper thread because the engine drives flows inside an event loop.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Generator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from judging.factscore import parsing as fs_parsing
from judging.factscore import prompts as fs_prompts
from judging.factscore.corpus import Hit, PassageIndex, item_passages, search_item_knowledge
from judging.factscore.refusal import RefusalCheck, match_rules
from judging.gateway import CallResult, CallSpec
from judging.methods import Outcome, UnitContext, register_flow

TRACE_VERSION = 1
ASPECT_NAME = "factscore"
KNOWLEDGE_MODES = ("auto", "item", "corpus", "both")
OPTION_DEFAULTS: dict[str, Any] = {
    "corpus": None,  # name of a knowledge corpus of the run's dataset
    "knowledge": "auto",  # auto: the item's passages when it has any, plus the corpus when one is named
    "k": 5,  # passages retrieved per fact and per source
    "topic": None,  # "meta:<key>" reads the item's meta (or the turn's field) as the title to restrict to
    "refusal_confirm": False,
    "unknown_as": "unsupported",  # an unreadable verdict counts as not supported, or is "exclude"d
    "decompose_prompt": None,
    "verify_prompt": None,
    "max_facts": 100,
}


def validate_options(raw: Any) -> tuple[dict[str, Any], list[str]]:
    """The config's `factscore` object with defaults filled in, and the problems found."""
    errors: list[str] = []
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        return dict(OPTION_DEFAULTS), ["factscore must be an object"]
    unknown = sorted(set(raw) - set(OPTION_DEFAULTS))
    if unknown:
        errors.append(f"unknown factscore field(s): {', '.join(unknown)}")
    options = {**OPTION_DEFAULTS, **{k: v for k, v in raw.items() if k in OPTION_DEFAULTS}}
    if options["corpus"] is not None and (not isinstance(options["corpus"], str) or not options["corpus"].strip()):
        errors.append("factscore.corpus must be the name of a knowledge corpus")
    if options["knowledge"] not in KNOWLEDGE_MODES:
        errors.append(f"factscore.knowledge must be one of {', '.join(KNOWLEDGE_MODES)}")
    elif options["knowledge"] in ("corpus", "both") and not options["corpus"]:
        errors.append(f"factscore.knowledge={options['knowledge']} needs factscore.corpus")
    k = options["k"]
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 20:
        errors.append("factscore.k must be an integer from 1 to 20")
    topic = options["topic"]
    if topic is not None and not (isinstance(topic, str) and topic.startswith("meta:") and len(topic) > 5):
        errors.append('factscore.topic must be null or "meta:<key>"')
    if not isinstance(options["refusal_confirm"], bool):
        errors.append("factscore.refusal_confirm must be true or false")
    if options["unknown_as"] not in ("unsupported", "exclude"):
        errors.append("factscore.unknown_as must be unsupported or exclude")
    for name, needed in (("decompose_prompt", "answer"), ("verify_prompt", "fact")):
        template = options[name]
        if template is not None and (
            not isinstance(template, str) or len(template) > 20_000 or "{" + needed + "}" not in template
        ):
            errors.append(f"factscore.{name} must be a template of at most 20,000 characters with {{{needed}}}")
    max_facts = options["max_facts"]
    if isinstance(max_facts, bool) or not isinstance(max_facts, int) or not 1 <= max_facts <= 200:
        errors.append("factscore.max_facts must be an integer from 1 to 200")
    return options, errors


# --- knowledge for a unit ------------------------------------------------------------------------


@dataclass
class UnitKnowledge:
    """What a unit retrieves from: its item's passages, the corpus index, the topic title."""

    topic: str = ""
    corpus_index: PassageIndex | None = None
    corpus_error: str = ""


_executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="factscore-db")


def _off_loop(function: Callable[[], Any]) -> Any:
    """Run ORM code outside the engine's event loop thread (Django forbids it inside)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return function()
    if threading.current_thread().name.startswith("factscore-db"):
        return function()

    def in_thread() -> Any:
        from django.db import connections

        try:
            return function()
        finally:
            connections.close_all()  # the helper thread's connections must not outlive the call

    return _executor.submit(in_thread).result()


def _topic_from(item_source: dict[str, Any], turn_source: dict[str, Any], key: str) -> str:
    meta = item_source.get("meta")
    value = meta.get(key) if isinstance(meta, dict) else None
    if value is None:
        value = turn_source.get(key)
    return str(value).strip()[:500] if isinstance(value, str | int | float) and not isinstance(value, bool) else ""


def load_knowledge(judgment_id: int, options: dict[str, Any]) -> UnitKnowledge:
    """Topic and corpus index for a judgment of a run (database access; call via _off_loop)."""
    from judging.factscore.models import KnowledgeCorpus
    from judging.factscore.services import knowledge_corpus_index
    from judging.models import Judgment

    judgment = Judgment.objects.select_related("run", "response__turn__item").get(pk=judgment_id)
    knowledge = UnitKnowledge()
    topic_option = options.get("topic")
    if topic_option:
        turn = judgment.response.turn
        knowledge.topic = _topic_from(turn.item.source or {}, turn.source or {}, topic_option[len("meta:") :])
    wants_corpus = options.get("corpus") and options.get("knowledge") in ("auto", "corpus", "both")
    if wants_corpus:
        corpus = KnowledgeCorpus.objects.filter(dataset_id=judgment.run.dataset_id, name=options["corpus"]).first()
        if corpus is None:
            knowledge.corpus_error = f"the dataset has no knowledge corpus named {options['corpus']!r}"
        else:
            knowledge.corpus_index = knowledge_corpus_index(corpus)
    return knowledge


# --- the flow ------------------------------------------------------------------------------------

Flow = Generator[CallSpec, CallResult, Outcome]


def _spec(ctx: UnitContext, content: str, *, logprobs: bool = False) -> CallSpec:
    cfg = ctx.cfg
    return CallSpec(
        model=cfg["model"],
        messages=[{"role": "user", "content": content}],
        temperature=float(cfg.get("temperature", 0.0)),
        max_tokens=cfg.get("max_tokens"),
        logprobs=logprobs,
        top_logprobs=int(cfg.get("top_logprobs", 5)),
        api_base=cfg.get("api_base"),
        api_key_env=cfg.get("api_key_env"),
        timeout_s=float(cfg.get("timeout_s", 60)),
        max_retries=int(cfg.get("max_retries", 6)),
        variant=ctx.sample,
    )


def _hash(content: str) -> str:
    import hashlib

    return hashlib.sha256(content.encode()).hexdigest()


def _call_record(spec: CallSpec, result: CallResult) -> dict[str, Any]:
    return {
        "request_key": spec.cache_key(),
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "cost": result.cost,
        "latency_s": round(result.latency_s, 4),
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
    chosen = ctx.cfg.get("language", "auto")
    if chosen in ("en", "ja"):
        return str(chosen)
    return fs_prompts.language_of(ctx.answer, ctx.question)


def _evidence(ctx: UnitContext, options: dict[str, Any], knowledge: UnitKnowledge, fact: str) -> tuple[list[Hit], bool]:
    k = int(options["k"])
    mode = options["knowledge"]
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


def factscore_flow(ctx: UnitContext, knowledge: UnitKnowledge | None = None) -> Flow:
    options, problems = validate_options(ctx.cfg.get("factscore"))
    trace = Trace()
    if problems:
        return Outcome(ok=False, error_kind="config", error="; ".join(problems), raw_output=trace.dump())
    language = _language(ctx)
    trace.data["language"] = language

    # 1. refusal
    check = match_rules(ctx.answer)
    refusal: dict[str, Any] = {"is_refusal": check.is_refusal, "rule": check.rule, "matched": check.matched}
    refusal["confirmed_by"] = "rules" if check.is_refusal else ""
    if check.is_refusal and options["refusal_confirm"] and check.rule != "empty":
        content = fs_prompts.refusal_confirmation_prompt(answer=ctx.answer, language=language)
        spec = _spec(ctx, content)
        result = yield spec
        refusal["call"] = _call_record(spec, result)
        if not result.ok:
            trace.data["refusal"] = refusal
            return _failed(trace, result, "refusal confirmation")
        refusal["raw_output"] = result.content or ""
        said = fs_parsing.parse_yes_no(result.content)
        if said is not None:
            check = RefusalCheck(
                is_refusal=said, rule=check.rule, matched=check.matched, confirmed_by="llm", llm_verdict=said
            )
            refusal.update(is_refusal=said, confirmed_by="llm", llm_verdict=said)
        else:
            refusal["llm_verdict"] = None  # unreadable reply: the rule's decision stands, and says so
    trace.data["refusal"] = refusal
    if check.is_refusal:
        trace.data.update(n_facts=0, n_supported=0, n_unknown=0, score=None)
        return Outcome(
            ok=True,
            score=None,
            raw_output=trace.dump(),
            reasoning=f"refusal ({check.rule})",
            error_kind="refusal",
            error=f"the answer refuses (rule {check.rule})",
        )

    # 2. decomposition
    content = fs_prompts.decomposition_prompt(
        question=ctx.question, answer=ctx.answer, template=options["decompose_prompt"], language=language
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
        return Outcome(
            ok=True,
            raw_output=trace.dump(),
            error_kind="parse:facts",
            error=f"decomposition: {parsed.error}",
            prompt_hash=decomposition_hash,
        )
    facts_text = parsed.facts[: int(options["max_facts"])]

    # Knowledge is loaded only now, so planning (which peeks at a unit's first request) and
    # refusals never touch the corpus.
    if knowledge is None and facts_text:
        knowledge = _off_loop(lambda: load_knowledge(ctx.judgment_id, options))
    knowledge = knowledge or UnitKnowledge()
    trace.data["topic"] = knowledge.topic
    if knowledge.corpus_error:
        return Outcome(
            ok=False,
            error_kind="config",
            error=knowledge.corpus_error,
            raw_output=trace.dump(),
            prompt_hash=decomposition_hash,
        )

    # 3. verification, one call per fact
    facts: list[dict[str, Any]] = []
    trace.data["facts"] = facts
    for fact in facts_text:
        hits, title_matched = _evidence(ctx, options, knowledge, fact)
        content = fs_prompts.verification_prompt(
            fact=fact,
            passages=[(hit.title, hit.text) for hit in hits],
            topic=knowledge.topic,
            template=options["verify_prompt"],
            language=language,
        )
        spec = _spec(ctx, content, logprobs=bool(ctx.cfg.get("logprobs")))
        result = yield spec
        entry: dict[str, Any] = {
            "text": fact,
            "evidence": [{"key": hit.key, "title": hit.title, "score": round(hit.score, 6)} for hit in hits],
            "title_matched": title_matched,
            "prompt_hash": _hash(content),
            "call": _call_record(spec, result),
        }
        facts.append(entry)
        if not result.ok:
            return _failed(trace, result, f"verification of fact {len(facts)}", prompt_hash=decomposition_hash)
        verdict = fs_parsing.parse_verdict(result.content, result.logprobs if spec.logprobs else None)
        entry.update(
            label=verdict.label,
            source=verdict.source,
            p_true=verdict.p_true,
            p_false=verdict.p_false,
            raw_output=result.content or "",
            logprob_fallback=bool(spec.logprobs and verdict.source != "logprobs"),
        )

    supported = sum(1 for f in facts if f["label"] == "true")
    unknown = sum(1 for f in facts if f["label"] == "unknown")
    denominator = len(facts) - (unknown if options["unknown_as"] == "exclude" else 0)
    score = supported / denominator if denominator else None
    trace.data.update(n_facts=len(facts), n_supported=supported, n_unknown=unknown, score=score)
    summary = f"{supported}/{len(facts)} facts supported" + (f", {unknown} unreadable" if unknown else "")
    outcome = Outcome(
        ok=True,
        score=score,
        raw_output=trace.dump(),
        reasoning=summary,
        prompt_hash=decomposition_hash,
        logprob_fallback=any(f.get("logprob_fallback") for f in facts),
    )
    if score is None:
        outcome.error_kind, outcome.error = "no_facts", "the answer has no checkable facts"
    return outcome


def _failed(trace: Trace, result: CallResult, step: str, prompt_hash: str = "") -> Outcome:
    kind = result.error_kind or ("stopped" if result.stopped else "error")
    return Outcome(
        ok=False,
        raw_output=trace.dump(),
        error_kind=kind,
        error=f"{step}: {result.error}".strip(),
        prompt_hash=prompt_hash,
    )


def flow(ctx: UnitContext) -> Flow:
    return factscore_flow(ctx)


# Registered on import. judging.methods imports this module at its end, so whichever of the two is
# imported first, the engine knows the method by the time anyone can look it up.
register_flow("factscore", flow)

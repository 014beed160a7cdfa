"""FActScore verification throughput: the checks of one answer against max_concurrency / latency.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalsite_bench \
    REDIS_URL=redis://127.0.0.1:6379/5 CELERY_BROKER_URL=redis://127.0.0.1:6379/5 \
    .venv/bin/python -m bench.factscore_verify [--answers 4] [--facts 100] [--latency 0.2] [--concurrency 32]

What it does:
1. starts the fake OpenAI-compatible provider in its own process (scripted latency); it decomposes
   every answer into `--facts` facts and calls every fact true;
2. runs a `factscore` judge run over `--answers` answers through the engine (Celery eager, in this
   process) with max_concurrency = `--concurrency`, timed from the run's start to its last answer;
3. makes the same calls in the same order with a bare asyncio+httpx client at the same concurrency:
   each answer's decomposition, then all of its checks at once.
It prints calls/s of each, the ratio, the most calls the provider saw in flight, and the bound
max_concurrency / latency (with what one decomposition round and whole rounds of checks allow). A
check per fact one after the other would give answers / latency. Exit status 1 when our run reaches
less than 0.8 of the bare client, or goes over the concurrency limit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.fake_provider import bench_judge_config, control, fake_provider, judge_bench_environment  # noqa: E402

judge_bench_environment()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--answers", type=int, default=4)
    parser.add_argument("--facts", type=int, default=100, help="facts per answer (at most 200)")
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--port", type=int, default=0)
    return parser.parse_args()


def facts_reply(facts: int) -> str:
    return "\n".join(f"- The person did thing number {n}." for n in range(facts))


def build_dataset(answers: int) -> object:
    from annotations.models import Dataset, Item, Response, System, Turn

    nonce = uuid.uuid4().hex[:8]
    dataset = Dataset.objects.create(name=f"bench-factscore-{nonce}")
    system = System.objects.create(dataset=dataset, key="llm", position=0)
    for i in range(answers):
        item = Item.objects.create(dataset=dataset, external_id=f"{nonce}-{i}", position=i, source={})
        # The reference is each check's evidence, so no check is shared with another answer's (or cached).
        turn = Turn.objects.create(
            item=item, index=0, prompt=f"Tell me about {nonce}-{i}.", reference=f"Notes {nonce}-{i}.", source={}
        )
        Response.objects.create(
            turn=turn, system=system, position=0, text=f"Person {nonce}-{i} did many things.", source={}
        )
    return dataset


def factscore_run(args: argparse.Namespace, base_url: str) -> dict:
    from bench.database import set_up_django_database

    set_up_django_database()
    from django.db.models import Max

    import judging.tasks  # noqa: F401 - registers the engine's tasks, which run eagerly here
    from evalsite.celery import app
    from judging import services
    from judging.models import JudgeRun, Judgment

    dataset = build_dataset(args.answers)
    config = bench_judge_config(
        "bench-factscore",
        "factscore",
        base_url,
        args.concurrency,
        factscore={"knowledge": "item", "max_facts": min(200, args.facts)},
    )
    app.set_current()  # the engine enqueues by name on the current app
    app.conf.task_always_eager = True
    # A first small run pays the one-off imports (litellm, the tokenizers), which are not what is measured.
    script(base_url, argparse.Namespace(**{**vars(args), "facts": 2}))
    services.judge_run_launch(dataset=build_dataset(1), config={**config, "name": "bench-warm-up"}, launched_by=None)
    script(base_url, args)
    started = time.monotonic()
    run = services.judge_run_launch(dataset=dataset, config=config, launched_by=None)
    elapsed = time.monotonic() - started
    run = JudgeRun.objects.get(pk=run.pk)
    stats = control(base_url, "stats")
    # The engine's own time: from the run's start to its last answer written, so neither the launch's
    # planning nor the projection of facts into rows afterwards counts as call time.
    last = Judgment.objects.filter(run=run).aggregate(last=Max("finished_at"))["last"]
    engine_s = (last - run.started_at).total_seconds() if last and run.started_at else 0.0
    return {
        "status": run.status,
        "answers": run.total,
        "done": run.done,
        "provider_calls": stats["calls"],
        "elapsed_s": elapsed,
        "engine_s": engine_s,
        "calls_per_s": stats["calls"] / engine_s if engine_s else 0.0,
        "max_in_flight": stats["max_in_flight"],
    }


def script(base_url: str, args: argparse.Namespace) -> None:
    control(base_url, "reset", {})
    rule = {"match": "Break an AI assistant", "behaviour": {"content": facts_reply(args.facts)}}
    control(base_url, "script", {"default": {"latency": args.latency, "content": "True"}, "rules": [rule]})


async def bare_client(base_url: str, args: argparse.Namespace) -> dict:
    import httpx

    semaphore = asyncio.Semaphore(args.concurrency)
    limits = httpx.Limits(max_connections=args.concurrency, max_keepalive_connections=args.concurrency)
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=30) as client:

        async def call(content: str) -> None:
            body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": content}]}
            async with semaphore:
                response = await client.post("/chat/completions", json=body)
                response.raise_for_status()
                response.json()

        async def answer(i: int) -> None:
            nonce = uuid.uuid4().hex
            await call(f"Break an AI assistant's answer {i} {nonce}")
            await asyncio.gather(*(call(f"check {i} {n} {nonce}") for n in range(args.facts)))

        started = time.monotonic()
        await asyncio.gather(*(answer(i) for i in range(args.answers)))
        elapsed = time.monotonic() - started
    calls = args.answers * (1 + args.facts)
    return {"elapsed_s": elapsed, "calls_per_s": calls / elapsed}


def main() -> int:
    args = parse_args()
    with fake_provider(args.port, args.latency) as base_url:
        ours = factscore_run(args, base_url)
        script(base_url, args)
        bare = asyncio.run(bare_client(base_url, args))
        bare["max_in_flight"] = control(base_url, "stats")["max_in_flight"]
    calls = args.answers * (1 + args.facts)
    limit = args.concurrency / args.latency
    # The decompositions take one round; then the checks go in rounds of max_concurrency.
    rounds = 1 + math.ceil(args.answers * args.facts / args.concurrency)
    bound = calls / (rounds * args.latency)
    ratio = ours["calls_per_s"] / bare["calls_per_s"] if bare["calls_per_s"] else 0.0
    report = {
        "answers": args.answers,
        "facts_per_answer": args.facts,
        "latency_s": args.latency,
        "max_concurrency": args.concurrency,
        "ours": ours,
        "bare_asyncio_httpx": bare,
        "ratio_ours_to_bare": ratio,
        "max_concurrency_over_latency": limit,
        "bound_with_rounds_calls_per_s": bound,
        "ratio_ours_to_bound": ours["calls_per_s"] / bound,
        "one_check_at_a_time_calls_per_s": args.answers / args.latency,
    }
    print(json.dumps(report, indent=2))
    print(
        f"\nour run: {ours['provider_calls']} calls in {ours['engine_s']:.2f} s = {ours['calls_per_s']:.1f} calls/s "
        f"(status {ours['status']}), max in flight {ours['max_in_flight']} (limit {args.concurrency})\n"
        f"max_concurrency / latency = {limit:.1f} calls/s; with one decomposition round and whole rounds of checks "
        f"{bound:.1f} calls/s -> ratio {report['ratio_ours_to_bound']:.2f}\n"
        f"bare asyncio+httpx, same calls in the same order: {bare['calls_per_s']:.1f} calls/s -> ratio {ratio:.2f} "
        f"(target >= 0.8)\n"
        f"one check at a time per answer: {report['one_check_at_a_time_calls_per_s']:.1f} calls/s"
    )
    ok = ours["status"] == "succeeded" and ours["max_in_flight"] <= args.concurrency and ratio >= 0.8
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

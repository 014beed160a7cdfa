"""Deterministic synthetic datasets in the layouts of the two seed formats (llm-human-eval-jp and lfqa).

Used by the import/export benchmark and by tests that need realistic volume. Nothing here touches the database or
Django: the generators only write JSONL files, so they can run before settings are configured.

generate_llm_jp_jsonl    llm-human-eval-jp layout: ids "source###n", 1-2 turns, systems llm_a.., 5 aspects on 1-5 with
                         three positional raters (no "raters" list, as in the published data), some "NA" and 0 tokens;
                         a 2-turn conversation is rated on its last turn only.
generate_lfqa_jsonl      long-form QA multi-aspect layout: 4 candidate answers per question, factuality and
                         acceptability 0-3, amount_info and formality -1..1, named raters in a "raters" list.
"""

import json
import math
import random
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

LLM_JP_ASPECTS = ["detailedness", "factuality", "fluency", "relevance", "overall"]
LFQA_ASPECTS = {"factuality": (0, 3), "acceptability": (0, 3), "amount_info": (-1, 1), "formality": (-1, 1)}
PROMPT_SOURCES = ["elyza", "ichikara", "japanese-mt-bench", "vicuna-qa-ja", "rakuda"]

# Fragments mixed into answers. Japanese dominates, as in the seed data, with ASCII terms, numbers and markdown so
# that byte lengths, escapes and multi-byte boundaries are all exercised.
_JA_SENTENCES = [
    "まず、目標を小さく分けて一つずつ達成することが大切です。",
    "この方法は多くの研究で効果が確認されています。",
    "ただし、状況によっては別のアプローチが適している場合もあります。",
    "具体的には、毎朝15分だけ計画を立てる時間を確保しましょう。",
    "東京都の人口は約1400万人で、日本最大の都市です。",
    "富士山の標高は3776メートルです。",
    "以上の点を踏まえると、結論として次のように言えます。",
    "専門家に相談することも検討してください。",
    "日本語の文章では、読点の位置が読みやすさに大きく影響します。",
    "このコードは Python 3.11 で動作を確認しています。",
    "明治維新は1868年に始まったとされています。",
    "睡眠時間を7時間以上確保すると、集中力が高まると言われています。",
    "ご質問ありがとうございます。",
    "もちろんです。以下にいくつかのアイデアをご紹介します。",
    "申し訳ありませんが、その情報は確認できませんでした。",
    "季節の変わり目には体調を崩しやすいので注意が必要です。",
]
_ASCII_SENTENCES = [
    "In short, the answer depends on the context.",
    "See RFC 8259 for the JSON grammar.",
    "The function returns None when the key is missing.",
    "Use `git bisect` to find the commit that broke the build.",
    'He said "it works" -- but did it?',
    "Backslashes \\ and tabs\tsurvive a JSON round trip.",
]
_MARKDOWN_BLOCKS = [
    "\n\n1. 目標を書き出す\n2. 優先順位をつける\n3. 振り返りの時間を作る\n\n",
    "\n\n- 利点: 簡単に始められる\n- 欠点: 継続が難しい\n\n",
    "\n\n```python\ndef mean(xs):\n    return sum(xs) / len(xs)\n```\n\n",
    "\n\n| 項目 | 値 |\n|---|---|\n| 速度 | 速い |\n\n",
    "\n\n**重要:** 数値は概算です。\n\n",
]
_EMOJI = ["🙂", "👍", "🗾", "📚"]
_PROMPTS = [
    "仕事の熱意を取り戻すためのアイデアを5つ挙げてください。",
    "日本の四季について、子ども向けに説明してください。",
    "次の文章を要約してください。",
    "Pythonでリストの重複を取り除く方法を教えてください。",
    "健康的な朝食の献立を考えてください。",
    "「情けは人のためならず」の意味を説明してください。",
    "リモートワークの長所と短所を比較してください。",
    "Explain the difference between TCP and UDP in Japanese.",
    "京都で一日観光するならどこを回るべきですか。",
    "新入社員へのアドバイスを書いてください。",
]
_FOLLOW_UPS = [
    "もう少し詳しく説明してください。",
    "それを箇条書きでまとめ直してください。",
    "では、逆の立場から反論を書いてください。",
    "Can you give one concrete example?",
]


def _text(rng: random.Random, length: int, *, ascii_share: float = 0.15, markdown_share: float = 0.08) -> str:
    """A string of exactly `length` characters made of whole fragments, cut at the end."""
    parts: list[str] = []
    size = 0
    while size < length:
        roll = rng.random()
        if roll < markdown_share:
            piece = rng.choice(_MARKDOWN_BLOCKS)
        elif roll < markdown_share + ascii_share:
            piece = rng.choice(_ASCII_SENTENCES) + " "
        elif roll < markdown_share + ascii_share + 0.01:
            piece = rng.choice(_EMOJI)
        else:
            piece = rng.choice(_JA_SENTENCES)
        parts.append(piece)
        size += len(piece)
    return "".join(parts)[:length]


def _log_uniform_length(rng: random.Random, low: int, high: int) -> int:
    # Real answer lengths are skewed: many short answers, a long tail of very long ones.
    return round(math.exp(rng.uniform(math.log(low), math.log(high))))


def _llm_jp_score(rng: random.Random, quality: float, missing_rate: float) -> Any:
    roll = rng.random()
    if roll < missing_rate / 2:
        return "NA"
    if roll < missing_rate:
        return 0
    return max(1, min(5, round(rng.gauss(quality, 0.8))))


def llm_jp_system_keys(systems: int) -> list[str]:
    """llm_a, llm_b, ... (the seed's naming), continuing with llm_aa, llm_ab, ... past 26."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    keys = []
    for index in range(systems):
        suffix = letters[index] if index < 26 else letters[index // 26 - 1] + letters[index % 26]
        keys.append(f"llm_{suffix}")
    return keys


def iter_llm_jp_items(
    *,
    items: int = 404,
    systems: int = 10,
    raters: int = 3,
    seed: int = 0,
    min_chars: int = 40,
    max_chars: int = 6000,
    two_turn_share: float = 0.1,
    missing_rate: float = 0.02,
    with_rater_ids: bool = False,
    rate_every_turn: bool = False,
) -> Iterator[dict[str, Any]]:
    rng = random.Random(seed)
    system_keys = llm_jp_system_keys(systems)
    # Each system has a stable quality, so that agreement and ranking statistics on this data are meaningful.
    quality = {key: rng.uniform(2.2, 4.6) for key in system_keys}
    rater_pool = [f"r{n:03d}" for n in range(max(raters * 4, 12))]
    for index in range(items):
        source = PROMPT_SOURCES[index % len(PROMPT_SOURCES)]
        turn_count = 2 if rng.random() < two_turn_share else 1
        turns = []
        for turn_index in range(turn_count):
            prompt = rng.choice(_PROMPTS if turn_index == 0 else _FOLLOW_UPS)
            if rng.random() < 0.3:
                prompt += "\n" + _text(rng, rng.randint(20, 200), markdown_share=0.0)
            responses: dict[str, Any] = {}
            # A conversation is rated once, on its last turn: the earlier answers are context. This keeps the total
            # at items x systems x 5 x raters ratings (60,600 for the defaults) whatever the share of 2-turn items.
            rated = rate_every_turn or turn_index == turn_count - 1
            for key in system_keys:
                answer_quality = quality[key] + rng.uniform(-0.7, 0.7)
                answer: dict[str, Any] = {"response": _text(rng, _log_uniform_length(rng, min_chars, max_chars))}
                if rated:
                    answer["human_evals"] = {
                        aspect: [_llm_jp_score(rng, answer_quality, missing_rate) for _ in range(raters)]
                        for aspect in LLM_JP_ASPECTS
                    }
                    if with_rater_ids:
                        answer["raters"] = rng.sample(rater_pool, raters)
                responses[key] = answer
            turns.append({"prompt": prompt, "responses": responses})
        yield {"id": f"{source}###{index}", "turns": turns}


def _write_counted(path: str | Path, lines: Iterator[dict[str, Any]]) -> dict[str, int]:
    """Writes the lines as JSONL and returns counts: items, turns, responses, ratings (scores in human_evals),
    bytes."""
    counts = {"items": 0, "turns": 0, "responses": 0, "ratings": 0, "bytes": 0}
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        for obj in lines:
            line = json.dumps(obj, ensure_ascii=False) + "\n"
            handle.write(line)
            counts["items"] += 1
            counts["bytes"] += len(line.encode("utf-8"))
            for turn in obj["turns"]:
                counts["turns"] += 1
                for answer in turn["responses"].values():
                    counts["responses"] += 1
                    counts["ratings"] += sum(len(v) for v in answer.get("human_evals", {}).values())
    return counts


def generate_llm_jp_jsonl(
    path: str | Path, items: int = 404, systems: int = 10, raters: int = 3, seed: int = 0, **options: Any
) -> dict[str, int]:
    """Writes the file (`options` as `iter_llm_jp_items` takes them) and returns `_write_counted`'s counts."""
    return _write_counted(path, iter_llm_jp_items(items=items, systems=systems, raters=raters, seed=seed, **options))


def iter_lfqa_items(
    *, questions: int = 8, candidates: int = 4, raters: int = 3, seed: int = 0, with_auto_evals: bool = True
) -> Iterator[dict[str, Any]]:
    rng = random.Random(seed)
    rater_pool = [f"w{n:02d}" for n in range(max(raters * 3, 9))]
    for index in range(questions):
        responses: dict[str, Any] = {}
        for cand in range(candidates):
            quality = rng.uniform(0.0, 3.0)
            ids = rng.sample(rater_pool, raters)
            evals = {}
            for aspect, (lo, hi) in LFQA_ASPECTS.items():
                if hi == 3:
                    evals[aspect] = [max(lo, min(hi, round(rng.gauss(quality, 0.7)))) for _ in ids]
                else:
                    evals[aspect] = [rng.choice([-1, 0, 0, 0, 1]) for _ in ids]
            answer: dict[str, Any] = {
                "response": _text(rng, rng.randint(200, 1200), ascii_share=0.9, markdown_share=0.05),
                "human_evals": evals,
                "raters": ids,
            }
            if with_auto_evals:
                answer["auto_evals"] = {
                    "synthetic-judge": {"factuality": round(min(3.0, max(0.0, quality + rng.gauss(0, 0.5))), 3)}
                }
            responses[f"cand_{cand + 1}"] = answer
        yield {
            "id": f"lfqa-{index:04d}",
            "turns": [{"prompt": f"Synthetic long-form question number {index}?", "responses": responses}],
            "meta": {"preference": f"cand_{rng.randint(1, candidates)}"},
        }


def generate_lfqa_jsonl(
    path: str | Path, questions: int = 8, candidates: int = 4, raters: int = 3, seed: int = 0, **options: Any
) -> dict[str, int]:
    """Writes the file (`options` as `iter_lfqa_items` takes them) and returns `_write_counted`'s counts."""
    lines = iter_lfqa_items(questions=questions, candidates=candidates, raters=raters, seed=seed, **options)
    return _write_counted(path, lines)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Write a synthetic llm-human-eval-jp style JSONL file.")
    parser.add_argument("path")
    parser.add_argument("--items", type=int, default=404)
    parser.add_argument("--systems", type=int, default=10)
    parser.add_argument("--raters", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(generate_llm_jp_jsonl(args.path, args.items, args.systems, args.raters, args.seed))


# The llm-human-eval-jp layout's tokens for a missing rating.
MISSING_SCORES = frozenset({"NA", 0, None})


def add_imported_judge(items: Iterable[dict[str, Any]], name: str, seed: int) -> None:
    """Gives every rated answer an imported judge's scores under auto_evals, in place: per aspect, the mean of the
    humans' ratings (3 when none) plus Gaussian noise (sd 0.9), rounded and kept on the 1 to 5 scale."""
    rng = random.Random(seed)
    for item in items:
        for turn in item["turns"]:
            for answer in turn["responses"].values():
                evals = answer.get("human_evals")
                if not evals:
                    continue
                scores = {}
                for aspect, values in evals.items():
                    present = [v for v in values if v not in MISSING_SCORES]
                    centre = sum(present) / len(present) if present else 3
                    scores[aspect] = max(1, min(5, round(centre + rng.gauss(0, 0.9))))
                answer["auto_evals"] = {name: scores}

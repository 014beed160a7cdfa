"""The llm-human-eval-jp style sample: English and Japanese chat turns, four systems, three raters (a lenient, a
neutral and a strict one) scoring five aspects from 1 to 5, and a demo judge on three of them."""

import random
from typing import Any

JP_ASPECTS = ["detailedness", "factuality", "fluency", "relevance", "overall"]
JP_RATERS = ["synth-rater-1", "synth-rater-2", "synth-rater-3"]
RATER_BIAS = [0.4, 0.0, -0.6]
SYSTEMS = ["sys_a", "sys_b", "sys_c", "sys_d"]

# Quality profile per system style, in aspect order (detailedness, factuality, fluency, relevance, overall).
# A turn may override one system's profile ("overrides") when its answer is unusually good or bad.
PROFILES = {
    "sys_a": (4.7, 4.6, 4.8, 4.8, 4.7),  # thorough, structured
    "sys_b": (3.0, 4.4, 4.5, 4.5, 3.8),  # brief but correct
    "sys_c": (4.0, 2.3, 4.0, 3.8, 2.8),  # fluent, with a factual slip
    "sys_d": (1.6, 3.2, 2.6, 2.2, 1.8),  # terse or off target
}

# A rater who skipped a score records 0 in llm-human-eval-jp: a few such gaps, at fixed places
# (line, turn, system, aspect, rater position).
SKIPPED = [
    (0, 0, "sys_c", "detailedness", 2),
    (4, 0, "sys_d", "fluency", 1),
    (13, 0, "sys_a", "overall", 0),
    (16, 1, "sys_b", "relevance", 2),
    (21, 0, "sys_c", "factuality", 1),
]


def _score(rng: random.Random, quality: float, bias: float) -> int:
    return max(1, min(5, round(quality + bias + rng.gauss(0, 0.6))))


def _answer(rng: random.Random, turn: dict[str, Any], system: str) -> dict[str, Any]:
    quality = turn.get("overrides", {}).get(system, PROFILES[system])
    evals: dict[str, list[Any]] = {}
    for aspect, aspect_quality in zip(JP_ASPECTS, quality, strict=True):
        evals[aspect] = [_score(rng, aspect_quality, bias) for bias in RATER_BIAS]
    for aspect, rater_positions in turn.get("na", {}).items():
        for position in rater_positions:
            evals[aspect][position] = "NA"
    # An automatic judge saw every answer on three aspects; it tracks the humans with its own noise.
    judge = {
        aspect: round(min(5.0, max(1.0, q + rng.gauss(0, 0.5))), 2)
        for aspect, q in zip(JP_ASPECTS, quality, strict=True)
        if aspect in ("factuality", "relevance", "overall")
    }
    return {
        "response": turn["answers"][system],
        "human_evals": evals,
        "raters": list(JP_RATERS),
        "auto_evals": {"demo-judge": judge},
    }


def build_llm_jp_sample(prompts: list[dict[str, Any]], seed: int = 20261121) -> list[dict[str, Any]]:
    """The sample's lines from the hand-written prompts (llm_jp_prompts.json), the same for the same seed."""
    rng = random.Random(seed)
    lines = []
    for spec in prompts:
        turns = []
        for turn in spec["turns"]:
            responses = {system: _answer(rng, turn, system) for system in SYSTEMS}
            turns.append({"prompt": turn["prompt"], "reference": turn["reference"], "responses": responses})
        lines.append({"id": spec["id"], "turns": turns})
    for line_index, turn_index, system, aspect, position in SKIPPED:
        lines[line_index]["turns"][turn_index]["responses"][system]["human_evals"][aspect][position] = 0
    return lines

"""The whole study's design: the data every seam's numbers follow from.

The design is small enough to hold in one's head, and every number a seam checks follows from it:

- sixteen regular items q00..q15 and one gold item q16, each one turn with the answers of three systems; answer
  (i, s) states its true quality, 1 + (i + 2s) mod 5 on a 1-5 scale, in its text, so raters and the fake judge can
  read it;
- three imported experts (named in the file) rate every regular answer: one exactly, two within a point;
- three annotators rate every task of a campaign through the annotator API (a task is one turn's three answers) and
  pick a preferred answer; the third rates items q00..q03 upside down, which disputes those tasks (the rule: a
  spread above one point); the adjudicator settles q00's dispute, then the researcher excludes the third annotator;
- a judge reads the stated quality (sure and right below 5, hesitant and a point low at 5), runs on a real Celery
  worker against the fake provider, is certified on the experts' ratings, and fills a second, hybrid campaign;
- beside the scale aspect, an MQM span aspect: every annotator marks the word "answers" of an answer below quality 5
  as one error (major below 3, minor at 3 or 4) and confirms "no error" at 5; the excluded annotator also marks the
  word "question" as a minor error everywhere, so their spans differ from everyone's and their scores stay within a
  point (no span dispute); an error-span judge marks what the first two annotators mark, on the worker;
- the hybrid campaign (two raters per task) draws its human tasks by the judge's uncertainty; a fourth annotator
  rates each of them once, so every task drawn is rated and a slot of each is left;
- a third campaign states a stopping rule (the interval of sys_a's mean quality no wider than STOP_WIDTH); a fifth
  annotator rates until it stops, the rule read after each answer;
- a SummEval-shaped sample is imported through the built-in `summeval` mapping as a second dataset.
"""

from __future__ import annotations

import json
import re
from typing import Any

NAME = "whole study"
MAPPED_NAME = "whole study summeval"
CAMPAIGN = "whole study campaign"
HYBRID_CAMPAIGN = "whole study hybrid"
STOPPING_CAMPAIGN = "whole study stopping"
JUDGE = "study judge"
SPAN_JUDGE = "study span judge"
ASPECT = "quality"
SPANS = "errors"
SEVERITIES = {"minor": 1, "major": 5}
SYSTEMS = ("sys_a", "sys_b", "sys_c")
REGULAR_ITEMS = 16
GOLD_ITEM = REGULAR_ITEMS  # q16
EXPERTS = ("expert_1", "expert_2", "expert_3")
ANNOTATORS = ("annotator1", "annotator2", "annotator3")
EXCLUDED = "annotator3"
ACTIVE_ANNOTATOR = "annotator4"  # rates every task the hybrid campaign sends to humans, once
STOPPING_ANNOTATOR = "annotator5"  # rates the stopping campaign until it stops
HUMAN_SHARE = 0.5  # the expected share of the hybrid campaign's tasks drawn for humans
STOP_SYSTEM, STOP_WIDTH = "sys_a", 3.2
UPSIDE_DOWN_ITEMS = range(4)  # where the excluded annotator rates 6 - truth
SETTLED_ITEM = "q00"
EXCLUSION_REASON = "rates the first items upside down"
RATIONALE = "Read the stated quality,\nthen rated it."  # a line break, kept by every output
WORKER_ENV = {
    "JUDGE_API_BASE_ALLOWLIST": "127.0.0.1",
    "JUDGE_RETRY_BASE_MS": "20",
    "JUDGE_RETRY_CAP_S": "1",
    "JUDGE_LEASE_S": "10",
    "JUDGE_TIME_SLICE_S": "30",
}
RUBRIC = {
    "aspects": [
        {"name": ASPECT, "label": "Quality", "description": "How good is the answer?", "min": 1, "max": 5, "ideal": 5},
        {
            "name": SPANS,
            "kind": "spans",
            "label": "Errors",
            "description": "Mark every error in the answer.",
            "spans": {
                "categories": ["Accuracy/Mistranslation", "Fluency/Grammar"],
                "severities": SEVERITIES,
                "no_error_confirmation": True,
            },
        },
    ]
}
STATED = re.compile(r"^(sys_[abc]) answers question (\d+) \(true quality (\d)\)")


def item_id(i: int) -> str:
    return f"q{i:02d}"


def truth(i: int, s: int) -> int:
    return 1 + (i + 2 * s) % 5


def _clip(value: int) -> int:
    return min(5, max(1, value))


def expert_values(i: int, s: int) -> list[int]:
    t = truth(i, s)
    return [t, _clip(t + (i + s) % 3 - 1), _clip(t + (i + s + 1) % 3 - 1)]


def annotator_value(username: str, i: int, s: int) -> int:
    t = truth(i, s)
    if i == GOLD_ITEM:
        return t  # everyone passes the gold item
    if username == "annotator2":
        return _clip(t + (i + s + 2) % 3 - 1)
    if username == EXCLUDED and i in UPSIDE_DOWN_ITEMS:
        return 6 - t
    return t


def _marked(text: str, word: str, category: str, severity: str) -> dict[str, Any]:
    start = text.index(word)
    return {"start": start, "end": start + len(word), "category": category, "severity": severity}


def span_token(username: str, text: str) -> dict[str, Any]:
    """What the annotator marks on an answer, read from its stated quality (see the module's design)."""
    t = int(STATED.match(text).group(3))  # type: ignore[union-attr]
    spans = []
    if t < 5:
        spans.append(_marked(text, "answers", "Accuracy/Mistranslation", "major" if t < 3 else "minor"))
    if username == EXCLUDED:
        spans.append(_marked(text, "question", "Fluency/Grammar", "minor"))
    return {"no_error": not spans, "spans": spans}


def mqm_score(token: dict[str, Any]) -> float:
    """The MQM score of a span token under the study's scheme: the sum of its errors' severity weights."""
    return float(sum(SEVERITIES[span["severity"]] for span in token["spans"]))


def span_judge_reply(body: dict[str, Any]) -> str:
    """The error-span judge marks what the first two annotators mark, quoting the word."""
    found = re.search(r"true quality (\d)", body["messages"][-1]["content"])
    t = int(found.group(1)) if found else 5
    errors = [] if t == 5 else [{"quote": "answers", "category": "Accuracy/Mistranslation", "severity": "minor"}]
    if errors and t < 3:
        errors[0]["severity"] = "major"
    return "Read the stated quality.\n" + json.dumps({"errors": errors})


def study_lines() -> list[dict[str, Any]]:
    lines = []
    for i in range(REGULAR_ITEMS + 1):
        responses: dict[str, Any] = {}
        for s, system in enumerate(SYSTEMS):
            answer: dict[str, Any] = {"response": f"{system} answers question {i} (true quality {truth(i, s)})."}
            if i != GOLD_ITEM:  # the gold item measures the annotators; it carries no imported ratings
                answer["human_evals"] = {ASPECT: expert_values(i, s)}
                answer["raters"] = list(EXPERTS)
            responses[system] = answer
        line: dict[str, Any] = {
            "id": item_id(i),
            "turns": [{"prompt": f"Question {i}: explain it.", "responses": responses}],
        }
        if i == GOLD_ITEM:
            expected = {system: {ASPECT: truth(i, s)} for s, system in enumerate(SYSTEMS)}
            line["gold"] = {"kind": "gold", "expected": expected, "tolerance": 0}
        lines.append(line)
    return lines


def summeval_lines() -> list[dict[str, Any]]:
    """Two summaries of one document as Yale-LILY's model_annotations.aligned.jsonl has them (three experts)."""

    def marks(c: int, s: int, f: int, r: int) -> dict[str, int]:
        return {"coherence": c, "consistency": s, "fluency": f, "relevance": r}

    document = "dm-test-8764fb95bfad8ee849274873a92fb8d6b400eee2"
    reference = "Andros Townsend an 83rd minute sub in Tottenham 's draw with Burnley ."
    rows = [
        (
            "M11",
            "paul merson was brought on with only seven minutes remaining .",
            [(1, 1, 3, 2), (2, 5, 5, 3), (1, 1, 3, 2)],
        ),
        ("M13", "andros townsend scored the equaliser .", [(4, 5, 5, 4), (3, 5, 5, 4), (4, 5, 5, 3)]),
        ("M17", "tottenham drew with burnley .", [(3, 4, 4, 4), (3, 4, 5, 4), (2, 4, 4, 3)]),
    ]
    return [
        {
            "id": document,
            "decoded": decoded,
            "expert_annotations": [marks(*m) for m in expert],
            "turker_annotations": [marks(3, 3, 3, 3)] * 5,
            "references": [reference, "crowd ref"],
            "model_id": model,
            "filepath": f"cnndm/dailymail/stories/{document[8:]}.story",
        }
        for model, decoded, expert in rows
    ]

"""The public WMT MQM TSV as an evalsite dataset: the ready-made mapping behind ``manage.py import_wmt_mqm``.

One item per segment (its id the file's seg_id, its prompt the source text without marks), one answer per system
(the target without marks), one rater per MQM rater, and one span aspect "mqm" whose token per rater holds that
rater's errors in code points into the target (an omission keeps its offsets in the source as source_start and
source_end). The rubric lists the categories found in the file and weighs them as the WMT 2020 scheme does (minor 1,
major 5, neutral 0; minor Fluency/Punctuation 0.1; major Non-translation 25), so each rating's value is the penalty
Google's scorer gives and the per-segment average reproduces the published ``*.avg_seg_scores.tsv`` (negated there).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable
from typing import IO, Any

from django.contrib.auth.models import User

from annotations.datasets.importing import ImportResult, dataset_import
from annotations.datasets.mqm_tsv import MqmRating, read_mqm_tsv
from annotations.rubrics.specs import RubricSpec, parse_rubric
from annotations.spans.error_spans import WMT2020

ASPECT = "mqm"


def mqm_rubric(ratings: Iterable[MqmRating]) -> RubricSpec:
    categories = sorted({error.span.category for rating in ratings for error in rating.errors})
    severities = sorted(
        {error.span.severity for rating in ratings for error in rating.errors} | {"minor", "major"},
        key=list(WMT2020.severity).index,
    )
    pairs = [
        {"category": category, "severity": severity, "weight": weight}
        for (category, severity), weight in WMT2020.category_severity.items()
        if category in categories and severity in severities
    ]
    spans: dict[str, Any] = {
        "categories": categories or ["Other"],
        "severities": {severity: WMT2020.severity[severity] for severity in severities},
        "no_error_confirmation": True,
    }
    if pairs:
        spans["category_severity_weights"] = pairs
    aspect = {
        "name": ASPECT,
        "kind": "spans",
        "label": {"en": "MQM errors", "ja": "MQM の誤り"},
        "description": {
            "en": "Errors marked in the translation, weighted as in WMT 2020 (minor 1, major 5).",
            "ja": "翻訳の誤り。WMT 2020 の重み（軽微 1、重大 5）で採点します。",
        },
        "spans": spans,
    }
    return parse_rubric({"aspects": [aspect]}, source="mapping:wmt-mqm")


def _token(rating: MqmRating) -> dict[str, Any]:
    spans = []
    for error in rating.errors:
        entry = error.span.token()
        if error.source_offsets is not None:
            entry["source_start"], entry["source_end"] = error.source_offsets
        spans.append(entry)
    return {"no_error": rating.no_error and not spans, "spans": spans}


def mqm_jsonl(ratings: list[MqmRating]) -> bytes:
    """The ratings as evalsite JSONL, one line per segment, in the file's order of segments."""
    segments: dict[str, dict[str, Any]] = {}
    for rating in ratings:
        item = segments.setdefault(rating.seg_id, {"id": rating.seg_id, "doc": rating.doc, "source": rating.source})
        answer = item.setdefault("responses", {}).setdefault(
            rating.system, {"response": rating.target, "raters": [], "human_evals": {ASPECT: []}}
        )
        answer["raters"].append(rating.rater)
        answer["human_evals"][ASPECT].append(_token(rating))
    lines = []
    for item in segments.values():
        line = {
            "id": item["id"],
            "meta": {"doc": item["doc"]},
            "turns": [{"prompt": item["source"], "responses": item["responses"]}],
        }
        lines.append(json.dumps(line, ensure_ascii=False))
    return "\n".join(lines).encode()


def mqm_tsv_import(*, stream: IO[str], name: str, owner: User | None = None) -> ImportResult:
    ratings = read_mqm_tsv(stream)
    return dataset_import(stream=io.BytesIO(mqm_jsonl(ratings)), name=name, rubric=mqm_rubric(ratings), owner=owner)

"""A small span-annotation world shared by the span tests: a dataset whose answers are in English with an emoji,
in Japanese and with a combining mark, rated on an MQM span aspect beside a scale aspect."""

import io
import json
from typing import Any

from django.contrib.auth.models import User

from annotations.datasets.importing import dataset_import
from annotations.models import Campaign, Dataset
from annotations.rubrics.specs import parse_rubric
from tests.annotate.factories import make_campaign

ANSWERS = [
    "The cat 😀 eat the fish quickly.",
    "猫が魚をたべました。とてもおいしかったです。",
    "Un cafe\u0301 noir, s'il vous plait.",
]

SPAN_RUBRIC: dict[str, Any] = {
    "aspects": [
        {
            "name": "mqm",
            "kind": "spans",
            "label": {"en": "Errors", "ja": "誤り"},
            "description": {"en": "Mark every error in the answer.", "ja": "回答の誤りをすべて指摘してください。"},
            "spans": {
                "categories": ["Accuracy/Mistranslation", "Fluency/Grammar", "Fluency/Spelling"],
                "severities": {"minor": 1, "major": 5},
                "no_error_confirmation": True,
                "labels": {
                    "ja": {
                        "Accuracy/Mistranslation": "正確さ/誤訳",
                        "Fluency/Grammar": "流暢さ/文法",
                        "Fluency/Spelling": "流暢さ/綴り",
                        "minor": "軽微",
                        "major": "重大",
                    }
                },
            },
        },
        {"name": "overall", "label": {"en": "Overall", "ja": "総合評価"}, "min": 1, "max": 5, "missing": []},
    ]
}


def span_dataset(name: str = "span set", *, owner: User | None = None) -> Dataset:
    lines = [
        {
            "id": f"q{index}",
            "turns": [{"prompt": f"Translate sentence {index}.", "responses": {"sys_a": {"response": text}}}],
        }
        for index, text in enumerate(ANSWERS)
    ]
    body = "\n".join(json.dumps(line, ensure_ascii=False) for line in lines)
    return dataset_import(
        stream=io.BytesIO(body.encode()), name=name, rubric=parse_rubric(SPAN_RUBRIC, source="file"), owner=owner
    ).dataset


def span_campaign(annotators: list[User], *, owner: User | None = None, **kwargs: Any) -> Campaign:
    kwargs.setdefault("raters_per_item", 1)
    kwargs.setdefault("allow_revisit", True)
    kwargs.setdefault("ask_preference", False)
    kwargs.setdefault("rationale_required", False)
    return make_campaign(span_dataset(owner=owner), annotators, name="Span study", **kwargs)

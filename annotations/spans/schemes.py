"""The scheme of a span aspect: which error categories and severities a rater may mark, how much each weighs, and
how an answer's weighted error count is normalised into its MQM score.

An aspect of kind "spans" stores its scheme as JSON on the Aspect row; ``SpanScheme.from_json`` reads it back and
``to_json`` writes exactly what a rubric file gives, so a rubric export round-trips.

Rubric form (every key but "categories" and "severities" optional):

    "spans": {
      "categories": ["Accuracy/Mistranslation", "Fluency/Grammar", ...],
      "severities": {"minor": 1, "major": 5, "critical": 10},
      "category_weights": {"Non-translation": 25},
      "category_severity_weights": [{"category": "Fluency/Punctuation", "severity": "minor", "weight": 0.1}],
      "normalisation": "answer" | "100_words" | "100_characters",
      "no_error_confirmation": true,
      "labels": {"ja": {"Accuracy/Mistranslation": "正確さ/誤訳", "minor": "軽微"}}
    }
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from annotations.errors import RubricError
from annotations.spans.error_spans import SEVERITIES, MqmWeights, Span, mqm_penalty

NORMALISATIONS = ("answer", "100_words", "100_characters")
CATEGORY_MAX_LENGTH = 200
SEVERITY_MAX_LENGTH = 10
# A span aspect's scores start at 0 (no error); the upper end is only the range shown and used by statistics that
# need one, since a weighted error count has no natural ceiling. 25 is the WMT cap of one segment's score.
DEFAULT_MAX_SCORE = 25.0


@dataclass(frozen=True)
class SpanScheme:
    categories: tuple[str, ...]
    severities: Mapping[str, float]
    category_weights: Mapping[str, float] = field(default_factory=dict)
    category_severity_weights: Mapping[tuple[str, str], float] = field(default_factory=dict)
    normalisation: str = "answer"
    no_error_confirmation: bool = False
    # Other languages' names of categories and severities: {"ja": {"Accuracy/Mistranslation": "...", "minor": "..."}}.
    labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    @property
    def weights(self) -> MqmWeights:
        return MqmWeights(
            name="rubric",
            severity=dict(self.severities),
            category=dict(self.category_weights),
            category_severity=dict(self.category_severity_weights),
        )

    def check_span(self, span: Span) -> None:
        """ValueError naming what the scheme does not allow."""
        if span.category not in self.categories:
            raise ValueError(f"unknown error category {span.category!r}; expected one of {', '.join(self.categories)}")
        if span.severity not in self.severities:
            raise ValueError(f"unknown severity {span.severity!r}; expected one of {', '.join(self.severities)}")

    def score(self, spans: Iterable[Span], text: str) -> float:
        """The answer's MQM score: its weighted error count, per answer or per 100 words or characters of ``text``.

        Words are runs of non-space characters (``str.split``); a text without spaces, such as Japanese, is one word,
        so a Japanese dataset should normalise per 100 characters. An empty text normalises as one unit.
        """
        penalty = mqm_penalty(spans, self.weights)
        if self.normalisation == "100_words":
            return penalty * 100.0 / max(1, len(text.split()))
        if self.normalisation == "100_characters":
            return penalty * 100.0 / max(1, len(text))
        return penalty

    def label(self, key: str, language: str) -> str:
        return (self.labels.get(language) or {}).get(key) or key

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"categories": list(self.categories), "severities": dict(self.severities)}
        if self.category_weights:
            data["category_weights"] = dict(self.category_weights)
        if self.category_severity_weights:
            data["category_severity_weights"] = [
                {"category": category, "severity": severity, "weight": weight}
                for (category, severity), weight in self.category_severity_weights.items()
            ]
        if self.normalisation != "answer":
            data["normalisation"] = self.normalisation
        if self.no_error_confirmation:
            data["no_error_confirmation"] = True
        if self.labels:
            data["labels"] = {language: dict(texts) for language, texts in self.labels.items()}
        return data

    @classmethod
    def from_json(cls, data: Any) -> SpanScheme:
        return parse_span_scheme(data, where="span scheme")


def _weight(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise RubricError(f"{where}: a weight must be a number of at least 0, found {value!r}")
    return float(value)


def _category(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip() or value != value.strip():
        raise RubricError(f"{where}: a category must be a non-empty string without surrounding spaces, found {value!r}")
    if len(value) > CATEGORY_MAX_LENGTH:
        raise RubricError(f"{where}: a category is at most {CATEGORY_MAX_LENGTH} characters long")
    if any(not part.strip() for part in value.split("/")):
        raise RubricError(f'{where}: category {value!r} has an empty level; nest levels as "Accuracy/Mistranslation"')
    return value


def parse_span_scheme(data: Any, *, where: str) -> SpanScheme:
    """The typed scheme of a rubric's "spans" object, or RubricError naming the first problem."""
    if not isinstance(data, dict):
        raise RubricError(f"{where}: 'spans' must be an object with 'categories' and 'severities'")
    known = {
        "categories",
        "severities",
        "category_weights",
        "category_severity_weights",
        "normalisation",
        "no_error_confirmation",
        "labels",
    }
    unknown = sorted(set(data) - known)
    if unknown:
        raise RubricError(f"{where}: unknown key {unknown[0]!r} in 'spans'; expected {', '.join(sorted(known))}")
    raw_categories = data.get("categories")
    if not isinstance(raw_categories, list) or not raw_categories:
        raise RubricError(f"{where}: 'categories' must be a non-empty list of category names")
    categories = tuple(_category(value, f"{where}: 'categories'") for value in raw_categories)
    if len(set(categories)) != len(categories):
        twice = next(value for value in categories if categories.count(value) > 1)
        raise RubricError(f"{where}: category {twice!r} appears twice")
    raw_severities = data.get("severities")
    if not isinstance(raw_severities, dict) or not raw_severities:
        raise RubricError(f"{where}: 'severities' must map severity names to weights, such as {{\"minor\": 1}}")
    severities: dict[str, float] = {}
    for name, weight in raw_severities.items():
        if name not in SEVERITIES:
            raise RubricError(f"{where}: unknown severity {name!r}; expected some of {', '.join(SEVERITIES)}")
        severities[name] = _weight(weight, f"{where}: severity {name!r}")
    raw_category_weights = data.get("category_weights", {})
    if not isinstance(raw_category_weights, dict):
        raise RubricError(f"{where}: 'category_weights' must map categories to weights")
    category_weights: dict[str, float] = {}
    for name, weight in raw_category_weights.items():
        if name not in categories:
            raise RubricError(f"{where}: 'category_weights' names {name!r}, which is not among the categories")
        category_weights[name] = _weight(weight, f"{where}: category {name!r}")
    raw_pairs = data.get("category_severity_weights", [])
    if not isinstance(raw_pairs, list):
        raise RubricError(f"{where}: 'category_severity_weights' must be a list of {{category, severity, weight}}")
    pairs: dict[tuple[str, str], float] = {}
    for index, entry in enumerate(raw_pairs):
        at = f"{where}: 'category_severity_weights'[{index}]"
        if not isinstance(entry, dict) or set(entry) != {"category", "severity", "weight"}:
            raise RubricError(f"{at}: expected an object with exactly 'category', 'severity' and 'weight'")
        if entry["category"] not in categories:
            raise RubricError(f"{at}: {entry['category']!r} is not among the categories")
        if entry["severity"] not in severities:
            raise RubricError(f"{at}: {entry['severity']!r} is not among the severities")
        pairs[(entry["category"], entry["severity"])] = _weight(entry["weight"], at)
    normalisation = data.get("normalisation", "answer")
    if normalisation not in NORMALISATIONS:
        raise RubricError(
            f"{where}: 'normalisation' must be one of {', '.join(NORMALISATIONS)}, found {normalisation!r}"
        )
    confirmation = data.get("no_error_confirmation", False)
    if not isinstance(confirmation, bool):
        raise RubricError(f"{where}: 'no_error_confirmation' must be true or false")
    raw_labels = data.get("labels", {})
    names = {*categories, *severities}
    if not isinstance(raw_labels, dict) or not all(
        isinstance(texts, dict) and all(key in names and isinstance(text, str) for key, text in texts.items())
        for texts in raw_labels.values()
    ):
        raise RubricError(f"{where}: 'labels' must map a language to texts for the categories and severities")
    return SpanScheme(
        categories=categories,
        # From least to most severe whatever the order written: a jsonb column does not keep the order of keys.
        severities={name: severities[name] for name in SEVERITIES if name in severities},
        category_weights=category_weights,
        category_severity_weights=pairs,
        normalisation=normalisation,
        no_error_confirmation=confirmation,
        labels={language: dict(texts) for language, texts in raw_labels.items()},
    )

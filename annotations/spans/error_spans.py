"""Error spans and the MQM penalty: plain Python, standard library only.

An error span addresses the exact stored text by character offsets that are Python ``str`` indices, that is Unicode
code points: an emoji outside the Basic Multilingual Plane is one position (a browser's UTF-16 offsets count it as
two), and a combining mark is a position of its own. ``start`` is inclusive and ``end`` exclusive, so
``text[start:end]`` is the marked text. An error that marks nothing in the text (an omission marked in the source, or
a whole-segment Non-translation) has no offsets: it counts in the MQM penalty and is left out of span agreement.

Both the judge's statistics and the dataset readers use this module, and the annotations domain does not import the
judge, so it lives here at the bottom of the annotations layers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

SEVERITIES = ("neutral", "minor", "major", "critical")


@dataclass(frozen=True)
class Span:
    start: int | None
    end: int | None
    category: str
    severity: str

    def __post_init__(self) -> None:
        if (self.start is None) != (self.end is None):
            raise ValueError("a span has both offsets or neither")
        if self.start is not None and self.end is not None:
            for name, offset in (("start", self.start), ("end", self.end)):
                if isinstance(offset, bool) or not isinstance(offset, int):
                    raise ValueError(f"span {name} must be an integer offset, got {offset!r}")
            if self.start < 0 or self.end < self.start:
                raise ValueError(f"span offsets must satisfy 0 <= start <= end, got {self.start}..{self.end}")
        if self.severity not in SEVERITIES:
            raise ValueError(f"unknown severity {self.severity!r}; expected one of {', '.join(SEVERITIES)}")

    @property
    def located(self) -> bool:
        return self.start is not None

    def token(self) -> dict[str, Any]:
        """The span as an entry of a stored Rating token's "spans" list."""
        return {"start": self.start, "end": self.end, "category": self.category, "severity": self.severity}

    def check_within(self, text_length: int) -> None:
        if self.end is not None and self.end > text_length:
            raise ValueError(f"span {self.start}..{self.end} runs past the end of a text of {text_length} characters")


def category_within(expected: str, given: str) -> bool:
    """Whether a given category is the expected one or nested under it: "Fluency" holds "Fluency/Grammar",
    "Fluency/Grammar" holds only itself, and levels split at "/" ("Fluency" does not hold "FluencyX"). Gold on spans
    passes by this rule, and the span agreement statistics count a category match by it."""
    return given == expected or given.startswith(expected + "/")


@dataclass(frozen=True)
class MqmWeights:
    """Weight of an error: its (category, severity) if listed, else its category if listed, else its severity.

    A category is matched as written, whole path included ("Fluency/Punctuation").
    """

    name: str
    severity: Mapping[str, float]
    category: Mapping[str, float] = field(default_factory=dict)
    category_severity: Mapping[tuple[str, str], float] = field(default_factory=dict)

    def weight(self, span: Span) -> float:
        if (span.category, span.severity) in self.category_severity:
            return self.category_severity[(span.category, span.severity)]
        if span.category in self.category:
            return self.category[span.category]
        if span.severity not in self.severity:
            raise ValueError(f"the {self.name} weights give no weight to severity {span.severity!r}")
        return self.severity[span.severity]


# The public files spell the category "Non-translation!" (the rating tool's label); the paper writes it without "!".
NON_TRANSLATION = ("Non-translation", "Non-translation!")

# Freitag et al. (TACL 2021), as used for the public WMT MQM data and by Google's own scorer: Major 5, Minor 1,
# Neutral 0; Major Non-translation 25; Minor Fluency/Punctuation 0.1. The scheme has no Critical severity.
WMT2020 = MqmWeights(
    name="WMT 2020",
    severity={"neutral": 0.0, "minor": 1.0, "major": 5.0},
    category_severity={
        ("Fluency/Punctuation", "minor"): 0.1,
        **{(category, "major"): 25.0 for category in NON_TRANSLATION},
    },
)

# The MQM core weights with a Critical level: minor 1, major 5, critical 10; Non-translation 25 whatever its severity.
MQM_CORE = MqmWeights(
    name="MQM core",
    severity={"neutral": 0.0, "minor": 1.0, "major": 5.0, "critical": 10.0},
    category=dict.fromkeys(NON_TRANSLATION, 25.0),
)


def mqm_penalty(spans: Iterable[Span], weights: MqmWeights) -> float:
    """The weighted error count of one answer by one rater; 0 for an answer confirmed to have no error."""
    return float(sum(weights.weight(span) for span in spans))

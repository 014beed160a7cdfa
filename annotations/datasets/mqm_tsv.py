"""The public MQM TSV of WMT (google/wmt-mqm-human-evaluation) read as rated answers with error spans.

One row is one error (or a "No-error" confirmation) that one rater found in one system's translation of one segment.
Columns, by header name: system, doc, doc_id, seg_id, rater, source, target, category, severity; any others (the
files' comment column) are ignored. The erroneous stretch is wrapped in ``<v>…</v>`` in the target, or in the source
for an omission. The reader removes the marks and turns them into code-point offsets into the text without marks; a
mark left without its pair (a few rows of the public files) is removed too, and that error keeps no offsets and says
why in ``problem``.
Rows of the same system, segment and rater become one `MqmRating`; their texts without marks must agree.

Fields are split on tabs with no quoting, as the files are written (a target may hold a double quote of its own).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from annotations.errors import DatasetImportError
from annotations.spans.error_spans import WMT2020, MqmWeights, Span, mqm_penalty

COLUMNS = ("system", "doc", "doc_id", "seg_id", "rater", "source", "target", "category", "severity")
OPEN, CLOSE = "<v>", "</v>"
NO_ERROR = "No-error"
SEVERITY_NAMES = {"Neutral": "neutral", "Minor": "minor", "Major": "major", "Critical": "critical"}


@dataclass(frozen=True)
class MqmError:
    """One error: its span in the target (no offsets if it marks nothing there) and its offsets in the source."""

    span: Span
    source_offsets: tuple[int, int] | None
    problem: str | None = None  # why a mark in the row gave no offsets
    line: int = 0


@dataclass
class MqmRating:
    system: str
    doc: str
    doc_id: str
    seg_id: str
    rater: str
    source: str
    target: str
    errors: list[MqmError] = field(default_factory=list)
    no_error: bool = False
    first_line: int = 0

    @property
    def spans(self) -> list[Span]:
        return [error.span for error in self.errors]


def _unmark(text: str, line: int, column: str) -> tuple[str, tuple[int, int] | None, str | None]:
    """The text without marks, the marked offsets, and why a mark gives no offsets."""
    opens, closes = text.count(OPEN), text.count(CLOSE)
    if opens == 0 and closes == 0:
        return text, None, None
    if opens + closes == 1:
        # The public files hold a few marks left open (or only closed); where the stretch ends is not known, so the
        # error keeps no offsets rather than a guessed end.
        lone = OPEN if opens else CLOSE
        return text.replace(lone, "", 1), None, f"the {column} has {lone} without its pair"
    if opens != 1 or closes != 1 or text.index(OPEN) > text.index(CLOSE):
        raise DatasetImportError(
            f"the {column} must hold at most one {OPEN}…{CLOSE} pair, in that order",
            line=line,
            field=column,
            found=text,
        )
    start = text.index(OPEN)
    end = text.index(CLOSE) - len(OPEN)
    return text.replace(OPEN, "", 1).replace(CLOSE, "", 1), (start, end), None


def read_mqm_tsv(lines: Iterable[str]) -> list[MqmRating]:
    """Read the file's lines (header first); line numbers in errors count the header as line 1."""
    reader = csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE)
    header = next(reader, None)
    if header is None:
        raise DatasetImportError("the MQM file is empty", line=1)
    missing = [name for name in COLUMNS if name not in header]
    if missing:
        raise DatasetImportError(f"the MQM file has no column {', '.join(missing)}", line=1, field=missing[0])
    where = {name: header.index(name) for name in COLUMNS}
    ratings: dict[tuple[str, str, str], MqmRating] = {}
    for line, row in enumerate(reader, start=2):
        if not row:
            continue
        if len(row) != len(header):
            raise DatasetImportError(
                f"the row has {len(row)} fields but the header has {len(header)}",
                line=line,
                expected=str(len(header)),
                found=str(len(row)),
            )
        value = {name: row[index] for name, index in where.items()}
        target, target_offsets, target_problem = _unmark(value["target"], line, "target")
        source, source_offsets, source_problem = _unmark(value["source"], line, "source")
        key = (value["system"], value["seg_id"], value["rater"])
        rating = ratings.get(key)
        if rating is None:
            rating = ratings[key] = MqmRating(
                system=value["system"],
                doc=value["doc"],
                doc_id=value["doc_id"],
                seg_id=value["seg_id"],
                rater=value["rater"],
                source=source,
                target=target,
                first_line=line,
            )
        elif (rating.source, rating.target, rating.doc) != (source, target, value["doc"]):
            raise DatasetImportError(
                f"the row's document, source or target (marks removed) differs from line {rating.first_line} "
                "of the same system, segment and rater",
                line=line,
            )
        if value["category"] == NO_ERROR or value["severity"] == NO_ERROR:
            rating.no_error = True
            continue
        severity = SEVERITY_NAMES.get(value["severity"])
        if severity is None:
            raise DatasetImportError(
                "unknown severity",
                line=line,
                field="severity",
                expected=", ".join([*SEVERITY_NAMES, NO_ERROR]),
                found=value["severity"],
            )
        start, end = target_offsets if target_offsets is not None else (None, None)
        rating.errors.append(
            MqmError(
                Span(start, end, value["category"], severity),
                source_offsets,
                "; ".join(problem for problem in (target_problem, source_problem) if problem) or None,
                line,
            )
        )
    return list(ratings.values())


def segment_scores(ratings: Iterable[MqmRating], weights: MqmWeights = WMT2020) -> Mapping[tuple[str, str], float]:
    """Per (system, seg_id), the MQM penalty averaged over the raters who rated that translation.

    The published ``*.avg_seg_scores.tsv`` files give the same numbers negated (higher is better there).
    """
    totals: dict[tuple[str, str], list[float]] = {}
    for rating in ratings:
        totals.setdefault((rating.system, rating.seg_id), []).append(mqm_penalty(rating.spans, weights))
    return {key: sum(values) / len(values) for key, values in totals.items()}

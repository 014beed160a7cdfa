"""Error spans in the flat layout: after a span aspect's rating row (whose value is the answer's MQM score), one row
of kind "error_span" per error, the error itself ({"start", "end", "category", "severity", "note"?}, code points
into the answer) in the raw column. Read from the rating's token, the same source the ErrorSpan rows are written
from (annotations.services.error_spans_write)."""

from collections.abc import Iterator
from typing import Any

from annotations.datasets.exporting import CONSENSUS_KEY

ERROR_SPAN_KIND = "error_span"


def error_span_rows(record: dict[str, Any]) -> Iterator[dict[str, Any]]:
    raw = record.get("raw")
    if not isinstance(raw, dict) or record.get("is_missing"):
        return
    for span in raw.get("spans") or []:
        yield {
            **record,
            "kind": ERROR_SPAN_KIND,
            "raw": span,
            "value": None,
            "rationale": "",
            "comment": "",
            CONSENSUS_KEY: None,
        }

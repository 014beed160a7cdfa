"""The four downloads built on the exports: their kinds, file names, media types and streamed bodies, and the rubric
file that goes with them."""

import json
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from django.http import StreamingHttpResponse

from annotations.datasets.exporting import (
    iter_export_lines,
)
from annotations.datasets.flat_export import (
    iter_flat_csv,
    iter_flat_jsonl,
    iter_flat_rows,
)
from annotations.models import (
    Dataset,
)
from annotations.rubrics.specs import aspect_rubric_texts

JSONL_TYPE = "application/jsonl; charset=utf-8"
CSV_TYPE = "text/csv; charset=utf-8"
FILE_STEM_MAX_CHARS = 100
_UNSAFE_IN_FILENAME = re.compile(r"[^\w.-]+")


JSON_TYPE = "application/json; charset=utf-8"


@dataclass(frozen=True)
class ExportKind:
    suffix: str
    content_type: str
    include_judges: bool = False
    flat: str = ""  # "", "jsonl" or "csv"
    history: bool = False  # flat only: earlier versions of corrected answers too
    rubric: bool = False


EXPORT_KINDS: dict[str, ExportKind] = {
    "jsonl": ExportKind(".jsonl", JSONL_TYPE),
    "judges-jsonl": ExportKind(".judges.jsonl", JSONL_TYPE, include_judges=True),
    "flat-csv": ExportKind(".flat.csv", CSV_TYPE, flat="csv"),
    "flat-jsonl": ExportKind(".flat.jsonl", JSONL_TYPE, flat="jsonl"),
    "flat-csv-history": ExportKind(".flat-history.csv", CSV_TYPE, flat="csv", history=True),
    "flat-jsonl-history": ExportKind(".flat-history.jsonl", JSONL_TYPE, flat="jsonl", history=True),
    "rubric": ExportKind(".rubric.json", JSON_TYPE, rubric=True),
}


def dataset_rubric(dataset: Dataset) -> dict[str, Any]:
    """The dataset's rubric as a rubric file: importing the JSONL export with it gives back the same aspects,
    texts in every language included."""
    aspects = []
    for aspect in dataset.aspects.order_by("position", "pk"):
        entry: dict[str, Any] = {"name": aspect.name}
        texts = aspect_rubric_texts(
            label=aspect.label,
            description=aspect.description,
            labels=aspect.labels or {},
            translations=aspect.translations or {},
        )
        entry.update({key: value for key, value in texts.items() if value})
        entry.update(
            {
                "min": _plain_number(aspect.min_value),
                "max": _plain_number(aspect.max_value),
                "ideal": _plain_number(aspect.ideal),
                "level": aspect.level,
                "missing": aspect.missing,
            }
        )
        if aspect.is_spans:
            entry["kind"] = aspect.kind
            entry["spans"] = aspect.span_scheme
        aspects.append(entry)
    systems = getattr(dataset, "rubric", None)
    return {"aspects": aspects, "systems": dict(systems.systems) if systems is not None else {}}


def _plain_number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


def export_kind(*, flat: str = "", include_judges: bool = False, history: bool = False, rubric: bool = False) -> str:
    """The download the command line's and the API's flags name. The flat layout carries no judge scores, so
    include_judges only matters without flat; history only matters with it."""
    if rubric:
        return "rubric"
    if flat:
        return f"flat-{flat}-history" if history else f"flat-{flat}"
    return "judges-jsonl" if include_judges else "jsonl"


def iter_export(*, dataset: Dataset, kind: str) -> Iterator[str]:
    spec = EXPORT_KINDS[kind]
    if spec.rubric:
        return iter([json.dumps(dataset_rubric(dataset), ensure_ascii=False, indent=2) + "\n"])
    if spec.flat == "csv":
        return iter_flat_csv(iter_flat_rows(dataset=dataset, history=spec.history), history=spec.history)
    if spec.flat == "jsonl":
        return iter_flat_jsonl(iter_flat_rows(dataset=dataset, history=spec.history))
    return iter_export_lines(dataset=dataset, include_judges=spec.include_judges)


def safe_file_stem(name: str) -> str:
    """The name as a file name on any system: letters (any script), digits, "_", "-" and inner dots only. Empty
    when nothing usable is left; a leading dot would hide the file, and separators or controls could misplace it."""
    text = _UNSAFE_IN_FILENAME.sub("-", unicodedata.normalize("NFKC", name))
    text = re.sub(r"\.{2,}", ".", text)
    return text.strip("-._")[:FILE_STEM_MAX_CHARS].rstrip("-._")


def dataset_filename(dataset: Dataset, suffix: str) -> str:
    return f"{safe_file_stem(dataset.name) or f'dataset-{dataset.pk}'}{suffix}"


def export_filename(dataset: Dataset, kind: str) -> str:
    return dataset_filename(dataset, EXPORT_KINDS[kind].suffix)


def dataset_disposition(dataset: Dataset, suffix: str) -> str:
    """An attachment header naming the file after the dataset. A non-ASCII name goes in filename* (RFC 6266, UTF-8)
    after a plain filename for clients that do not read filename*: the dataset id, since what is left of a
    name once its non-ASCII letters are dropped is rarely recognisable."""
    filename = dataset_filename(dataset, suffix)
    if filename.isascii():
        return f'attachment; filename="{filename}"'
    fallback = f"dataset-{dataset.pk}{suffix}"
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"


def export_disposition(dataset: Dataset, kind: str) -> str:
    return dataset_disposition(dataset, EXPORT_KINDS[kind].suffix)


def export_response(dataset: Dataset, kind: str) -> StreamingHttpResponse:
    """One download for the pages and the API alike."""
    body = iter_export(dataset=dataset, kind=kind)
    response = StreamingHttpResponse(
        (chunk.encode("utf-8") for chunk in body), content_type=EXPORT_KINDS[kind].content_type
    )
    response["Content-Disposition"] = export_disposition(dataset, kind)
    response["X-Content-Type-Options"] = "nosniff"
    return response

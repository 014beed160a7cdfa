"""Parquet exports with typed columns, and a folder that Hugging Face ``datasets`` reads with its dataset card.

Four tables: ``answers`` (one row per answer: the item, turn, prompt, reference, system and text), ``ratings`` (the
flat export's rating rows), ``preferences`` (its preference rows, candidates as a list, ties marked) and
``error_spans`` (its error_span rows: one per error a rater marked, with typed offsets in code points). The
ratings, preferences and spans are the flat export's own rows (``iter_flat_rows``), so both layouts always agree.
Reading the first three back through the ``evalsite-parquet`` mapping gives the same dataset (the spans are in the
ratings' tokens too).
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.http import HttpResponse

from annotations.datasets.downloads import dataset_disposition, dataset_filename, dataset_rubric
from annotations.datasets.flat_export import iter_flat_rows
from annotations.datasets.span_rows import ERROR_SPAN_KIND
from annotations.models import Dataset, Rater, Response

if TYPE_CHECKING:
    import pyarrow as pa

ROW_GROUP_ROWS = 100_000
TABLES = ("answers", "ratings", "preferences", "error_spans")


def _schemas() -> dict[str, pa.Schema]:
    import pyarrow as pa  # noqa: PLC0415 - about 0.3 s; only the Parquet exports need it

    timestamp = pa.timestamp("us", tz="UTC")
    # Every table leads with the columns that name its row's turn, and a rating or a span with those of the rating.
    of_turn = [("item_id", pa.string()), ("turn", pa.int32())]
    of_rating = [
        *of_turn,
        ("system", pa.string()),
        ("aspect", pa.string()),
        ("rater", pa.string()),
        ("origin", pa.string()),
    ]
    return {
        "answers": pa.schema(
            [
                *of_turn,
                ("prompt", pa.string()),
                ("reference", pa.string()),
                ("system", pa.string()),
                ("answer", pa.string()),
            ]
        ),
        "ratings": pa.schema(
            [
                *of_rating,
                ("raw", pa.string()),
                ("value", pa.float64()),
                ("is_missing", pa.bool_()),
                ("rationale", pa.string()),
                ("comment", pa.string()),
                ("seconds_spent", pa.float64()),
                ("created_at", timestamp),
                ("campaign", pa.string()),
                ("rater_excluded", pa.bool_()),
                ("consensus", pa.float64()),
                ("filled_by", pa.string()),
                ("judge_version", pa.string()),
                ("human_probability", pa.float64()),
            ]
        ),
        "preferences": pa.schema(
            [
                *of_turn,
                ("rater", pa.string()),
                ("origin", pa.string()),
                ("campaign", pa.string()),
                ("candidates", pa.list_(pa.string())),
                ("preferred", pa.string()),
                ("tie", pa.bool_()),
                ("none_appropriate", pa.bool_()),
                ("reason", pa.string()),
                ("comment", pa.string()),
                ("seconds_spent", pa.float64()),
                ("created_at", timestamp),
                ("rater_excluded", pa.bool_()),
            ]
        ),
        "error_spans": pa.schema(
            [
                *of_rating,
                ("campaign", pa.string()),
                ("position", pa.int32()),
                ("start", pa.int64()),
                ("end", pa.int64()),
                ("category", pa.string()),
                ("severity", pa.string()),
                ("note", pa.string()),
                ("rater_excluded", pa.bool_()),
            ]
        ),
    }


def _answer_rows(dataset: Dataset) -> Iterator[dict[str, Any]]:
    rows = (
        Response.objects.filter(turn__item__dataset=dataset)
        .order_by("turn__item__position", "turn__index", "position")
        .values_list("turn__item__external_id", "turn__index", "turn__prompt", "turn__reference", "system__key", "text")
    )
    for item_id, index, prompt, reference, system, text in rows.iterator(chunk_size=5000):
        yield {
            "item_id": item_id,
            "turn": index + 1,
            "prompt": prompt,
            "reference": reference,
            "system": system,
            "answer": text,
        }


def _time(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else value


def _rating_rows(dataset: Dataset) -> Iterator[dict[str, Any]]:
    for row in iter_flat_rows(dataset=dataset):
        if row["kind"] != "rating":
            continue
        # Each flat row is a new dictionary: it is changed in place rather than copied.
        if row["rater"] is not None:
            row["rater"] = str(row["rater"])
        row["raw"] = json.dumps(row["raw"], ensure_ascii=False)  # the token as imported: 4, 4.5, "NA", null
        row["created_at"] = _time(row["created_at"])
        yield row


def _preference_rows(dataset: Dataset) -> Iterator[dict[str, Any]]:
    for row in iter_flat_rows(dataset=dataset, with_ties=True):
        if row["kind"] != "preference":
            continue
        candidates = row["candidates"]
        yield {
            "item_id": row["item_id"],
            "turn": row["turn"],
            "rater": None if row["rater"] is None else str(row["rater"]),
            "origin": row["origin"],
            "campaign": row["campaign"],
            "candidates": [str(c) for c in candidates] if isinstance(candidates, list) else None,
            "preferred": row["preferred"],
            "tie": row["tie"] is True,
            "none_appropriate": row["none_appropriate"] is True,
            "reason": row["rationale"],
            "comment": row["comment"],
            "seconds_spent": row["seconds_spent"],
            "created_at": _time(row["created_at"]),
            "rater_excluded": row["rater_excluded"],
        }


def _error_span_rows(dataset: Dataset) -> Iterator[dict[str, Any]]:
    """One row per error, numbered from 0 within its rating in the order the rater's answer lists them. The flat
    rows of one rating's errors follow that rating's row, so a rating row starts the count again."""
    position = 0
    for row in iter_flat_rows(dataset=dataset):
        if row["kind"] == "rating":
            position = 0
        if row["kind"] != ERROR_SPAN_KIND:
            continue
        span = row["raw"]
        yield {
            "item_id": row["item_id"],
            "turn": row["turn"],
            "system": row["system"],
            "aspect": row["aspect"],
            "rater": None if row["rater"] is None else str(row["rater"]),
            "origin": row["origin"],
            "campaign": row["campaign"],
            "position": position,
            "start": span.get("start"),
            "end": span.get("end"),
            "category": span.get("category"),
            "severity": span.get("severity"),
            "note": span.get("note", ""),
            "rater_excluded": row["rater_excluded"],
        }
        position += 1


ROWS: dict[str, Callable[[Dataset], Iterator[dict[str, Any]]]] = {
    "answers": _answer_rows,
    "ratings": _rating_rows,
    "preferences": _preference_rows,
    "error_spans": _error_span_rows,
}


def write_parquet(rows: Iterable[dict[str, Any]], schema: pa.Schema, target: Any) -> int:
    """Writes rows to a Parquet file (a path or a binary file object) in row groups; returns the row count."""
    import pyarrow as pa  # noqa: PLC0415 - see _schemas
    import pyarrow.parquet as pq  # noqa: PLC0415 - about 1.1 s with pyarrow

    names = schema.names
    count = 0
    with pq.ParquetWriter(target, schema, compression="zstd") as writer:
        batch: dict[str, list[Any]] = {name: [] for name in names}
        size = 0
        for row in rows:
            for name in names:
                batch[name].append(row.get(name))
            size += 1
            if size >= ROW_GROUP_ROWS:
                writer.write_table(pa.Table.from_pydict(batch, schema=schema))
                count += size
                batch = {name: [] for name in names}
                size = 0
        # No rows: the file holds the schema and no row group. A row group of zero rows is a layout some readers
        # refuse (Hugging Face datasets reads its batch size from the first row group).
        if size:
            writer.write_table(pa.Table.from_pydict(batch, schema=schema))
            count += size
    return count


def export_parquet_table(*, dataset: Dataset, table: str, target: Any, raters: set[str] | None = None) -> int:
    """Writes one table; with `raters`, adds to it the id of every person who gave one of its rows (not the judges
    who filled ratings in hybrid campaigns)."""
    rows = ROWS[table](dataset)
    if raters is not None:
        rows = _noting_raters(rows, raters)
    return write_parquet(rows, _schemas()[table], target)


def _noting_raters(rows: Iterator[dict[str, Any]], raters: set[str]) -> Iterator[dict[str, Any]]:
    for row in rows:
        if row.get("rater") is not None and row.get("filled_by") != "judge":
            raters.add(row["rater"])
        yield row


def parquet_bytes(*, dataset: Dataset, table: str) -> bytes:
    buffer = io.BytesIO()
    export_parquet_table(dataset=dataset, table=table, target=buffer)
    return buffer.getvalue()


# --- the Hugging Face folder --------------------------------------------------------------------------------------


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _interval(stat: Any) -> str:
    if not isinstance(stat, dict):
        return ""
    if stat.get("low") is None or stat.get("high") is None:
        return f"undefined ({stat.get('undefined')})"
    return f"[{stat['low']:.3f}, {stat['high']:.3f}]"


def _value(stat: Any) -> str:
    if isinstance(stat, dict):
        if stat.get("value") is None:
            return f"undefined ({stat.get('undefined')})"
        return f"{stat['value']:.3f}"
    return ""


def dataset_card(
    dataset: Dataset, counts: dict[str, int], agreement: dict[str, Any] | None, raters: set[str] | None = None
) -> str:
    """README.md of the folder: the configs ``datasets`` reads (the tables with rows, the only ones written), the
    schema, the rubric, the raters (``raters``: the ids of the people who gave the rows; every rater of the dataset
    when not given) and the agreement summary (Krippendorff's alpha at the aspect's level with its bootstrap 95%
    interval)."""
    schemas = _schemas()
    written = [table for table in TABLES if counts.get(table, 0)]
    lines = ["---", "configs:"] if written else ["---"]
    for table in written:
        lines += [f"- config_name: {table}", f"  data_files: data/{table}.parquet"]
    lines += ["---", "", f"# {dataset.name}", "", "Exported from evalsite. Load one table with:", ""]
    example = "ratings" if "ratings" in written else (written or ["answers"])[0]
    lines += [
        "```python",
        "from datasets import load_dataset",
        f'{example} = load_dataset("parquet", data_files="data/{example}.parquet")["train"]',
        "```",
        "",
        "## Schema",
        "",
    ]
    for table in TABLES:
        if table in written:
            lines += [f"### {table} ({counts[table]} rows)", "", "| column | type |", "|---|---|"]
        else:
            lines += [
                f"### {table} (0 rows)",
                "",
                "No file: `datasets` cannot load a table without rows. Its columns would be:",
                "",
                "| column | type |",
                "|---|---|",
            ]
        lines += [f"| `{field.name}` | {field.type} |" for field in schemas[table]]
        lines.append("")
    rubric = dataset_rubric(dataset)
    lines += ["## Rubric", "", "| aspect | min | max | ideal | level | missing codes |", "|---|---|---|---|---|---|"]
    for aspect in rubric["aspects"]:
        lines.append(
            f"| {_cell(aspect['name'])} | {aspect['min']} | {aspect['max']} | {aspect['ideal']} | {aspect['level']} "
            f"| {_cell(json.dumps(aspect['missing'], ensure_ascii=False))} |"
        )
    lines += ["", "`rubric.json` is the rubric file: import the tables with it to get the same aspects.", ""]
    known = Rater.objects.filter(dataset=dataset)
    if raters is None:
        raters = set(known.values_list("pseudonym", flat=True))
    annotators = known.filter(user__isnull=False, pseudonym__in=raters).count()
    lines += [
        "## Raters",
        "",
        f"{len(raters)} raters, who gave the ratings and preferences ({annotators} of them annotators in evalsite "
        "campaigns, identified by pseudonyms).",
        "",
        "## Agreement",
        "",
    ]
    if agreement is None:
        lines.append("Not computed for this export.")
    else:
        lines += [
            "Krippendorff's alpha at each aspect's measurement level, with its bootstrap 95% interval over items.",
            "",
            "| aspect | level | items | ratings | alpha | 95% interval |",
            "|---|---|---|---|---|---|",
        ]
        for name, summary in agreement.get("aspects", {}).items():
            level = "interval" if summary["level"] in ("interval", "ratio") else summary["level"]
            alpha = summary["alpha"].get(level)
            lines.append(
                f"| {_cell(name)} | {summary['level']} | {summary['n_items']} | {summary['n_ratings']} "
                f"| {_value(alpha)} | {_interval(summary['alpha_ci95'])} |"
            )
        preferences = agreement.get("preferences") or {}
        if preferences.get("n_preferences"):
            lines += [
                "",
                f"{preferences['n_preferences']} preferences on {preferences['n_prompts']} prompts "
                f"({preferences['n_skipped']} without a choice, ties included); nominal alpha on the chosen system "
                f"{_value(preferences['agreement']['alpha'])}.",
            ]
    return "\n".join(lines) + "\n"


def write_hf_folder(*, dataset: Dataset, path: str | os.PathLike[str], agreement: dict[str, Any] | None) -> Path:
    """Writes README.md, rubric.json and data/{answers,ratings,preferences,error_spans}.parquet into ``path``
    (created), each file beside its target first and renamed, so a failed export leaves no truncated file. A table
    without rows gets no file (and one an earlier export left there goes): ``datasets`` refuses to load an empty
    table."""
    folder = Path(path)
    (folder / "data").mkdir(parents=True, exist_ok=True)
    counts = {}
    raters: set[str] = set()
    for table in TABLES:
        target = folder / "data" / f"{table}.parquet"
        partial = target.with_suffix(".parquet.partial")
        counts[table] = export_parquet_table(dataset=dataset, table=table, target=str(partial), raters=raters)
        if counts[table]:
            os.replace(partial, target)
        else:
            partial.unlink()
            target.unlink(missing_ok=True)
    (folder / "rubric.json").write_text(
        json.dumps(dataset_rubric(dataset), ensure_ascii=False, indent=2) + "\n", encoding="utf-8"
    )
    (folder / "README.md").write_text(dataset_card(dataset, counts, agreement, raters), encoding="utf-8")
    return folder


def hf_folder_zip(*, dataset: Dataset, agreement: dict[str, Any] | None) -> bytes:
    """The folder as a zip archive, its files under a directory named after the dataset."""
    stem = dataset_filename(dataset, "")
    with tempfile.TemporaryDirectory() as tmp:
        folder = write_hf_folder(dataset=dataset, path=Path(tmp) / stem, agreement=agreement)
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for file in sorted(folder.rglob("*")):
                if file.is_file():
                    archive.write(file, file.relative_to(folder.parent).as_posix())
        return buffer.getvalue()


# --- downloads --------------------------------------------------------------------------------------------------

PARQUET_TYPE = "application/vnd.apache.parquet"
ZIP_TYPE = "application/zip"

# kind -> (file name suffix, media type, table or "" for the whole folder)
BINARY_KINDS: dict[str, tuple[str, str, str]] = {
    "answers-parquet": (".answers.parquet", PARQUET_TYPE, "answers"),
    "ratings-parquet": (".ratings.parquet", PARQUET_TYPE, "ratings"),
    "preferences-parquet": (".preferences.parquet", PARQUET_TYPE, "preferences"),
    "error-spans-parquet": (".error_spans.parquet", PARQUET_TYPE, "error_spans"),
    "hf-zip": (".hf.zip", ZIP_TYPE, ""),
}


def binary_export_filename(dataset: Dataset, kind: str) -> str:
    return dataset_filename(dataset, BINARY_KINDS[kind][0])


def binary_export_response(
    dataset: Dataset, kind: str, agreement: Callable[[Dataset], dict[str, Any]] | None = None
) -> HttpResponse:
    """A Parquet table or the zipped Hugging Face folder; ``agreement`` gives the card's agreement summary."""
    suffix, content_type, table = BINARY_KINDS[kind]
    if table:
        body = parquet_bytes(dataset=dataset, table=table)
    else:
        body = hf_folder_zip(dataset=dataset, agreement=agreement(dataset) if agreement else None)
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = dataset_disposition(dataset, suffix)
    response["X-Content-Type-Options"] = "nosniff"
    return response

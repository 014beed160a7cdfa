"""Streaming, all-or-nothing import of the JSONL dataset format.

The file is read twice: a first pass validates every line (and infers the rubric when none is given) without touching
the database; a second pass writes in chunks inside one transaction. Memory is bounded by a chunk of items, not by
the file, and an error in either pass leaves the database as it was.

The two passes run here in this order inside one transaction, which the all-or-nothing promise rests on; the line
parser and the checks of the first pass are in annotations.datasets.import_checks, the chunk writers of the second
in annotations.datasets.import_writer.
"""

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from annotations.datasets.import_checks import (
    ValidationState,
    check_rubric_fits,
    iter_items,
    positional_prefix,
    validate_gold_fields,
    validate_item,
)
from annotations.datasets.import_writer import (
    ImportResult,
    ImportWriter,
    seekable_copy,
)
from annotations.errors import DatasetImportError
from annotations.models import (
    Dataset,
    Rubric,
)
from annotations.rubrics.specs import (
    RubricSpec,
    format_number,
    infer_rubric,
    preset_rubric,
)


def _inference_notice(rubric: RubricSpec) -> str:
    described = "; ".join(
        f"{a.name} {format_number(a.min_value)}-{format_number(a.max_value)} ordinal" for a in rubric.aspects
    )
    return (
        "No rubric was given, so aspects were inferred from the data "
        f'({described or "none found"}); missing codes are null and "NA". '
        "Give a rubric file or a built-in preset to declare ranges, levels and missing codes."
    )


@contextmanager
def _collection_paused() -> Iterator[None]:
    """The cyclic garbage collector off for a pass over parsed lines or the writing of one chunk. Parsed JSON holds
    no cycles, so reference counting frees it all, yet each collection walked every container still alive: about a
    tenth of a votes file's import. It resumes between chunks, so any cycles the writing makes are collected."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _validate_stream(stream: IO[bytes], rubric: RubricSpec | None) -> tuple[ValidationState, RubricSpec, str]:
    """The first pass: every line checked, nothing written; the rubric inferred when none is given."""
    if rubric is not None:
        check_rubric_fits(rubric)
    state = ValidationState(rubric=rubric)
    with _collection_paused():
        for line_no, obj in iter_items(stream):
            validate_item(line_no, obj, state)
    if state.items == 0:
        raise DatasetImportError("empty file", expected="at least one JSON object line", found="no items")
    notice = ""
    if rubric is None:
        rubric = infer_rubric(state.observed_ranges)
        notice = _inference_notice(rubric)
    validate_gold_fields(state, rubric)
    return state, rubric, notice


def dataset_validate(*, stream: IO[bytes], rubric: RubricSpec | None = None) -> tuple[RubricSpec, str]:
    """Checks a file as the import would, writing nothing: the rubric it would use and the notice it would give."""
    _, used, notice = _validate_stream(seekable_copy(stream), rubric)
    return used, notice


def dataset_import(
    *,
    stream: IO[bytes],
    name: str,
    rubric: RubricSpec | None = None,
    preset: str | None = None,
    owner: User | None = None,
) -> ImportResult:
    if rubric is not None and preset is not None:
        raise DatasetImportError("give either a rubric or a preset, not both")
    if preset is not None:
        rubric = preset_rubric(preset)
    if not name or len(name) > 200:
        raise DatasetImportError("invalid dataset name", expected="1 to 200 characters", found=repr(name))
    if Dataset.objects.filter(owner=owner, name=name).exists():
        raise DatasetImportError(f"you already have a dataset named {name!r}; choose another name")
    stream = seekable_copy(stream)
    start = stream.tell()
    state, rubric, notice = _validate_stream(stream, rubric)
    stream.seek(start)
    chunk_size = settings.IMPORT_CHUNK_ITEMS
    try:
        with transaction.atomic():
            dataset = Dataset.objects.create(name=name, owner=owner, notice=notice)
            Rubric.objects.create(dataset=dataset, source=rubric.source, systems=rubric.systems)
            result = ImportResult(dataset=dataset, notice=notice)
            writer = ImportWriter(dataset, rubric, positional_prefix(state), state.scores)
            chunk: list[dict[str, Any]] = []
            for _, obj in iter_items(stream, checked=True):
                chunk.append(obj)
                if len(chunk) >= chunk_size:
                    with _collection_paused():
                        writer.write_chunk(chunk, result)
                    chunk = []
            if chunk:
                with _collection_paused():
                    writer.write_chunk(chunk, result)
            writer.write_exclusions(state.excluded_raters())
    except IntegrityError as exc:
        raise DatasetImportError(f"the database refused the data: {exc}") from None
    return result

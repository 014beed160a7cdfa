"""Streaming, all-or-nothing import of the JSONL dataset format.

The file is read twice: a first pass validates every line (and infers the rubric when none is given) without touching
the database; a second pass writes in chunks inside one transaction. Memory is bounded by a chunk of items, not by
the file, and an error in either pass leaves the database as it was.

Why one module of this size: the two passes share the line parser, the rubric inference and the per-chunk writers,
and the all-or-nothing promise rests on their running in this order inside one transaction.
"""

import json
import math
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, connection, transaction
from django.db.models import JSONField, Model
from django.utils import timezone

from annotations.datasets import judge_scores
from annotations.datasets.exporting import PREFERENCES_KEY, RATER_EXCLUDED_KEY
from annotations.errors import DatasetImportError
from annotations.gold.rules import GOLD_KEY, gold_problem, gold_spec
from annotations.models import (
    Aspect,
    Dataset,
    GoldItem,
    Item,
    Rater,
    RaterExclusion,
    Rating,
    RatingOrigin,
    Response,
    Rubric,
    System,
    Turn,
)
from annotations.rubrics import (
    DEFAULT_MISSING,
    AspectSpec,
    RubricSpec,
    format_number,
    infer_rubric,
    is_json_number,
    preset_rubric,
    same_json_token,
)
from annotations.storable import NUL, unstorable_character

UTF8_BOM = b"\xef\xbb\xbf"
# The reason recorded on the exclusions an import makes from the file's marks; the file carries no reason.
IMPORTED_EXCLUSION_REASON = "Marked rater_excluded in the imported file."
NAME_MAX_CHARS = 200  # Aspect.name, Judge.name and JudgeScore.aspect_name columns


@dataclass
class ImportResult:
    dataset: Dataset
    items: int = 0
    turns: int = 0
    responses: int = 0
    ratings: int = 0
    judge_scores: int = 0
    notice: str = ""
    gold_items: int = 0


@dataclass
class _ValidationState:
    rubric: RubricSpec | None
    seen_ids: set[str] = field(default_factory=set)
    # Named rater ids that look like positional ones ("#2"), and the widest rating list without a "raters" list.
    hash_rater_ids: set[str] = field(default_factory=set)
    positional_width: int = 0
    observed_ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    items: int = 0
    # (line, gold field, systems of the item) for every item with a gold field, checked once the rubric is known.
    gold_fields: list[tuple[int, Any, set[str]]] = field(default_factory=list)
    # Each rater the file marks ("rater_excluded"), with the mark and the first line that gave it.
    exclusion_marks: dict[str, tuple[bool, int]] = field(default_factory=dict)

    def mark_excluded(self, line: int, where: str, rater: Any, excluded: bool) -> None:
        """One mark per rater: an exclusion holds for the whole dataset, so every line must agree."""
        key = str(rater)
        earlier = self.exclusion_marks.setdefault(key, (excluded, line))
        if earlier[0] != excluded:
            raise DatasetImportError(
                "rater marked both excluded and not excluded",
                line=line,
                field=where,
                expected=f"the same mark for rater {_show(key)} as on line {earlier[1]}",
                found=json.dumps(excluded),
            )
        if excluded and key.startswith("#"):
            self.hash_rater_ids.add(key)

    def excluded_raters(self) -> list[str]:
        return [rater for rater, (excluded, _line) in self.exclusion_marks.items() if excluded]


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {_show(value)}"
    if isinstance(value, str):
        return f"the string {_show(value)}"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _reject_constant(token: str) -> Any:
    raise ValueError(f"{token} is not valid JSON")


def _iter_raw_lines(stream: IO[bytes]) -> Iterator[tuple[int, bytes]]:
    limit = settings.IMPORT_MAX_LINE_BYTES
    line_no = 0
    while True:
        raw = stream.readline(limit + 1)
        if not raw:
            return
        line_no += 1
        if len(raw) > limit and not raw.endswith(b"\n"):
            raise DatasetImportError(
                "line too long", line=line_no, expected=f"at most {limit} bytes per line", found="a longer line"
            )
        if line_no == 1 and raw.startswith(UTF8_BOM):
            raw = raw[len(UTF8_BOM) :]
        yield line_no, raw


def _finite_float(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        # 1e400 parses to inf, which neither Postgres JSON nor a later export could represent.
        raise ValueError(f"{token} is not a finite number")
    return value


def _check_depth_and_text(value: Any, line_no: int, max_depth: int, check_text: bool) -> None:
    """Depth limit, and (when the line has \\u escapes, the only way to write them) no NUL or lone surrogates,
    which Postgres text and UTF-8 output cannot hold."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            raise DatasetImportError(
                "JSON nested too deeply", line=line_no, expected=f"at most {max_depth} levels", found="more"
            )
        if isinstance(node, str):
            if check_text and (bad := unstorable_character(node)) is not None:
                raise DatasetImportError(
                    "NUL character in a string" if bad == NUL else "unpaired surrogate in a string",
                    line=line_no,
                    expected="text without U+0000 or unpaired surrogates",
                    found=bad,
                )
        elif isinstance(node, dict):
            for key, child in node.items():
                if check_text and (bad := unstorable_character(key)) is not None:
                    raise DatasetImportError(
                        "NUL character in a key" if bad == NUL else "unpaired surrogate in a key",
                        line=line_no,
                        expected="keys without U+0000 or unpaired surrogates",
                        found=bad,
                    )
                stack.append((child, depth + 1))
        elif isinstance(node, list):
            stack.extend((child, depth + 1) for child in node)


def iter_items(stream: IO[bytes]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yields (line number, parsed object) for every non-blank line, with precise errors for unreadable lines."""
    max_depth = settings.IMPORT_MAX_JSON_DEPTH
    for line_no, raw in _iter_raw_lines(stream):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DatasetImportError(
                "not valid UTF-8",
                line=line_no,
                expected="UTF-8 text",
                found=f"byte 0x{raw[exc.start]:02x} at column {exc.start + 1}",
            ) from None
        if not text.strip():
            continue
        try:
            obj = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
        except json.JSONDecodeError as exc:
            raise DatasetImportError(
                "invalid JSON",
                line=line_no,
                expected="one JSON object per line",
                found=f"{exc.msg} at column {exc.colno}",
            ) from None
        except ValueError as exc:
            raise DatasetImportError("invalid JSON", line=line_no, expected="finite numbers", found=str(exc)) from None
        except RecursionError:
            raise DatasetImportError(
                "JSON nested too deeply", line=line_no, expected=f"at most {max_depth} levels", found="more"
            ) from None
        if not isinstance(obj, dict):
            raise DatasetImportError("not an item", line=line_no, expected="a JSON object", found=_type_name(obj))
        _check_depth_and_text(obj, line_no, max_depth, "\\u" in text)
        yield line_no, obj


def _fail(line: int, where: str, expected: str, value: Any) -> DatasetImportError:
    return DatasetImportError("invalid value", line=line, field=where, expected=expected, found=_type_name(value))


def _classify_score(token: Any, aspect: AspectSpec) -> tuple[float | None, bool] | None:
    """(value, is_missing) for an acceptable token, None when the token is not acceptable for the aspect."""
    if aspect.is_missing_token(token):
        return None, True
    if is_json_number(token) and aspect.on_scale(token):
        return float(token), False
    return None


def _score_problem(token: Any, aspect: AspectSpec) -> str:
    if not is_json_number(token):
        return "invalid score"
    if aspect.min_value <= token <= aspect.max_value:
        return "score between the scale's steps"
    return "score out of range"


def _validate_scores(
    line: int, where: str, human_evals: Any, raters: list[Any] | None, state: _ValidationState
) -> None:
    if not isinstance(human_evals, dict):
        raise _fail(line, where, "an object mapping aspect names to lists of scores", human_evals)
    for aspect_name, scores in human_evals.items():
        here = f"{where}.{aspect_name}"
        if not isinstance(scores, list):
            raise _fail(line, here, "a list with one score per rater", scores)
        if raters is not None and len(scores) != len(raters):
            raise DatasetImportError(
                "scores and raters differ in length",
                line=line,
                field=here,
                expected=f"{len(raters)} scores, one per entry of 'raters'",
                found=f"{len(scores)}",
            )
        if state.rubric is not None:
            aspect = state.rubric.aspect(aspect_name)
            if aspect is None:
                known = ", ".join(a.name for a in state.rubric.aspects)
                raise DatasetImportError(
                    "unknown aspect",
                    line=line,
                    field=here,
                    expected=f"one of the rubric's aspects ({known})" if known else "no ratings (the rubric has none)",
                    found=_show(aspect_name),
                )
            for index, token in enumerate(scores):
                if _classify_score(token, aspect) is None:
                    raise DatasetImportError(
                        _score_problem(token, aspect),
                        line=line,
                        field=f"{here}[{index}]",
                        expected=aspect.describe_range(),
                        found=_show(token),
                    )
        else:
            if len(aspect_name) > NAME_MAX_CHARS:
                raise _fail(line, here, f"an aspect name of at most {NAME_MAX_CHARS} characters", aspect_name)
            lo, hi = state.observed_ranges.get(aspect_name, (math.inf, -math.inf))
            for index, token in enumerate(scores):
                if any(same_json_token(token, code) for code in DEFAULT_MISSING):
                    continue
                if not is_json_number(token):
                    raise DatasetImportError(
                        "invalid score",
                        line=line,
                        field=f"{here}[{index}]",
                        expected='a number, null or "NA" (declare other missing codes in a rubric)',
                        found=_show(token),
                    )
                lo, hi = min(lo, float(token)), max(hi, float(token))
            state.observed_ranges[aspect_name] = (lo, hi)


def _validate_auto_evals(line: int, where: str, auto_evals: Any) -> None:
    if not isinstance(auto_evals, dict):
        raise _fail(line, where, "an object keyed by judge name", auto_evals)
    for judge_name, by_aspect in auto_evals.items():
        if len(judge_name) > NAME_MAX_CHARS:
            raise _fail(line, where, f"judge names of at most {NAME_MAX_CHARS} characters", judge_name)
        if isinstance(by_aspect, dict):
            for aspect_name in by_aspect:
                if len(aspect_name) > NAME_MAX_CHARS:
                    raise _fail(
                        line,
                        f"{where}.{judge_name}",
                        f"aspect names of at most {NAME_MAX_CHARS} characters",
                        aspect_name,
                    )


def _positional_prefix(state: _ValidationState) -> str:
    """ "#" for positional rater ids ("#1", "#2", ...), lengthened when a named rater already uses such an id."""
    prefix = "#"
    while any(f"{prefix}{n}" in state.hash_rater_ids for n in range(1, state.positional_width + 1)):
        prefix += "#"
    return prefix


def _check_rubric_fits(rubric: RubricSpec) -> None:
    for spec in rubric.aspects:
        if len(spec.name) > NAME_MAX_CHARS or len(spec.label) > NAME_MAX_CHARS:
            raise DatasetImportError(
                "rubric aspect name or label too long",
                field=f"aspects[{spec.name[:40]!r}]",
                expected=f"at most {NAME_MAX_CHARS} characters",
                found=f"{max(len(spec.name), len(spec.label))} characters",
            )
    for key, model_name in rubric.systems.items():
        if len(key) > 200 or len(model_name) > 300:
            raise DatasetImportError(
                "rubric system too long",
                field=f"systems[{key[:40]!r}]",
                expected="keys of at most 200 and model names of at most 300 characters",
                found=f"{len(key)} and {len(model_name)} characters",
            )


def _validate_item(line: int, obj: dict[str, Any], state: _ValidationState) -> None:
    item_id = obj.get("id")
    if "id" not in obj:
        raise DatasetImportError(
            "missing id", line=line, field="id", expected="a string or integer id", found="no 'id' field"
        )
    if isinstance(item_id, bool) or not isinstance(item_id, (str, int)) or (isinstance(item_id, str) and not item_id):
        raise _fail(line, "id", "a non-empty string or integer", item_id)
    key = str(item_id)
    if len(key) > 500:
        raise _fail(line, "id", "at most 500 characters", item_id)
    if key in state.seen_ids:
        raise DatasetImportError(
            "duplicate id", line=line, field="id", expected="an id not used on an earlier line", found=_show(item_id)
        )
    state.seen_ids.add(key)
    turns = obj.get("turns")
    if not isinstance(turns, list) or not turns:
        raise _fail(line, "turns", "a non-empty list of turns", turns)
    for t_index, turn in enumerate(turns):
        where = f"turns[{t_index}]"
        if not isinstance(turn, dict):
            raise _fail(line, where, "an object", turn)
        if not isinstance(turn.get("prompt"), str):
            raise _fail(line, f"{where}.prompt", "a string", turn.get("prompt"))
        if "reference" in turn and turn["reference"] is not None and not isinstance(turn["reference"], str):
            raise _fail(line, f"{where}.reference", "a string or null", turn["reference"])
        context = turn.get("context")
        if (
            context is not None
            and not isinstance(context, str)
            and not (isinstance(context, list) and all(isinstance(p, str) for p in context))
        ):
            raise _fail(line, f"{where}.context", "a string or a list of strings", context)
        responses = turn.get("responses", {})
        if not isinstance(responses, dict):
            raise _fail(line, f"{where}.responses", "an object keyed by system", responses)
        for system_key, answer in responses.items():
            _validate_answer(line, f"{where}.responses.{system_key}", system_key, answer, state)
        if "preferences" in turn:
            _validate_preferences(line, f"{where}.preferences", turn["preferences"], state)
    if GOLD_KEY in obj:
        systems = {key for turn in turns for key in turn.get("responses", {})}
        state.gold_fields.append((line, obj[GOLD_KEY], systems))
    state.items += 1


def _validate_gold_fields(state: _ValidationState, rubric: RubricSpec) -> None:
    aspects = {spec.name: (spec.min_value, spec.max_value) for spec in rubric.aspects}
    for line, gold, systems in state.gold_fields:
        problem = gold_problem(gold, systems=systems, aspects=aspects, where=GOLD_KEY)
        if problem is not None:
            raise DatasetImportError(
                "invalid gold field", line=line, field=problem.field, expected=problem.expected, found=problem.found
            )


# The export writes these under a turn's "preferences"; other keys of an entry are kept as they are.
PREFERENCE_FIELDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "rater": ("a rater id (string or integer) or null", lambda v: v is None or _is_id(v)),
    "campaign": ("a string or null", lambda v: v is None or isinstance(v, str)),
    "candidates": ("a list of system keys", lambda v: isinstance(v, list) and all(isinstance(k, str) for k in v)),
    "preferred": ("a system key or null", lambda v: v is None or isinstance(v, str)),
    "none_appropriate": ("true or false", lambda v: isinstance(v, bool)),
    "reason": ("a string", lambda v: isinstance(v, str)),
    "comment": ("a string", lambda v: isinstance(v, str)),
    RATER_EXCLUDED_KEY: ("true or false", lambda v: isinstance(v, bool)),
}


def _is_id(value: Any) -> bool:
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def _validate_preferences(line: int, where: str, preferences: Any, state: _ValidationState) -> None:
    if not isinstance(preferences, list):
        raise _fail(line, where, "a list of preferences (objects)", preferences)
    for index, entry in enumerate(preferences):
        if not isinstance(entry, dict):
            raise _fail(line, f"{where}[{index}]", "an object", entry)
        for key, (expected, accepts) in PREFERENCE_FIELDS.items():
            if key in entry and not accepts(entry[key]):
                raise _fail(line, f"{where}[{index}].{key}", expected, entry[key])
        if RATER_EXCLUDED_KEY in entry:
            here = f"{where}[{index}].{RATER_EXCLUDED_KEY}"
            if entry.get("rater") is None or entry["rater"] == "":
                raise _fail(line, here, "a mark only on a preference that names its rater", entry[RATER_EXCLUDED_KEY])
            if len(str(entry["rater"])) > 200:
                raise _fail(line, f"{where}[{index}].rater", "a rater id of at most 200 characters", entry["rater"])
            state.mark_excluded(line, here, entry["rater"], entry[RATER_EXCLUDED_KEY])


def _validate_answer(line: int, here: str, system_key: str, answer: Any, state: _ValidationState) -> None:
    if not system_key or len(system_key) > 200:
        raise _fail(line, here, "a system key of 1 to 200 characters", system_key)
    if not isinstance(answer, dict):
        raise _fail(line, here, "an object", answer)
    if not isinstance(answer.get("response"), str):
        raise _fail(line, f"{here}.response", "a string", answer.get("response"))
    raters = answer.get("raters")
    if "raters" in answer:
        if not isinstance(raters, list) or not all(
            isinstance(r, (str, int)) and not isinstance(r, bool) and str(r) for r in raters
        ):
            raise _fail(line, f"{here}.raters", "a list of rater ids (strings or integers)", raters)
        as_text = [str(r) for r in raters]
        if len(set(as_text)) != len(as_text):
            duplicate = next(r for r in as_text if as_text.count(r) > 1)
            raise DatasetImportError(
                "duplicate rater",
                line=line,
                field=f"{here}.raters",
                expected="distinct rater ids",
                found=_show(duplicate),
            )
        if any(len(r) > 200 for r in as_text):
            raise _fail(line, f"{here}.raters", "rater ids of at most 200 characters", raters)
        state.hash_rater_ids.update(r for r in as_text if r.startswith("#"))
    elif isinstance(answer.get("human_evals"), dict):
        widths = [len(v) for v in answer["human_evals"].values() if isinstance(v, list)]
        state.positional_width = max([state.positional_width, *widths])
    if RATER_EXCLUDED_KEY in answer:
        _validate_exclusion_marks(line, f"{here}.{RATER_EXCLUDED_KEY}", answer[RATER_EXCLUDED_KEY], raters, state)
    if "human_evals" in answer:
        _validate_scores(line, f"{here}.human_evals", answer["human_evals"], raters, state)
    if "auto_evals" in answer:
        _validate_auto_evals(line, f"{here}.auto_evals", answer["auto_evals"])


def _validate_exclusion_marks(
    line: int, where: str, marks: Any, raters: list[Any] | None, state: _ValidationState
) -> None:
    if raters is None:
        raise _fail(line, where, "marks beside a 'raters' list (positional raters cannot be excluded)", marks)
    if not isinstance(marks, list) or not all(isinstance(mark, bool) for mark in marks):
        raise _fail(line, where, "a list of true or false, one per entry of 'raters'", marks)
    if len(marks) != len(raters):
        raise DatasetImportError(
            "marks and raters differ in length",
            line=line,
            field=where,
            expected=f"{len(raters)} marks, one per entry of 'raters'",
            found=f"{len(marks)}",
        )
    for index, (rater, mark) in enumerate(zip(raters, marks, strict=True)):
        state.mark_excluded(line, f"{where}[{index}]", rater, mark)


def _seekable_copy(stream: IO[bytes]) -> IO[bytes]:
    if stream.seekable():
        return stream
    spooled = tempfile.SpooledTemporaryFile(max_size=8 * 1024 * 1024)  # noqa: SIM115 - returned to the caller
    shutil.copyfileobj(stream, spooled)
    spooled.seek(0)
    return spooled  # type: ignore[return-value]


def _copy_value(field: Any, value: Any) -> Any:
    if value is None:
        return None  # SQL NULL, as Django stores a Python None in a nullable JSONField
    if isinstance(field, JSONField):
        return json.dumps(value, ensure_ascii=False)
    return value


def _row_getter(field: Any) -> Callable[[dict[str, Any]], Any]:
    attname = field.attname
    return lambda row: _copy_value(field, row[attname])


def _constant_getter(value: Any) -> Callable[[dict[str, Any]], Any]:
    return lambda row: value


def _insert_rows(model: type[Model], rows: list[dict[str, Any]], *, returning_ids: bool = False) -> list[int]:
    """Inserts rows given by attname; returns their ids when asked.

    On Postgres this is COPY: Django's bulk_create binds every value client-side and spent most of the 60,600-rating
    benchmark quoting arrays. Elsewhere (SQLite) bulk_create is fast enough. Fields missing from a row get their
    model default, and auto_now fields the current time, as Model.save would give them.
    """
    if not rows:
        return []
    if connection.vendor != "postgresql":
        objects = [model(**row) for row in rows]
        model.objects.bulk_create(objects, batch_size=2000)  # type: ignore[attr-defined]
        return [obj.pk for obj in objects]
    now = timezone.now()
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    # One getter per column: a constant default, or the row's value converted for COPY.
    getters: list[Callable[[dict[str, Any]], Any]] = []
    for f in fields:
        if f.attname in rows[0]:
            getters.append(_row_getter(f))
        else:
            default = now if getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False) else f.get_default()
            getters.append(_constant_getter(_copy_value(f, default)))
    columns = [str(f.column) for f in fields]
    table = connection.ops.quote_name(model._meta.db_table)
    ids: list[int] = []
    with connection.cursor() as cursor, connection.wrap_database_errors:
        if returning_ids:
            cursor.execute(
                "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)",
                [model._meta.db_table, len(rows)],
            )
            ids = [row[0] for row in cursor.fetchall()]
            columns = ["id", *columns]
        column_sql = ", ".join(connection.ops.quote_name(c) for c in columns)
        with cursor.cursor.copy(f"COPY {table} ({column_sql}) FROM STDIN") as copy:
            for index, row in enumerate(rows):
                values = [get(row) for get in getters]
                copy.write_row([ids[index], *values] if returning_ids else values)
    return ids


def _stored_turn_value(key: str, value: Any) -> Any:
    """A turn's value as stored. An empty "responses" stays as a marker that the key was present (answers live in
    Response); the exclusion marks of preferences become exclusions, and the export marks from those."""
    if key == "responses":
        return {}
    if key == PREFERENCES_KEY and isinstance(value, list):
        return [
            {k: v for k, v in entry.items() if k != RATER_EXCLUDED_KEY} if isinstance(entry, dict) else entry
            for entry in value
        ]
    return value


class _Writer:
    """Second pass: turns validated items into rows, chunk by chunk."""

    def __init__(self, dataset: Dataset, rubric: RubricSpec, positional_prefix: str = "#") -> None:
        self.dataset = dataset
        self.rubric = rubric
        self.aspects: dict[str, Aspect] = {}
        for position, spec in enumerate(rubric.aspects):
            self.aspects[spec.name] = Aspect.objects.create(
                dataset=dataset,
                name=spec.name,
                label=spec.label,
                description=spec.description,
                min_value=spec.min_value,
                max_value=spec.max_value,
                ideal=spec.ideal,
                level=spec.level,
                labels=spec.labels,
                missing=spec.missing,
                translations=spec.translations,
                position=position,
            )
        self.aspect_specs = {spec.name: spec for spec in rubric.aspects}
        self.systems: dict[str, System] = {}
        self.raters: dict[tuple[str, bool], Rater] = {}
        self.judges: dict[str, int] = {}  # judge ids by name
        self.item_position = 0
        self.positional_prefix = positional_prefix

    def _system(self, key: str) -> System:
        system = self.systems.get(key)
        if system is None:
            system = System.objects.create(
                dataset=self.dataset, key=key, model_name=self.rubric.systems.get(key, ""), position=len(self.systems)
            )
            self.systems[key] = system
        return system

    def _raters_for(self, ids: list[tuple[str, bool]]) -> None:
        new = [key for key in dict.fromkeys(ids) if key not in self.raters]
        if not new:
            return
        created = Rater.objects.bulk_create(
            [
                Rater(dataset=self.dataset, external_id=external_id, pseudonym=external_id, is_positional=positional)
                for external_id, positional in new
            ]
        )
        for key, rater in zip(new, created, strict=True):
            self.raters[key] = rater

    def _judge(self, name: str) -> int:
        judge_id = self.judges.get(name)
        if judge_id is None:
            judge_id = judge_scores.imported_judge_create(dataset=self.dataset, name=name)
            self.judges[name] = judge_id
        return judge_id

    def write_exclusions(self, raters: list[str]) -> None:
        """Excludes the raters the file marked, as a researcher would have: named raters only, which the marks'
        checks ensure; a rater who only gave preferences gets a rater record to hold the exclusion."""
        self._raters_for([(rater, False) for rater in raters])
        RaterExclusion.objects.bulk_create(
            RaterExclusion(
                rater=self.raters[(rater, False)],
                reason=IMPORTED_EXCLUSION_REASON,
                excluded_by=self.dataset.owner,
            )
            for rater in raters
        )

    def write_chunk(self, chunk: list[dict[str, Any]], result: ImportResult) -> None:
        # Items and turns go in by COPY like the rest: bulk_create quotes every JSON source into a text array
        # client-side, which took most of the import time for turns carrying many preferences.
        item_rows = []
        for obj in chunk:
            item_rows.append(
                {
                    "dataset_id": self.dataset.pk,
                    "external_id": str(obj["id"]),
                    "position": self.item_position,
                    # The gold field lives in GoldItem, where marking by hand also puts it; export writes it back.
                    "source": {k: v for k, v in obj.items() if k not in ("turns", GOLD_KEY)},
                }
            )
            self.item_position += 1
        item_ids = _insert_rows(Item, item_rows, returning_ids=True)
        golds = []
        for item_id, obj in zip(item_ids, chunk, strict=True):
            if GOLD_KEY in obj:
                marked = gold_spec(obj[GOLD_KEY])
                golds.append(
                    GoldItem(
                        item_id=item_id,
                        kind=marked.kind,
                        expected=marked.expected,
                        tolerance=marked.tolerance,
                        instruction=marked.instruction,
                        created_by=self.dataset.owner,
                    )
                )
        GoldItem.objects.bulk_create(golds)
        result.gold_items += len(golds)
        turn_rows: list[dict[str, Any]] = []
        turn_sources: list[dict[str, Any]] = []
        for item_id, obj in zip(item_ids, chunk, strict=True):
            for index, turn in enumerate(obj["turns"]):
                turn_rows.append(
                    {
                        "item_id": item_id,
                        "index": index,
                        "prompt": turn["prompt"],
                        "reference": turn.get("reference"),
                        "context": turn.get("context"),
                        "source": {k: _stored_turn_value(k, v) for k, v in turn.items()},
                    }
                )
                turn_sources.append(turn)
        turn_ids = _insert_rows(Turn, turn_rows, returning_ids=True)
        responses: list[dict[str, Any]] = []
        answers: list[dict[str, Any]] = []
        for turn_id, turn_source in zip(turn_ids, turn_sources, strict=True):
            for position, (system_key, answer) in enumerate(turn_source.get("responses", {}).items()):
                human_evals = answer.get("human_evals")
                responses.append(
                    {
                        "turn_id": turn_id,
                        "system_id": self._system(system_key).pk,
                        "position": position,
                        "text": answer["response"],
                        "source": {k: v for k, v in answer.items() if k not in ("human_evals", RATER_EXCLUDED_KEY)},
                        "eval_aspects": list(human_evals) if isinstance(human_evals, dict) else [],
                        "has_human_evals": "human_evals" in answer,
                    }
                )
                answers.append(answer)
        response_ids = _insert_rows(Response, responses, returning_ids=True)

        rater_keys: list[tuple[str, bool]] = []
        for answer in answers:
            if "raters" in answer:
                rater_keys.extend((str(r), False) for r in answer["raters"])
            else:
                longest = max((len(v) for v in answer.get("human_evals", {}).values()), default=0)
                rater_keys.extend((f"{self.positional_prefix}{i + 1}", True) for i in range(longest))
        self._raters_for(rater_keys)

        ratings: list[dict[str, Any]] = []
        scores: list[dict[str, Any]] = []
        for response_id, answer in zip(response_ids, answers, strict=True):
            rater_ids = answer.get("raters")
            for aspect_name, tokens in answer.get("human_evals", {}).items():
                aspect_id = self.aspects[aspect_name].pk
                spec = self.aspect_specs[aspect_name]
                for position, token in enumerate(tokens):
                    key = (
                        (str(rater_ids[position]), False)
                        if rater_ids is not None
                        else (f"{self.positional_prefix}{position + 1}", True)
                    )
                    classified = _classify_score(token, spec)
                    assert classified is not None, "validated in the first pass"
                    value, is_missing = classified
                    ratings.append(
                        {
                            "response_id": response_id,
                            "aspect_id": aspect_id,
                            "rater_id": self.raters[key].pk,
                            "position": position,
                            "raw": token,
                            "value": value,
                            "is_missing": is_missing,
                            "origin": RatingOrigin.IMPORT.value,
                        }
                    )
            for judge_name, by_aspect in answer.get("auto_evals", {}).items():
                if not isinstance(by_aspect, dict):
                    continue
                for aspect_name, value in by_aspect.items():
                    if is_json_number(value):
                        scores.append(
                            {
                                "judge_id": self._judge(judge_name),
                                "response_id": response_id,
                                "aspect_name": aspect_name,
                                "value": float(value),
                            }
                        )
        _insert_rows(Rating, ratings)
        _insert_rows(judge_scores.score_model(), scores)
        result.items += len(item_ids)
        result.turns += len(turn_ids)
        result.responses += len(responses)
        result.ratings += len(ratings)
        result.judge_scores += len(scores)


def _inference_notice(rubric: RubricSpec) -> str:
    described = "; ".join(
        f"{a.name} {format_number(a.min_value)}-{format_number(a.max_value)} ordinal" for a in rubric.aspects
    )
    return (
        "No rubric was given, so aspects were inferred from the data "
        f'({described or "none found"}); missing codes are null and "NA". '
        "Give a rubric file or a built-in preset to declare ranges, levels and missing codes."
    )


def _validate_stream(stream: IO[bytes], rubric: RubricSpec | None) -> tuple[_ValidationState, RubricSpec, str]:
    """The first pass: every line checked, nothing written; the rubric inferred when none is given."""
    if rubric is not None:
        _check_rubric_fits(rubric)
    state = _ValidationState(rubric=rubric)
    for line_no, obj in iter_items(stream):
        _validate_item(line_no, obj, state)
    if state.items == 0:
        raise DatasetImportError("empty file", expected="at least one JSON object line", found="no items")
    notice = ""
    if rubric is None:
        rubric = infer_rubric(state.observed_ranges)
        notice = _inference_notice(rubric)
    _validate_gold_fields(state, rubric)
    return state, rubric, notice


def dataset_validate(*, stream: IO[bytes], rubric: RubricSpec | None = None) -> tuple[RubricSpec, str]:
    """Checks a file as the import would, writing nothing: the rubric it would use and the notice it would give."""
    _, used, notice = _validate_stream(_seekable_copy(stream), rubric)
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
    stream = _seekable_copy(stream)
    start = stream.tell()
    state, rubric, notice = _validate_stream(stream, rubric)
    stream.seek(start)
    chunk_size = settings.IMPORT_CHUNK_ITEMS
    try:
        with transaction.atomic():
            dataset = Dataset.objects.create(name=name, owner=owner, notice=notice)
            Rubric.objects.create(dataset=dataset, source=rubric.source, systems=rubric.systems)
            result = ImportResult(dataset=dataset, notice=notice)
            writer = _Writer(dataset, rubric, _positional_prefix(state))
            chunk: list[dict[str, Any]] = []
            for _, obj in iter_items(stream):
                chunk.append(obj)
                if len(chunk) >= chunk_size:
                    writer.write_chunk(chunk, result)
                    chunk = []
            if chunk:
                writer.write_chunk(chunk, result)
            writer.write_exclusions(state.excluded_raters())
    except IntegrityError as exc:
        raise DatasetImportError(f"the database refused the data: {exc}") from None
    return result

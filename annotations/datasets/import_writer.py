"""The second pass of the JSONL import: writing checked items in chunks (datasets, systems, items, turns, answers,
ratings, preferences, gold items, judge scores and exclusion marks), inside the transaction the import holds."""

import json
import shutil
import tempfile
from dataclasses import dataclass
from typing import IO, Any

from django.db import connection
from django.db.models import JSONField, Model
from django.utils import timezone

from annotations.datasets import judge_scores
from annotations.datasets.exporting import PREFERENCES_KEY, RATER_EXCLUDED_KEY
from annotations.datasets.import_checks import (
    IMPORTED_EXCLUSION_REASON,
    ScoreClassifier,
)
from annotations.gold.rules import GOLD_KEY, gold_spec
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
    System,
    Turn,
)
from annotations.rubrics.specs import (
    RubricSpec,
    is_json_number,
)
from annotations.services import error_spans_write


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


def seekable_copy(stream: IO[bytes]) -> IO[bytes]:
    if stream.seekable():
        return stream
    spooled = tempfile.SpooledTemporaryFile(max_size=8 * 1024 * 1024)  # noqa: SIM115 - returned to the caller
    shutil.copyfileobj(stream, spooled)
    spooled.seek(0)
    return spooled  # type: ignore[return-value]


# One encoder for every JSON cell: json.dumps with an option builds a new encoder on each call, which was a tenth of
# the import's time at a million ratings.
_encode_json = json.JSONEncoder(ensure_ascii=False).encode


def _json_cell(value: Any) -> str | None:
    if value is None:
        return None  # SQL NULL, as Django stores a Python None in a nullable JSONField
    if type(value) is int:
        return str(value)  # the JSON text of an integer, most raw scores
    return _encode_json(value)


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
    # A template row of the constant columns (defaults, converted once), and the columns each row fills in.
    template: list[Any] = []
    plain: list[tuple[int, str]] = []
    json_columns: list[tuple[int, str]] = []
    for index, f in enumerate(fields):
        if f.attname in rows[0]:
            template.append(None)
            (json_columns if isinstance(f, JSONField) else plain).append((index, f.attname))
        else:
            default = now if getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False) else f.get_default()
            template.append(_json_cell(default) if isinstance(f, JSONField) else default)
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
            template = [None, *template]
            plain = [(index + 1, name) for index, name in plain]
            json_columns = [(index + 1, name) for index, name in json_columns]
        column_sql = ", ".join(connection.ops.quote_name(c) for c in columns)
        with cursor.cursor.copy(f"COPY {table} ({column_sql}) FROM STDIN") as copy:
            for position, row in enumerate(rows):
                values = template.copy()
                for index, name in plain:
                    values[index] = row[name]
                for index, name in json_columns:
                    values[index] = _json_cell(row[name])
                if returning_ids:
                    values[0] = ids[position]
                copy.write_row(values)
    return ids


def _stored_turn_value(key: str, value: Any) -> Any:
    """A turn's value as stored. An empty "responses" stays as a marker that the key was present (answers live in
    Response); the exclusion marks of preferences become exclusions, and the export marks from those."""
    if key == "responses":
        return {}
    if (
        key == PREFERENCES_KEY
        and isinstance(value, list)
        # Most files carry no marks: a copy of every vote was a tenth of a votes file's second pass.
        and any(type(entry) is dict and RATER_EXCLUDED_KEY in entry for entry in value)
    ):
        return [
            {k: v for k, v in entry.items() if k != RATER_EXCLUDED_KEY} if isinstance(entry, dict) else entry
            for entry in value
        ]
    return value


class ImportWriter:
    """Second pass: turns validated items into rows, chunk by chunk."""

    def __init__(
        self,
        dataset: Dataset,
        rubric: RubricSpec,
        positional_prefix: str = "#",
        scores: ScoreClassifier | None = None,
    ) -> None:
        self.dataset = dataset
        # The first pass's classifier, when given: every token it met is known, so classifying again is a lookup.
        self.scores = scores or ScoreClassifier()
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
                kind=spec.kind,
                span_scheme=spec.span_scheme.to_json() if spec.span_scheme is not None else {},
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

    def _rater_keys(self, answers: list[dict[str, Any]]) -> list[tuple[str, bool]]:
        """(rater id, is positional) of every score of these answers, in order."""
        rater_keys: list[tuple[str, bool]] = []
        for answer in answers:
            if "raters" in answer:
                rater_keys.extend((str(r), False) for r in answer["raters"])
            else:
                longest = max((len(v) for v in answer.get("human_evals", {}).values()), default=0)
                rater_keys.extend((f"{self.positional_prefix}{i + 1}", True) for i in range(longest))
        return rater_keys

    def _write_error_spans(self, response_ids: list[int]) -> None:
        """The ErrorSpan rows of the span aspects' ratings just inserted, read back from their tokens."""
        span_aspects = [aspect.pk for aspect in self.aspects.values() if aspect.is_spans]
        if span_aspects:
            error_spans_write(
                ratings=list(Rating.objects.filter(response_id__in=response_ids, aspect_id__in=span_aspects))
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

        self._raters_for(self._rater_keys(answers))

        ratings: list[dict[str, Any]] = []
        scores: list[dict[str, Any]] = []
        classify = self.scores.classify
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
                    classified = classify(token, spec, answer.get("response") or "")
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
        self._write_error_spans(response_ids)
        _insert_rows(judge_scores.score_model(), scores)
        result.items += len(item_ids)
        result.turns += len(turn_ids)
        result.responses += len(responses)
        result.ratings += len(ratings)
        result.judge_scores += len(scores)

"""Export in the JSONL import format (lossless for imported data) and the flat one-row-per-rating layout."""

import csv
import io
import json
from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import Any

from django.conf import settings

from annotations.models import Dataset, Item, Rating, RatingOrigin, Response, Turn

# The one reviewed import of the judge from the domain: a JSONL line carries its answers' judge scores.
from judging.models import JudgeKind, JudgeScore

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")

FLAT_FIELDS = [
    "item_id",
    "turn",
    "system",
    "aspect",
    "rater",
    "origin",
    "raw",
    "value",
    "is_missing",
    "rationale",
    "comment",
    "seconds_spent",
    "created_at",
]


def csv_safe(value: Any) -> Any:
    """Neutralises spreadsheet formulas in text cells; numbers pass through so they stay numbers."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(", ", ": "))


def _chunks(dataset: Dataset) -> Iterator[list[tuple[int, dict[str, Any]]]]:
    size = settings.IMPORT_CHUNK_ITEMS
    last_position = -1
    while True:
        rows = list(
            Item.objects.filter(dataset=dataset, position__gt=last_position)
            .order_by("position")
            .values_list("id", "source", "position")[:size]
        )
        if not rows:
            return
        last_position = rows[-1][2]
        yield [(item_id, source) for item_id, source, _ in rows]


def _app_rater_order(ratings: list[dict[str, Any]]) -> list[int]:
    first_seen: dict[int, tuple[Any, int]] = {}
    for rating in ratings:
        if rating["origin"] == RatingOrigin.APP:
            key = (rating["created_at"], rating["rater_id"])
            if rating["rater_id"] not in first_seen or key < first_seen[rating["rater_id"]]:
                first_seen[rating["rater_id"]] = key
    return sorted(first_seen, key=lambda rater_id: first_seen[rater_id])


def _rebuild_answer(
    source: dict[str, Any],
    eval_aspects: list[str],
    has_human_evals: bool,
    ratings: list[dict[str, Any]],
    aspect_order: dict[str, int],
    pseudonyms: dict[int, str],
    run_scores: dict[str, dict[str, float]],
) -> dict[str, Any]:
    answer = dict(source)
    imported: dict[str, list[Any]] = {name: [] for name in eval_aspects}
    for rating in ratings:
        if rating["origin"] == RatingOrigin.IMPORT:
            imported.setdefault(rating["aspect__name"], []).append(rating["raw"])
    app_raters = _app_rater_order(ratings)
    if app_raters:
        app_values: dict[tuple[int, str], Any] = {
            (r["rater_id"], r["aspect__name"]): r["raw"] for r in ratings if r["origin"] == RatingOrigin.APP
        }
        app_aspects = {name for _, name in app_values}
        all_aspects = list(imported) + sorted(app_aspects - set(imported), key=lambda n: aspect_order.get(n, 0))
        if "raters" in source:
            width = len(source["raters"])
            answer["raters"] = list(source["raters"]) + [pseudonyms[r] for r in app_raters]
        else:
            width = max((len(v) for v in imported.values()), default=0)
            answer["raters"] = [f"#{i + 1}" for i in range(width)] + [pseudonyms[r] for r in app_raters]
        evals = {}
        for name in all_aspects:
            base = imported.get(name, [])
            evals[name] = base + [None] * (width - len(base)) + [app_values.get((r, name)) for r in app_raters]
        answer["human_evals"] = evals
    elif has_human_evals:
        answer["human_evals"] = imported
    if run_scores:
        merged = dict(answer.get("auto_evals") or {})
        merged.update(run_scores)
        answer["auto_evals"] = merged
    return answer


def iter_export_objects(*, dataset: Dataset, include_judges: bool = False) -> Iterator[dict[str, Any]]:
    aspect_order = {name: position for name, position in dataset.aspects.values_list("name", "position")}
    pseudonyms = dict(dataset.raters.values_list("id", "pseudonym"))
    for chunk in _chunks(dataset):
        item_ids = [item_id for item_id, _ in chunk]
        turns_by_item: dict[int, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
        for turn_id, item_id, source in (
            Turn.objects.filter(item_id__in=item_ids)
            .order_by("item_id", "index")
            .values_list("id", "item_id", "source")
        ):
            turns_by_item[item_id].append((turn_id, source))
        turn_ids = [turn_id for turns in turns_by_item.values() for turn_id, _ in turns]
        answers_by_turn: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for answer in (
            Response.objects.filter(turn_id__in=turn_ids)
            .order_by("turn_id", "position")
            .values("id", "turn_id", "system__key", "source", "eval_aspects", "has_human_evals")
        ):
            answers_by_turn[answer["turn_id"]].append(dict(answer))
        response_ids = [a["id"] for answers in answers_by_turn.values() for a in answers]
        ratings_by_response: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for rating in (
            Rating.objects.filter(response_id__in=response_ids)
            .order_by("response_id", "aspect__position", "position", "id")
            .values("response_id", "aspect__name", "raw", "origin", "rater_id", "created_at")
        ):
            ratings_by_response[rating["response_id"]].append(dict(rating))
        run_scores: dict[int, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
        if include_judges:
            for response_id, judge_name, aspect_name, value in (
                JudgeScore.objects.filter(
                    response_id__in=response_ids, judge__kind__in=[JudgeKind.RUN, JudgeKind.DERIVED]
                )
                .order_by("judge__name", "aspect_name")
                .values_list("response_id", "judge__name", "aspect_name", "value")
            ):
                run_scores[response_id][judge_name][aspect_name] = value
        for item_id, item_source in chunk:
            turns_out = []
            for turn_id, turn_source in turns_by_item[item_id]:
                turn = dict(turn_source)
                answers = answers_by_turn[turn_id]
                if answers:
                    turn["responses"] = {
                        a["system__key"]: _rebuild_answer(
                            a["source"],
                            a["eval_aspects"],
                            a["has_human_evals"],
                            ratings_by_response[a["id"]],
                            aspect_order,
                            pseudonyms,
                            dict(run_scores.get(a["id"], {})),
                        )
                        for a in answers
                    }
                turns_out.append(turn)
            item = dict(item_source)
            item["turns"] = turns_out
            yield item


def iter_export_lines(*, dataset: Dataset, include_judges: bool = False) -> Iterator[str]:
    for obj in iter_export_objects(dataset=dataset, include_judges=include_judges):
        yield _dumps(obj) + "\n"


def iter_flat_rows(*, dataset: Dataset) -> Iterator[dict[str, Any]]:
    ratings = (
        Rating.objects.filter(response__turn__item__dataset=dataset)
        .order_by(
            "response__turn__item__position",
            "response__turn__index",
            "response__position",
            "aspect__position",
            "position",
            "id",
        )
        .values_list(
            "response__turn__item__external_id",
            "response__turn__index",
            "response__system__key",
            "aspect__name",
            "rater__pseudonym",
            "origin",
            "raw",
            "value",
            "is_missing",
            "rationale",
            "comment",
            "seconds_spent",
            "created_at",
        )
    )
    for row in ratings.iterator(chunk_size=5000):
        record: dict[str, Any] = dict(zip(FLAT_FIELDS, row, strict=True))
        record["turn"] = record["turn"] + 1
        record["created_at"] = record["created_at"].isoformat() if record["created_at"] else None
        yield record


def iter_flat_jsonl(rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    for row in rows:
        yield _dumps(row) + "\n"


def iter_flat_csv(rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    buffer = io.StringIO()
    # CRLF rows (RFC 4180): with a bare "\n" terminator Python's csv leaves a carriage return inside a cell unquoted,
    # and spreadsheets split the row there, so "x\r=HYPERLINK(...)" would start a new row with a live formula.
    writer = csv.DictWriter(buffer, fieldnames=FLAT_FIELDS, lineterminator="\r\n")
    writer.writeheader()
    for row in rows:
        safe = {
            key: csv_safe(json.dumps(value, ensure_ascii=False) if isinstance(value, (dict, list)) else value)
            for key, value in row.items()
        }
        writer.writerow(safe)
        if buffer.tell() > 64 * 1024:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()

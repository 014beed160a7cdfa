"""The flat export layout: one row per rating and one per preference (and, asked for, one per earlier version of a
corrected answer and per judge-filled rating), as CSV or JSONL. It reads the rows through the same helpers as the
JSONL format (annotations.datasets.exporting)."""

import csv
import heapq
import io
from collections.abc import Iterable, Iterator
from operator import itemgetter
from typing import Any

from annotations.adjudication.selectors import consensus_numbers
from annotations.datasets.exporting import (
    COLLECTED_ON_GOLD,
    CONSENSUS_KEY,
    EXPORT_BATCH,
    FLAT_FIELDS,
    HISTORY_FIELDS,
    PREFERENCES_KEY,
    RATING_FIELDS,
    SAMPLING_FIELD,
    ExcludedRaters,
    app_preferences,
    app_raters_by_user,
    csv_cell,
    in_batches,
    jsonl_text,
)
from annotations.datasets.span_rows import error_span_rows
from annotations.datasets.streamed_values import streamed_values
from annotations.models import (
    Aspect,
    Dataset,
    JudgeFilledRating,
    Rating,
    RatingOrigin,
    Response,
    Submission,
    SubmissionRevision,
    Task,
    Turn,
)
from annotations.selectors import shown_system_keys

_FlatRow = tuple[tuple[int, int], dict[str, Any]]  # ((item position, turn index), row)

# Where a rating column is read from, for the columns whose name is not the rating's own field.
_RATING_FIELD_LOOKUPS = {
    "item_id": "response__turn__item__external_id",
    "turn": "response__turn__index",
    "system": "response__system__key",
    "aspect": "aspect__name",
    "rater": "rater__pseudonym",
}
_NOT_A_RATING = {"kind": "rating", "campaign": None, "preferred": None, "none_appropriate": None, "candidates": None}


def _entered_with(keys: set[tuple[int, int, int]]) -> dict[tuple[int, int, int], tuple[Any, ...]]:
    """The submission each rating was entered with, by (its rater's user, its answer, its aspect): the answer among
    the task's and the aspect among the campaign's. One rater rates an answer's aspect once per dataset, so at most
    one submission matches; should more, the first one's. One query for a batch of ratings, where a subquery per
    rating was asked once for every row of the export."""
    found: dict[tuple[int, int, int], tuple[Any, ...]] = {}
    if not keys:
        return found
    candidates = (
        Submission.objects.filter(
            assignment__annotator_id__in={user for user, _, _ in keys},
            assignment__task__responses__in={response for _, response, _ in keys},
            assignment__campaign__aspects__in={aspect for _, _, aspect in keys},
        )
        .order_by("-id")  # the first submission is written last, so it is the one kept
        .values_list(
            "assignment__annotator_id",
            "assignment__task__responses",
            "assignment__campaign__aspects",
            "rationale",
            "comment",
            "assignment__campaign__name",
            "version",
        )
    )
    for user, response, aspect, *submission in candidates:
        if (user, response, aspect) in keys:
            found[user, response, aspect] = tuple(submission)
    return found


def _flat_rating_rows(dataset: Dataset) -> Iterator[_FlatRow]:
    # A dataset no campaign collected in (an imported one) has no submission to look up.
    collected = Submission.objects.filter(assignment__campaign__dataset=dataset).exists()
    ratings = (
        Rating.objects.filter(response__turn__item__dataset=dataset)
        .exclude(COLLECTED_ON_GOLD)
        .order_by(
            "response__turn__item__position",
            "response__turn__index",
            "response__position",
            "aspect__position",
            "position",
            "id",
        )
        .values_list(
            "response__turn__item__position",
            *(_RATING_FIELD_LOOKUPS.get(field, field) for field in RATING_FIELDS),
            "rater__user_id",
            "response_id",
            "aspect_id",
        )
    )
    for batch in in_batches(streamed_values(ratings, chunk_size=5000), 5000):
        adjudicated = consensus_numbers(response_ids={row[-2] for row in batch})
        submissions = (
            _entered_with({(row[-3], row[-2], row[-1]) for row in batch if row[-3] is not None}) if collected else {}
        )
        for (
            position, item_id, turn, system, aspect, rater, origin, raw, value, is_missing, rationale, comment,
            seconds_spent, created_at, user_id, response_id, aspect_id,
        ) in batch:  # fmt: skip
            # One dictionary display per row, in the flat layout's order (the rating columns, then those of the
            # other kinds, empty here): built field by field, the rows cost as much as writing them.
            record: dict[str, Any] = {
                "item_id": item_id,
                "turn": turn + 1,
                "system": system,
                "aspect": aspect,
                "rater": rater,
                "origin": origin,
                "raw": raw,
                "value": value,
                "is_missing": is_missing,
                "rationale": rationale,
                "comment": comment,
                "seconds_spent": seconds_spent,
                "created_at": created_at.isoformat() if created_at else None,
                "kind": "rating",
                "campaign": None,
                "preferred": None,
                "none_appropriate": None,
                "candidates": None,
                "version": None,
                CONSENSUS_KEY: adjudicated.get((response_id, aspect_id)),
            }
            submission = submissions.get((user_id, response_id, aspect_id)) if submissions else None
            if submission is not None:
                rationale, comment, campaign, version = submission
                record["campaign"] = campaign
                record["version"] = version
                # The form asks for one reason and one comment per task: they belong to the preference row, and
                # repeating them on every rating made them look like per-rating judgements.
                if record["rationale"] == rationale:
                    record["rationale"] = ""
                if record["comment"] == comment:
                    record["comment"] = ""
            yield (position, turn), record
            if isinstance(raw, dict):  # only a rating with error spans holds an object
                for span_row in error_span_rows(record):
                    yield (position, turn), span_row


def _preference_row(
    *, item_id: Any, turn_index: int, origin: str, entry: dict[str, Any], seconds_spent: Any, created_at: Any
) -> dict[str, Any]:
    return {
        "item_id": item_id,
        "turn": turn_index + 1,
        "system": None,
        "aspect": None,
        "rater": entry.get("rater"),
        "origin": origin,
        "raw": None,
        "value": None,
        "is_missing": None,
        "rationale": entry.get("reason"),
        "comment": entry.get("comment"),
        "seconds_spent": seconds_spent,
        "created_at": created_at,
        "kind": "preference",
        "campaign": entry.get("campaign"),
        "preferred": entry.get("preferred"),
        "none_appropriate": entry.get("none_appropriate"),
        "candidates": entry.get("candidates"),
        CONSENSUS_KEY: None,
        "tie": entry.get("tie") is True,
    }


def _flat_imported_preference_rows(dataset: Dataset) -> Iterator[_FlatRow]:
    turns = (
        Turn.objects.filter(item__dataset=dataset, source__has_key=PREFERENCES_KEY)
        .order_by("item__position", "index")
        .values_list("item__position", "item__external_id", "index", f"source__{PREFERENCES_KEY}")
    )
    for position, item_id, index, preferences in turns.iterator(chunk_size=EXPORT_BATCH):
        for entry in preferences if isinstance(preferences, list) else []:
            if isinstance(entry, dict):
                row = _preference_row(
                    item_id=item_id,
                    turn_index=index,
                    origin=RatingOrigin.IMPORT.value,
                    entry=entry,
                    seconds_spent=None,
                    created_at=None,
                )
                yield (position, index), row


def _flat_app_preference_rows(dataset: Dataset) -> Iterator[_FlatRow]:
    submissions = (
        Submission.objects.filter(assignment__campaign__dataset=dataset)
        .exclude(assignment__task__turn__item__gold__isnull=False)
        .order_by("assignment__task__turn__item__position", "assignment__task__turn__index", "created_at", "id")
    )
    for preference in app_preferences(submissions, app_raters_by_user(dataset)):
        row = _preference_row(
            item_id=preference.item_id,
            turn_index=preference.turn_index,
            origin=RatingOrigin.APP.value,
            entry=preference.as_json(),
            seconds_spent=preference.seconds_spent,
            created_at=preference.created_at.isoformat(),
        )
        row["version"] = preference.version
        yield (preference.item_position, preference.turn_index), row


def _flat_history_rows(dataset: Dataset) -> Iterator[dict[str, Any]]:
    """The earlier versions of corrected answers, each as the rating rows and the preference row it had."""
    revisions = (
        SubmissionRevision.objects.filter(submission__assignment__campaign__dataset=dataset)
        .exclude(submission__assignment__task__turn__item__gold__isnull=False)
        .order_by(
            "submission__assignment__task__turn__item__position",
            "submission__assignment__task__turn__index",
            "submission_id",
            "version",
        )
        .values_list(
            "submission_id",
            "version",
            "ratings",
            "rationale",
            "comment",
            "none_appropriate",
            "preferred_response__system__key",
            "submitted_at",
            "replaced_at",
        )
    )
    raters_by_user = app_raters_by_user(dataset)
    for batch in in_batches(revisions.iterator(chunk_size=EXPORT_BATCH), EXPORT_BATCH):
        submissions: dict[int, tuple[Any, ...]] = {
            row[0]: tuple(row[1:])
            for row in Submission.objects.filter(pk__in={r[0] for r in batch}).values_list(
                "pk",
                "assignment__task_id",
                "assignment__task__turn__item__external_id",
                "assignment__task__turn__index",
                "assignment__annotator_id",
                "assignment__campaign__name",
                "seconds_spent",
            )
        }
        response_ids = {r["response_id"] for revision in batch for r in revision[2]}
        systems = dict(Response.objects.filter(pk__in=response_ids).values_list("pk", "system__key"))
        aspects = dict(Aspect.objects.filter(dataset=dataset).values_list("pk", "name"))
        shown = shown_system_keys({row[0] for row in submissions.values()})
        for pk, version, ratings, rationale, comment, none_appropriate, preferred, submitted_at, replaced_at in batch:
            task_id, item_id, turn_index, annotator_id, campaign, spent = submissions[pk]
            rater = raters_by_user.get(annotator_id)
            common = {"version": version, "replaced_at": replaced_at.isoformat()}
            for rating in ratings:
                yield {
                    "item_id": item_id,
                    "turn": turn_index + 1,
                    "system": systems.get(rating["response_id"]),
                    "aspect": aspects.get(rating["aspect_id"]),
                    "rater": rater,
                    "origin": RatingOrigin.APP.value,
                    "raw": rating["raw"],
                    "value": rating["value"],
                    "is_missing": rating["is_missing"],
                    "rationale": "",
                    "comment": "",
                    "seconds_spent": spent,
                    "created_at": submitted_at.isoformat(),
                    **_NOT_A_RATING,
                    "campaign": campaign,
                    **common,
                    CONSENSUS_KEY: None,
                }
            entry = {
                "rater": rater,
                "campaign": campaign,
                "candidates": shown[task_id],
                "preferred": preferred,
                "none_appropriate": none_appropriate,
                "reason": rationale,
                "comment": comment,
            }
            row = _preference_row(
                item_id=item_id,
                turn_index=turn_index,
                origin=RatingOrigin.APP.value,
                entry=entry,
                seconds_spent=spent,
                created_at=submitted_at.isoformat(),
            )
            row.pop("tie", None)  # an app preference is never a tie
            out = row | common
            out[CONSENSUS_KEY] = out.pop(CONSENSUS_KEY)
            yield out


def iter_flat_rows(*, dataset: Dataset, history: bool = False, with_ties: bool = False) -> Iterator[dict[str, Any]]:
    """One row per rating, then per turn one row per preference (imported ones first, as in the JSONL export).
    Rows carry the current answers; with `history`, the earlier versions of corrected answers follow them, and
    every row has the version and replaced_at columns. `with_ties` adds to preference rows whether the entry was
    a tie (an imported preference with "tie": true), which the Parquet export keeps as a column."""
    excluded = ExcludedRaters.of(dataset)
    sampled = _sampling_probabilities(dataset)
    merged = heapq.merge(
        _flat_rating_rows(dataset),
        _flat_imported_preference_rows(dataset),
        _flat_app_preference_rows(dataset),
        key=itemgetter(0),
    )
    # A dataset without exclusions or sampling policies (most) skips their per-row look-ups.
    any_excluded = bool(excluded.ids)
    for _, row in merged:
        version = row.pop("version", None)
        tie = row.pop("tie", None)
        if with_ties and row["kind"] == "preference":
            row["tie"] = tie
        if history:
            row["version"] = version
            row["replaced_at"] = None
        row["rater_excluded"] = any_excluded and excluded.marks(row["rater"])
        row[CONSENSUS_KEY] = row.pop(CONSENSUS_KEY, None)  # in the CSV header's order
        row.update(_FILLED_BY_HUMAN)
        row[SAMPLING_FIELD] = (
            sampled.get((row["campaign"], row["item_id"], row["turn"], row.get("system"))) if sampled else None
        )
        yield row
    if history:
        for row in _flat_history_rows(dataset):
            row["rater_excluded"] = excluded.marks(row["rater"])
            row[CONSENSUS_KEY] = row.pop(CONSENSUS_KEY, None)
            row.update(_FILLED_BY_HUMAN)
            row[SAMPLING_FIELD] = sampled.get((row["campaign"], row["item_id"], row["turn"], row.get("system")))
            yield row
    for row in _judge_filled_rows(dataset):
        row["replaced_at"] = None
        row[SAMPLING_FIELD] = sampled.get((row["campaign"], row["item_id"], row["turn"], row["system"]))
        yield {key: row[key] for key in (HISTORY_FIELDS if history else FLAT_FIELDS)}


def _sampling_probabilities(dataset: Dataset) -> dict[tuple[Any, ...], float | None]:
    """(campaign, item, turn, system) → the probability with which the campaign sent that answer's task to humans,
    for the campaigns of the dataset with a sampling policy."""
    return {
        (campaign, item_id, turn + 1, system): probability
        for campaign, item_id, turn, system, probability in Task.responses.through.objects.filter(
            task__campaign__dataset=dataset, task__human_probability__isnull=False
        ).values_list(
            "task__campaign__name",
            "response__turn__item__external_id",
            "response__turn__index",
            "response__system__key",
            "task__human_probability",
        )
    }


_FILLED_BY_HUMAN = {"filled_by": "human", "judge_version": None}


def _judge_filled_rows(dataset: Dataset) -> Iterator[dict[str, Any]]:
    """The ratings judges gave in hybrid campaigns, after the people's, each marked filled_by = judge."""
    filled = (
        JudgeFilledRating.objects.filter(response__turn__item__dataset=dataset)
        .order_by("response__turn__item__position", "response__turn__index", "response__position", "aspect__position")
        .values_list(
            "response__turn__item__external_id",
            "response__turn__index",
            "response__system__key",
            "aspect__name",
            "judge_name",
            "value",
            "created_at",
            "campaign__name",
            "judge_version",
        )
    )
    for item_id, turn, system, aspect, judge, value, created_at, campaign, version in filled.iterator(chunk_size=5000):
        yield {
            "item_id": item_id,
            "turn": turn + 1,
            "system": system,
            "aspect": aspect,
            "rater": judge,
            "origin": "judge",
            "raw": value,
            "value": value,
            "is_missing": False,
            "rationale": "",
            "comment": "",
            "seconds_spent": None,
            "created_at": created_at.isoformat(),
            **_NOT_A_RATING,
            "campaign": campaign,
            "version": None,
            "rater_excluded": False,
            CONSENSUS_KEY: None,
            "filled_by": "judge",
            "judge_version": version,
        }


def iter_flat_jsonl(rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    for row in rows:
        yield jsonl_text(row) + "\n"


def iter_flat_csv(rows: Iterable[dict[str, Any]], *, history: bool = False) -> Iterator[str]:
    buffer = io.StringIO()
    # CRLF rows (RFC 4180): with a bare "\n" terminator Python's csv leaves a carriage return inside a cell unquoted,
    # and spreadsheets split the row there, so "x\r=HYPERLINK(...)" would start a new row with a live formula.
    fields = HISTORY_FIELDS if history else FLAT_FIELDS
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(fields)
    for row in rows:
        # A column the row lacks reads None, which the csv module writes as an empty cell.
        writer.writerow(map(csv_cell, map(row.get, fields)))
        if buffer.tell() > 64 * 1024:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()

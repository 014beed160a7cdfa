"""Export in the JSONL import format (lossless for imported data) and the flat layout (one row per rating and one
per preference), plus the four downloads built on them: their file names, media types and bodies.

Why one module of this size: every export reads the same rows in the same order (items, turns, answers, ratings,
preferences, judge and adjudicated values) through one set of queries, so the JSONL round trip and the flat layout
cannot drift apart."""

import csv
import heapq
import io
import json
import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.db.models import OuterRef, Q, QuerySet, Subquery
from django.http import StreamingHttpResponse

from annotations.adjudication.selectors import consensus_numbers, consensus_values, settled_preferences
from annotations.datasets import judge_scores
from annotations.gold.rules import GOLD_KEY, gold_field
from annotations.models import (
    Aspect,
    Dataset,
    GoldItem,
    Item,
    JudgeFilledRating,
    Rater,
    RaterExclusion,
    Rating,
    RatingOrigin,
    Response,
    Submission,
    SubmissionRevision,
    Task,
    Turn,
)
from annotations.rubrics import aspect_rubric_texts

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")

PREFERENCES_KEY = "preferences"
# Adjudicated values beside the raw ratings: {aspect: token} on an answer, a column in the flat layout.
CONSENSUS_KEY = "consensus"
# Adjudicated preferences of split tasks, on a turn: [{campaign, candidates, preferred, none_appropriate, reason}].
CONSENSUS_PREFERENCES_KEY = "consensus_preferences"
# Ratings a certified judge gave in a hybrid campaign in place of the task's raters: never among the human_evals.
JUDGE_FILLED_KEY = "judge_filled"
# Beside the judges' scores (auto_evals) of the export with judges: each judge version's standing, certified,
# uncertified or suspended.
JUDGE_CERTIFICATION_KEY = "judge_certification"

# Ratings collected in the app on a gold item or attention check measure the annotator, not the answer: every export
# leaves them out, with the preferences and earlier versions of those tasks. Ratings imported with the item stay.
_COLLECTED_ON_GOLD = Q(origin=RatingOrigin.APP, response__turn__item__gold__isnull=False)

# New columns go last so scripts that read the older layout by position keep working.
_FLAT_FIELDS_BEFORE_HISTORY = [
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
    "kind",
    "campaign",
    "preferred",
    "none_appropriate",
    "candidates",
]
# Whether the row's rater is excluded from the statistics now (an exclusion in force): their ratings stay in every
# export, and this says which ones the agreement figures leave out. Then the adjudicated value of the row's answer
# and aspect, when the task was disputed and settled (the raw rating beside it is never replaced; empty on preference
# rows and on earlier versions), kept as the last column.
# Last, who filled the row: "human" for every rating a person gave, "judge" for a rating a certified judge gave in a
# hybrid campaign in place of the task's raters, with the judge version's fingerprint.
FILLED_FIELDS = ["filled_by", "judge_version"]
FLAT_FIELDS = [*_FLAT_FIELDS_BEFORE_HISTORY, "rater_excluded", CONSENSUS_KEY, *FILLED_FIELDS]
RATING_FIELDS = FLAT_FIELDS[: FLAT_FIELDS.index("kind")]
# The flat export with history adds, per row, the answer's version (app rows) and when a later version replaced it
# (rows of earlier versions only; the current answer's rows leave it empty).
HISTORY_FIELDS = [
    *_FLAT_FIELDS_BEFORE_HISTORY,
    "version",
    "replaced_at",
    "rater_excluded",
    CONSENSUS_KEY,
    *FILLED_FIELDS,
]


def csv_safe(value: Any) -> Any:
    """Neutralises spreadsheet formulas in text cells; numbers pass through so they stay numbers."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


def _csv_cell(value: Any) -> Any:
    """``csv_safe`` of a flat row's cell, lists and objects as JSON; text is tested first, being most cells."""
    if isinstance(value, str):
        return "'" + value if value.startswith(FORMULA_PREFIXES) else value
    if isinstance(value, (dict, list)):
        return csv_safe(json.dumps(value, ensure_ascii=False))
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


# --- excluded raters --------------------------------------------------------------------------------------------

# On an answer of the JSONL format: one boolean per entry of its "raters" list, written when any of them is excluded;
# on a preference entry: true when its rater is. The flat layout's column of the same name says the same per row.
RATER_EXCLUDED_KEY = "rater_excluded"


@dataclass(frozen=True)
class ExcludedRaters:
    """The raters of a dataset excluded from the statistics now (an exclusion in force), by the id every export
    writes for them: the pseudonym, which is the file's own id for an imported rater. Every export marks rows and
    entries through `marks`, so all of them agree on who is excluded."""

    ids: frozenset[str]

    @classmethod
    def of(cls, dataset: Dataset) -> "ExcludedRaters":
        return cls(
            frozenset(
                RaterExclusion.objects.filter(rater__dataset=dataset, revoked_at__isnull=True).values_list(
                    "rater__pseudonym", flat=True
                )
            )
        )

    def marks(self, rater: Any) -> bool:
        # An imported file may name a rater with an integer: the stored pseudonym is its text.
        return rater is not None and not isinstance(rater, bool) and str(rater) in self.ids

    def mark_answer(self, answer: dict[str, Any]) -> None:
        """Marks the answer's raters in place: the mark is derived from the exclusions, never copied from a source."""
        answer.pop(RATER_EXCLUDED_KEY, None)
        flags = [self.marks(rater) for rater in answer.get("raters") or []]
        if any(flags):
            answer[RATER_EXCLUDED_KEY] = flags

    def mark_preference(self, entry: Any) -> Any:
        """The entry with its rater's mark; anything but an object, which an import kept as it was, unchanged."""
        if not isinstance(entry, dict):
            return entry
        marked = {key: value for key, value in entry.items() if key != RATER_EXCLUDED_KEY}
        if self.marks(entry.get("rater")):
            marked[RATER_EXCLUDED_KEY] = True
        return marked


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
    consensus: dict[str, Any] | None = None,
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
    if consensus:
        answer[CONSENSUS_KEY] = {
            name: consensus[name] for name in sorted(consensus, key=lambda n: aspect_order.get(n, 0))
        }
    if run_scores:
        merged = dict(answer.get("auto_evals") or {})
        merged.update(run_scores)
        answer["auto_evals"] = merged
    return answer


# --- preferences --------------------------------------------------------------------------------------------------

_BATCH = 2000


def _batches(rows: Iterable[Any], size: int) -> Iterator[list[Any]]:
    iterator = iter(rows)
    while batch := list(islice(iterator, size)):
        yield batch


@dataclass(frozen=True)
class _Preference:
    """A submission's task-level answer: the preferred candidate, "none is appropriate" and the reason."""

    item_position: int
    item_id: str
    turn_id: int
    turn_index: int
    rater: str | None
    campaign: str
    candidates: list[str]
    preferred: str | None
    none_appropriate: bool
    reason: str
    comment: str
    seconds_spent: float
    created_at: Any
    version: int = 1

    def as_json(self) -> dict[str, Any]:
        return {
            "rater": self.rater,
            "campaign": self.campaign,
            "candidates": self.candidates,
            "preferred": self.preferred,
            "none_appropriate": self.none_appropriate,
            "reason": self.reason,
            "comment": self.comment,
        }


def _app_raters_by_user(dataset: Dataset) -> dict[int, str]:
    return dict(Rater.objects.filter(dataset=dataset, user__isnull=False).values_list("user_id", "pseudonym"))


def _app_preferences(submissions: QuerySet[Submission], raters_by_user: dict[int, str]) -> Iterator[_Preference]:
    """The submissions in the queryset's order, each with the system keys of the answers its task showed, which a
    preference among a chunk of a turn's answers is meaningless without."""
    rows = submissions.values(
        "created_at",
        "seconds_spent",
        "none_appropriate",
        "rationale",
        "comment",
        "assignment__task_id",
        "assignment__task__turn_id",
        "assignment__task__turn__index",
        "assignment__task__turn__item__position",
        "assignment__task__turn__item__external_id",
        "assignment__annotator_id",
        "assignment__campaign__name",
        "preferred_response__system__key",
        "version",
    )
    for batch in _batches(rows.iterator(chunk_size=_BATCH), _BATCH):
        shown: dict[int, list[str]] = defaultdict(list)
        for task_id, key in (
            Task.responses.through.objects.filter(task_id__in={row["assignment__task_id"] for row in batch})
            .order_by("task_id", "response__position")
            .values_list("task_id", "response__system__key")
        ):
            shown[task_id].append(key)
        for row in batch:
            yield _Preference(
                item_position=row["assignment__task__turn__item__position"],
                item_id=row["assignment__task__turn__item__external_id"],
                turn_id=row["assignment__task__turn_id"],
                turn_index=row["assignment__task__turn__index"],
                rater=raters_by_user.get(row["assignment__annotator_id"]),
                campaign=row["assignment__campaign__name"],
                candidates=shown[row["assignment__task_id"]],
                preferred=row["preferred_response__system__key"],
                none_appropriate=row["none_appropriate"],
                reason=row["rationale"],
                comment=row["comment"],
                seconds_spent=row["seconds_spent"],
                created_at=row["created_at"],
                version=row["version"],
            )


def _turn_preferences(source: dict[str, Any], collected: list[dict[str, Any]]) -> Any:
    """Imported preferences first, then those collected in the app, as ratings are. A value the importer kept from
    before the key had a meaning stays as it was: the collected ones are still in the flat export."""
    imported = source.get(PREFERENCES_KEY)
    if not collected:
        return imported
    if imported is None:
        return collected
    return [*imported, *collected] if isinstance(imported, list) else imported


# --- the JSONL format -------------------------------------------------------------------------------------------


def iter_export_objects(*, dataset: Dataset, include_judges: bool = False) -> Iterator[dict[str, Any]]:
    aspect_order = {name: position for name, position in dataset.aspects.values_list("name", "position")}
    pseudonyms = dict(dataset.raters.values_list("id", "pseudonym"))
    raters_by_user = _app_raters_by_user(dataset)
    excluded = ExcludedRaters.of(dataset)
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
            .exclude(_COLLECTED_ON_GOLD)
            .order_by("response_id", "aspect__position", "position", "id")
            .values("response_id", "aspect__name", "raw", "origin", "rater_id", "created_at")
        ):
            ratings_by_response[rating["response_id"]].append(dict(rating))
        consensus = consensus_values(response_ids)
        consensus_preferences = settled_preferences(turn_ids)
        preferences_by_turn: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for preference in _app_preferences(
            Submission.objects.filter(assignment__task__turn_id__in=turn_ids)
            .exclude(assignment__task__turn__item__gold__isnull=False)
            .order_by("assignment__task__turn_id", "created_at", "id"),
            raters_by_user,
        ):
            preferences_by_turn[preference.turn_id].append(preference.as_json())
        run_scores: dict[int, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
        standings: dict[str, str] = {}
        if include_judges:
            for response_id, judge_name, aspect_name, value in judge_scores.run_scores(response_ids):
                run_scores[response_id][judge_name][aspect_name] = value
            standings = judge_scores.judge_standings(
                dataset, {name for scores in run_scores.values() for name in scores}
            )
        judge_filled = _judge_filled_by_response(response_ids)
        gold_fields = {
            gold.item_id: gold_field(
                kind=gold.kind, expected=gold.expected, tolerance=gold.tolerance, instruction=gold.instruction
            )
            for gold in GoldItem.objects.filter(item_id__in=item_ids)
        }
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
                            consensus.get(a["id"]),
                        )
                        for a in answers
                    }
                    for a in answers:
                        answer_out = turn["responses"][a["system__key"]]
                        excluded.mark_answer(answer_out)
                        if a["id"] in judge_filled:
                            answer_out[JUDGE_FILLED_KEY] = judge_filled[a["id"]]
                        judged_by = sorted(run_scores.get(a["id"], {}))
                        if judged_by:
                            answer_out[JUDGE_CERTIFICATION_KEY] = {name: standings.get(name) for name in judged_by}
                preferences = _turn_preferences(turn_source, preferences_by_turn.get(turn_id, []))
                if isinstance(preferences, list):
                    preferences = [excluded.mark_preference(entry) for entry in preferences]
                if preferences is not None:
                    turn[PREFERENCES_KEY] = preferences
                if consensus_preferences.get(turn_id):
                    turn[CONSENSUS_PREFERENCES_KEY] = consensus_preferences[turn_id]
                turns_out.append(turn)
            item = dict(item_source)
            if item_id in gold_fields:
                item[GOLD_KEY] = gold_fields[item_id]
            item["turns"] = turns_out
            yield item


def _judge_filled_by_response(response_ids: list[int]) -> dict[int, list[dict[str, Any]]]:
    """Per answer, the ratings judges gave in hybrid campaigns, apart from the people's human_evals."""
    filled: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for response_id, aspect, value, judge, version, campaign in (
        JudgeFilledRating.objects.filter(response_id__in=response_ids)
        .order_by("response_id", "aspect__position", "pk")
        .values_list("response_id", "aspect__name", "value", "judge_name", "judge_version", "campaign__name")
    ):
        filled[response_id].append(
            {
                "aspect": aspect,
                "value": value,
                "filled_by": "judge",
                "judge": judge,
                "judge_version": version,
                "campaign": campaign,
            }
        )
    return filled


def iter_export_lines(*, dataset: Dataset, include_judges: bool = False) -> Iterator[str]:
    for obj in iter_export_objects(dataset=dataset, include_judges=include_judges):
        yield _dumps(obj) + "\n"


# --- the flat layout --------------------------------------------------------------------------------------------

_FlatRow = tuple[tuple[int, int], dict[str, Any]]  # ((item position, turn index), row)

_NOT_A_RATING = {"kind": "rating", "campaign": None, "preferred": None, "none_appropriate": None, "candidates": None}


def _flat_rating_rows(dataset: Dataset) -> Iterator[_FlatRow]:
    # The submission a rating was entered with: its rater's user, its answer among the task's and its aspect among
    # the campaign's. One rater rates an answer's aspect once per dataset, so at most one submission matches.
    entered_with = (
        Submission.objects.filter(
            assignment__annotator_id=OuterRef("rater__user_id"),
            assignment__task__responses=OuterRef("response_id"),
            assignment__campaign__aspects=OuterRef("aspect_id"),
        )
        .order_by("id")
        .values("id")[:1]
    )
    ratings = (
        Rating.objects.filter(response__turn__item__dataset=dataset)
        .exclude(_COLLECTED_ON_GOLD)
        .annotate(submission_id=Subquery(entered_with))
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
            "submission_id",
            "response_id",
            "aspect_id",
        )
    )
    for batch in _batches(ratings.iterator(chunk_size=5000), 5000):
        adjudicated = consensus_numbers(response_ids={row[-2] for row in batch})
        submissions = {
            pk: (rationale, comment, campaign, version)
            for pk, rationale, comment, campaign, version in Submission.objects.filter(
                pk__in={row[-3] for row in batch if row[-3] is not None}
            ).values_list("pk", "rationale", "comment", "assignment__campaign__name", "version")
        }
        for position, *values, submission_id, response_id, aspect_id in batch:
            record: dict[str, Any] = dict(zip(RATING_FIELDS, values, strict=True))
            key = (position, record["turn"])
            record["turn"] = record["turn"] + 1
            record["created_at"] = record["created_at"].isoformat() if record["created_at"] else None
            record.update(_NOT_A_RATING)
            record["version"] = None
            if submission_id in submissions:
                rationale, comment, campaign, version = submissions[submission_id]
                record["campaign"] = campaign
                record["version"] = version
                # The form asks for one reason and one comment per task: they belong to the preference row, and
                # repeating them on every rating made them look like per-rating judgements.
                if record["rationale"] == rationale:
                    record["rationale"] = ""
                if record["comment"] == comment:
                    record["comment"] = ""
            record[CONSENSUS_KEY] = adjudicated.get((response_id, aspect_id))
            yield key, record


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
    for position, item_id, index, preferences in turns.iterator(chunk_size=_BATCH):
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
    for preference in _app_preferences(submissions, _app_raters_by_user(dataset)):
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
    raters_by_user = _app_raters_by_user(dataset)
    for batch in _batches(revisions.iterator(chunk_size=_BATCH), _BATCH):
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
        shown: dict[int, list[str]] = defaultdict(list)
        for task_id, key in (
            Task.responses.through.objects.filter(task_id__in={row[0] for row in submissions.values()})
            .order_by("task_id", "response__position")
            .values_list("task_id", "response__system__key")
        ):
            shown[task_id].append(key)
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
    merged = heapq.merge(
        _flat_rating_rows(dataset),
        _flat_imported_preference_rows(dataset),
        _flat_app_preference_rows(dataset),
        key=lambda pair: pair[0],
    )
    for _, row in merged:
        version = row.pop("version", None)
        tie = row.pop("tie", None)
        if with_ties and row["kind"] == "preference":
            row["tie"] = tie
        if history:
            row["version"] = version
            row["replaced_at"] = None
        row["rater_excluded"] = excluded.marks(row["rater"])
        row[CONSENSUS_KEY] = row.pop(CONSENSUS_KEY, None)  # in the CSV header's order
        row.update(_FILLED_BY_HUMAN)
        yield row
    if history:
        for row in _flat_history_rows(dataset):
            row["rater_excluded"] = excluded.marks(row["rater"])
            row[CONSENSUS_KEY] = row.pop(CONSENSUS_KEY, None)
            row.update(_FILLED_BY_HUMAN)
            yield row
    for row in _judge_filled_rows(dataset):
        row["replaced_at"] = None
        yield {key: row[key] for key in (HISTORY_FIELDS if history else FLAT_FIELDS)}


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
        yield _dumps(row) + "\n"


def iter_flat_csv(rows: Iterable[dict[str, Any]], *, history: bool = False) -> Iterator[str]:
    buffer = io.StringIO()
    # CRLF rows (RFC 4180): with a bare "\n" terminator Python's csv leaves a carriage return inside a cell unquoted,
    # and spreadsheets split the row there, so "x\r=HYPERLINK(...)" would start a new row with a live formula.
    fields = HISTORY_FIELDS if history else FLAT_FIELDS
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(fields)
    for row in rows:
        # A column the row lacks reads None, which the csv module writes as an empty cell.
        writer.writerow(map(_csv_cell, map(row.get, fields)))
        if buffer.tell() > 64 * 1024:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


# --- downloads --------------------------------------------------------------------------------------------------

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


def export_filename(dataset: Dataset, kind: str) -> str:
    return f"{safe_file_stem(dataset.name) or f'dataset-{dataset.pk}'}{EXPORT_KINDS[kind].suffix}"


def export_disposition(dataset: Dataset, kind: str) -> str:
    """An attachment header naming the file after the dataset. A non-ASCII name goes in filename* (RFC 6266, UTF-8)
    after a plain filename for clients that do not read filename*: the dataset id, since what is left of a
    name once its non-ASCII letters are dropped is rarely recognisable."""
    filename = export_filename(dataset, kind)
    if filename.isascii():
        return f'attachment; filename="{filename}"'
    fallback = f"dataset-{dataset.pk}{EXPORT_KINDS[kind].suffix}"
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"


def export_response(dataset: Dataset, kind: str) -> StreamingHttpResponse:
    """One download for the pages and the API alike."""
    body = iter_export(dataset=dataset, kind=kind)
    response = StreamingHttpResponse(
        (chunk.encode("utf-8") for chunk in body), content_type=EXPORT_KINDS[kind].content_type
    )
    response["Content-Disposition"] = export_disposition(dataset, kind)
    response["X-Content-Type-Options"] = "nosniff"
    return response

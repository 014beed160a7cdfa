"""Export in the JSONL import format, lossless for imported data: the rows every export reads (items, turns,
answers, ratings, preferences, judge and adjudicated values) through one set of queries in one order, and the JSONL
objects built from them. The flat layout (annotations.datasets.flat_export) reads the same rows through the helpers
here, so the JSONL round trip and the flat layout cannot drift apart; the downloads built on both are in
annotations.datasets.downloads."""

import json
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

from django.conf import settings
from django.db.models import Q, QuerySet

from annotations.adjudication.selectors import consensus_values, settled_preferences
from annotations.datasets import judge_scores
from annotations.gold.rules import GOLD_KEY, gold_field
from annotations.models import (
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
    Task,
    Turn,
)
from annotations.selectors import shown_system_keys

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")

PREFERENCES_KEY = "preferences"
# Adjudicated values beside the raw ratings: {aspect: token} on an answer, a column in the flat layout.
CONSENSUS_KEY = "consensus"
# Adjudicated preferences of split tasks, on a turn: [{campaign, candidates, preferred, none_appropriate, reason}].
CONSENSUS_PREFERENCES_KEY = "consensus_preferences"
# Ratings a certified judge gave in a hybrid campaign in place of the task's raters: never among the human_evals.
JUDGE_FILLED_KEY = "judge_filled"
# Per answer, the campaigns that sent it to the human raters with a known probability: [{"campaign", "probability"}].
HUMAN_SAMPLING_KEY = "human_sampling"
# Beside the judges' scores (auto_evals) of the export with judges: each judge version's standing, certified,
# uncertified or suspended.
JUDGE_CERTIFICATION_KEY = "judge_certification"

# Ratings collected in the app on a gold item or attention check measure the annotator, not the answer: every export
# leaves them out, with the preferences and earlier versions of those tasks. Ratings imported with the item stay.
COLLECTED_ON_GOLD = Q(origin=RatingOrigin.APP, response__turn__item__gold__isnull=False)

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
# Then the probability with which the row's task was sent to the human raters, in a hybrid campaign with a sampling
# policy (empty otherwise): the weight of a human rating in an unbiased estimate is its inverse.
SAMPLING_FIELD = "human_probability"
FLAT_FIELDS = [*_FLAT_FIELDS_BEFORE_HISTORY, "rater_excluded", CONSENSUS_KEY, *FILLED_FIELDS, SAMPLING_FIELD]
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
    SAMPLING_FIELD,
]


def csv_safe(value: Any) -> Any:
    """Neutralises spreadsheet formulas in text cells; numbers pass through so they stay numbers."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


_FORMULA_FIRST_CHARACTERS = frozenset(FORMULA_PREFIXES)
_WRITTEN_AS_THEY_ARE = frozenset({type(None), bool, int, float})


def csv_cell(value: Any) -> Any:
    """``csv_safe`` of a flat row's cell, lists and objects as JSON. Called for every cell of a million-row export,
    so the common exact types are tested first, by identity."""
    kind = type(value)
    if kind is str:
        return "'" + value if value[:1] in _FORMULA_FIRST_CHARACTERS else value
    if kind in _WRITTEN_AS_THEY_ARE:
        return value
    if isinstance(value, str):
        return "'" + value if value.startswith(FORMULA_PREFIXES) else value
    if isinstance(value, (dict, list)):
        return csv_safe(json.dumps(value, ensure_ascii=False))
    return value


def jsonl_text(obj: Any) -> str:
    """A JSONL line's text: non-ASCII as it is, and the standard library's spacing, which earlier exports used."""
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


EXPORT_BATCH = 2000


def in_batches(rows: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """The rows in lists of `size` (the last one shorter), read lazily."""
    iterator = iter(rows)
    while batch := list(islice(iterator, size)):
        yield batch


@dataclass(frozen=True)
class AppPreference:
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


def app_raters_by_user(dataset: Dataset) -> dict[int, str]:
    """The pseudonym of each account that rated in the app, by user id."""
    return dict(Rater.objects.filter(dataset=dataset, user__isnull=False).values_list("user_id", "pseudonym"))


def app_preferences(submissions: QuerySet[Submission], raters_by_user: dict[int, str]) -> Iterator[AppPreference]:
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
    for batch in in_batches(rows.iterator(chunk_size=EXPORT_BATCH), EXPORT_BATCH):
        shown = shown_system_keys({row["assignment__task_id"] for row in batch})
        for row in batch:
            yield AppPreference(
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


def iter_export_objects(*, dataset: Dataset, include_judges: bool = False) -> Iterator[dict[str, Any]]:
    aspect_order = {name: position for name, position in dataset.aspects.values_list("name", "position")}
    pseudonyms = dict(dataset.raters.values_list("id", "pseudonym"))
    raters_by_user = app_raters_by_user(dataset)
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
            .exclude(COLLECTED_ON_GOLD)
            .order_by("response_id", "aspect__position", "position", "id")
            .values("response_id", "aspect__name", "raw", "origin", "rater_id", "created_at")
        ):
            ratings_by_response[rating["response_id"]].append(dict(rating))
        consensus = consensus_values(response_ids)
        consensus_preferences = settled_preferences(turn_ids)
        preferences_by_turn: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for preference in app_preferences(
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
        per_answer = {
            JUDGE_FILLED_KEY: _judge_filled_by_response(response_ids),
            HUMAN_SAMPLING_KEY: _sampling_by_response(response_ids),
        }
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
                        answer_out.update(
                            {key: found[a["id"]] for key, found in per_answer.items() if a["id"] in found}
                        )
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


def _sampling_by_response(response_ids: list[int]) -> dict[int, list[dict[str, Any]]]:
    """Per answer, the probability with which each hybrid campaign with a sampling policy sent its task to humans."""
    sampled: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for response_id, campaign, probability in (
        Task.responses.through.objects.filter(response_id__in=response_ids, task__human_probability__isnull=False)
        .order_by("response_id", "task__campaign__name")
        .values_list("response_id", "task__campaign__name", "task__human_probability")
    ):
        sampled[response_id].append({"campaign": campaign, "probability": probability})
    return sampled


def iter_export_lines(*, dataset: Dataset, include_judges: bool = False) -> Iterator[str]:
    for obj in iter_export_objects(dataset=dataset, include_judges=include_judges):
        yield jsonl_text(obj) + "\n"

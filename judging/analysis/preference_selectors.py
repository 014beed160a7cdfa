"""Reads of human preferences and pairwise judgments for the statistics: the preferences of a rating scope (imported
with the turns, or submitted in campaigns), the comparisons their best-of-K choices and ties make, and the pairwise
judge runs' judgments. Scoped as every other read, by `judging.analysis.selectors`' rating scope."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import numpy.typing as npt
from django.db import connection

from annotations.models import Dataset, GoldItem, Item, Response, Submission, System, Task, Turn
from judging.analysis.selectors import ALL_RATINGS, RatingScope, exclusions_in_force
from judging.models import Judgment, JudgmentStatus


@dataclass(frozen=True)
class PreferenceRows:
    """One entry per preference of the scope: its turn, the system keys shown, the key chosen (None when none was
    asked, or for a tie) and "none is appropriate"; ``tie`` marks imported entries with "tie": true."""

    turn_ids: list[int]
    candidates: list[list[str]]
    preferred: list[str | None]
    none_appropriate: list[bool]
    tie: list[bool] = field(default_factory=list)


def _imported_preferences(dataset: Dataset, rows: PreferenceRows) -> None:
    """The turns' imported ``preferences``; an entry that lists no candidates chose among all the turn's answers."""
    turns = list(
        Turn.objects.filter(item__dataset=dataset, item__gold__isnull=True, source__has_key="preferences").values_list(
            "id", "source"
        )
    )
    shown: dict[int, list[str]] = {}
    for turn_id, key in (
        Response.objects.filter(turn_id__in=[turn_id for turn_id, _ in turns])
        .order_by("turn_id", "position")
        .values_list("turn_id", "system__key")
    ):
        shown.setdefault(turn_id, []).append(key)
    for turn_id, source in turns:
        entries = source.get("preferences")
        for entry in entries if isinstance(entries, list) else []:
            if not isinstance(entry, dict):
                continue
            candidates = entry.get("candidates")
            preferred = entry.get("preferred")
            rows.turn_ids.append(turn_id)
            rows.candidates.append(list(candidates) if isinstance(candidates, list) else shown.get(turn_id, []))
            rows.preferred.append(preferred if isinstance(preferred, str) else None)
            rows.none_appropriate.append(entry.get("none_appropriate") is True)
            rows.tie.append(entry.get("tie") is True and not isinstance(preferred, str))


def _app_preferences(dataset: Dataset, scope: RatingScope, rows: PreferenceRows) -> None:
    submissions = Submission.objects.filter(
        assignment__campaign__dataset=dataset,
        assignment__is_gold=False,
        assignment__task__turn__item__gold__isnull=True,
    )
    if not scope.include_excluded:
        excluded_users = [user_id for _, user_id, _, _ in exclusions_in_force(dataset) if user_id is not None]
        if excluded_users:
            submissions = submissions.exclude(assignment__annotator_id__in=excluded_users)
    tasks = Task.responses.through.objects.filter(task__campaign__dataset=dataset)
    if scope.campaign_id is not None:
        submissions = submissions.filter(assignment__campaign_id=scope.campaign_id)
        tasks = tasks.filter(task__campaign_id=scope.campaign_id)
    shown: dict[int, list[str]] = {}
    for task_id, key in tasks.order_by("task_id", "response__position").values_list("task_id", "response__system__key"):
        shown.setdefault(task_id, []).append(key)
    for task_id, turn_id, preferred, none_appropriate in submissions.order_by("id").values_list(
        "assignment__task_id", "assignment__task__turn_id", "preferred_response__system__key", "none_appropriate"
    ):
        rows.turn_ids.append(turn_id)
        rows.candidates.append(shown.get(task_id, []))
        rows.preferred.append(preferred)
        rows.none_appropriate.append(none_appropriate)
        rows.tie.append(False)  # the form has no tie


def stats_preferences(dataset: Dataset, scope: RatingScope = ALL_RATINGS) -> PreferenceRows:
    """The preferences of a scope, as its ratings: imported ones (kept with the turns), app ones (submissions), or
    one campaign's submissions."""
    rows = PreferenceRows([], [], [], [])
    if scope.campaign_id is None and scope.origin in ("all", "imported"):
        _imported_preferences(dataset, rows)
    if scope.campaign_id is not None or scope.origin in ("all", "app"):
        _app_preferences(dataset, scope, rows)
    return rows


@dataclass(frozen=True)
class ChoiceComparisons:
    """The comparisons a scope's best-of-K choices make, one per chosen system and other system shown, in the order
    of the turns, their entries and the systems shown (the order ``preference_comparisons`` gives)."""

    turn_ids: npt.NDArray[np.int64]
    chosen: list[str]
    other: list[str]
    # The ties: imported entries marked "tie" without a choice, one row per pair of the systems they showed.
    tied_turn_ids: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    tied_first: list[str] = field(default_factory=list)
    tied_second: list[str] = field(default_factory=list)


# The imported preference entries of a dataset's turns (gold items left out), numbered in the order they are listed;
# the two reads below add their own conditions to these (table names filled in from the models).
_IMPORTED_ENTRIES = """FROM {turn} turn
    JOIN {item} item ON item.id = turn.item_id
    CROSS JOIN LATERAL jsonb_array_elements(
        CASE WHEN jsonb_typeof(turn.source->'preferences') = 'array' THEN turn.source->'preferences' END
    ) WITH ORDINALITY AS entry(value, ordinal)
    WHERE item.dataset_id = %s
      AND NOT EXISTS (SELECT 1 FROM {gold} gold WHERE gold.item_id = item.id)
      AND jsonb_typeof(entry.value) = 'object'"""


def _imported_entries() -> str:
    return _IMPORTED_ENTRIES.format(turn=Turn._meta.db_table, item=Item._meta.db_table, gold=GoldItem._meta.db_table)


# One row per (chosen, other shown) pair of an imported entry that chose a system it showed. An entry without a
# candidate list showed every answer of its turn; a system listed twice counts once, where it first appears.
_IMPORTED_CHOICES_SQL = """
WITH entries AS (
    SELECT turn.id AS turn_id, item.position AS item_position, turn.index AS turn_index, entry.ordinal,
           entry.value->>'preferred' AS chosen, entry.value->'candidates' AS candidates
    {entries}
      AND jsonb_typeof(entry.value->'preferred') = 'string'
)
SELECT entries.turn_id, entries.chosen, shown.key
FROM entries
CROSS JOIN LATERAL (
    SELECT listed.key, MIN(listed.ordinal) AS first_seen,
           bool_or(bool_or(listed.key = entries.chosen)) OVER () AS has_chosen
    FROM (
        SELECT candidate.key, candidate.ordinal
        FROM jsonb_array_elements_text(
            CASE WHEN jsonb_typeof(entries.candidates) = 'array' THEN entries.candidates END
        ) WITH ORDINALITY AS candidate(key, ordinal)
        UNION ALL
        SELECT system.key, response.position
        FROM {response} response
        JOIN {system} system ON system.id = response.system_id
        WHERE response.turn_id = entries.turn_id AND jsonb_typeof(entries.candidates) IS DISTINCT FROM 'array'
    ) AS listed
    GROUP BY listed.key
) AS shown
WHERE shown.has_chosen AND shown.key <> entries.chosen
ORDER BY entries.item_position, entries.turn_index, entries.ordinal, shown.first_seen
"""


def _imported_choices_in_database(dataset: Dataset) -> tuple[list[int], list[str], list[str]]:
    sql = _IMPORTED_CHOICES_SQL.format(
        entries=_imported_entries(), response=Response._meta.db_table, system=System._meta.db_table
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [dataset.pk])
        rows = cursor.fetchall()
    return [row[0] for row in rows], [row[1] for row in rows], [row[2] for row in rows]


# The imported entries that are ties (no choice, "tie": true), in the order of ``_imported_preferences``.
_IMPORTED_TIES_SQL = """
SELECT turn.id, entry.value->'candidates'
    {entries}
      AND entry.value->'tie' = 'true'::jsonb
      AND jsonb_typeof(entry.value->'preferred') IS DISTINCT FROM 'string'
ORDER BY item.position, turn.index, entry.ordinal
"""


def _imported_ties(dataset: Dataset, in_database: bool) -> tuple[list[int], list[list[str]]]:
    """(turn id, systems shown) of each imported tie; an entry without a candidate list showed every answer."""
    if not in_database:
        rows = PreferenceRows([], [], [], [])
        _imported_preferences(dataset, rows)
        kept = [index for index, tie in enumerate(rows.tie) if tie]
        return [rows.turn_ids[index] for index in kept], [rows.candidates[index] for index in kept]
    sql = _IMPORTED_TIES_SQL.format(entries=_imported_entries())
    with connection.cursor() as cursor:
        cursor.execute(sql, [dataset.pk])
        found = cursor.fetchall()
    listed = [json.loads(c) if isinstance(c, str) else c for _, c in found]
    unlisted = {turn_id for (turn_id, _), shown in zip(found, listed, strict=True) if not isinstance(shown, list)}
    answers: dict[int, list[str]] = {}
    for turn_id, key in (
        Response.objects.filter(turn_id__in=unlisted)
        .order_by("turn_id", "position")
        .values_list("turn_id", "system__key")
    ):
        answers.setdefault(turn_id, []).append(key)
    return [turn_id for turn_id, _ in found], [
        [str(key) for key in shown] if isinstance(shown, list) else answers.get(turn_id, [])
        for (turn_id, _), shown in zip(found, listed, strict=True)
    ]


def _choices_in_python(preferences: PreferenceRows) -> tuple[list[int], list[str], list[str]]:
    from judging.statistics.pairwise import preference_comparisons  # noqa: PLC0415 -- statistics load when used

    rows = preference_comparisons(preferences.turn_ids, preferences.candidates, preferences.preferred)
    return [cast(int, row[0]) for row in rows], [row[1] for row in rows], [row[2] for row in rows]


def choice_comparisons(
    dataset: Dataset, scope: RatingScope = ALL_RATINGS, *, in_database: bool | None = None
) -> ChoiceComparisons:
    """The comparisons of ``stats_preferences``'s choices without building a row object per vote: on PostgreSQL the
    database unnests the imported entries; ``in_database=False`` takes the portable path (the one SQLite takes)."""
    if in_database is None:
        in_database = connection.vendor == "postgresql"
    turn_ids: list[int] = []
    chosen: list[str] = []
    other: list[str] = []
    if scope.campaign_id is None and scope.origin in ("all", "imported"):
        if in_database:
            turn_ids, chosen, other = _imported_choices_in_database(dataset)
        else:
            imported = PreferenceRows([], [], [], [])
            _imported_preferences(dataset, imported)
            turn_ids, chosen, other = _choices_in_python(imported)
    if scope.campaign_id is not None or scope.origin in ("all", "app"):
        app = PreferenceRows([], [], [], [])
        _app_preferences(dataset, scope, app)
        app_turns, app_chosen, app_other = _choices_in_python(app)
        turn_ids += app_turns
        chosen += app_chosen
        other += app_other
    tied: tuple[list[Any], list[str], list[str]] = ([], [], [])
    if scope.campaign_id is None and scope.origin in ("all", "imported"):
        from judging.statistics.pairwise import tie_comparisons  # noqa: PLC0415 -- statistics load when used

        tied = tie_comparisons(*_imported_ties(dataset, in_database))
    return ChoiceComparisons(
        np.asarray(turn_ids, dtype=np.int64), chosen, other, np.asarray(tied[0], dtype=np.int64), tied[1], tied[2]
    )


def pairwise_judgments(dataset: Dataset) -> dict[str, list[tuple[int, str, str, str, int, int, float]]]:
    """Per pairwise judge run, its finished judgments as (turn id, system, other system, aspect, sample, pair order,
    score for the system)."""
    rows = (
        Judgment.objects.filter(
            run__dataset=dataset,
            run__method="pairwise",
            status=JudgmentStatus.DONE,
            score__isnull=False,
            other_response__isnull=False,
        )
        .order_by("id")
        .values_list(
            "run__judge__name",
            "response__turn_id",
            "response__system__key",
            "other_response__system__key",
            "aspect_name",
            "sample",
            "pair_order",
            "score",
        )
    )
    found: dict[str, list[tuple[int, str, str, str, int, int, float]]] = {}
    for name, *judgment in rows:
        found.setdefault(name, []).append(tuple(judgment))  # type: ignore[arg-type]
    return found

"""The ranking reads the votes' comparisons as columns: PostgreSQL unnests the imported entries in the database, the
portable path (SQLite's) parses them in Python; both give the arrays the per-row path gave before."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.db import connection

from annotations.models import Dataset, GoldItem, GoldKind, Item, Turn
from judging.analysis.preference_selectors import choice_comparisons, stats_preferences
from judging.analysis.selectors import ALL_RATINGS, RatingScope, rating_scope
from judging.statistics.pairwise import Comparisons, choice_comparisons_from, comparisons_from, preference_comparisons
from tests.annotate.factories import lfqa_lines, make_dataset
from tests.dashboard.test_preferences import PreferenceSetup, setup  # noqa: F401 -- the fixture with app votes

pytestmark = pytest.mark.django_db

# Entries the import would refuse are kept too: a turn's stored JSON may predate a stricter check.
ENTRIES_BY_ITEM: dict[str, list[Any]] = {
    "q0": [
        {"candidates": ["sys_alpha", "sys_beta", "sys_alpha"], "preferred": "sys_alpha"},  # a system listed twice
        {"preferred": "sys_gamma"},  # no candidate list: every answer of the turn was shown
        {"candidates": ["sys_alpha", "sys_beta"], "preferred": "sys_gamma"},  # chose a system not shown
        {"candidates": ["sys_alpha", "sys_beta"], "preferred": None, "tie": True},
        "not an entry",
        {"candidates": "sys_alpha", "preferred": "sys_beta"},  # candidates not a list: all answers
    ],
    "q1": [{"candidates": ["sys_gamma", "sys_beta"], "preferred": "sys_beta"}],
    "q2": [{"candidates": ["sys_gamma", "sys_alpha"], "preferred": "sys_gamma"}],  # a gold item: never counted
    "q3": [{"candidates": ["sys_beta"], "preferred": "sys_beta"}],  # nothing to compare with
}


def _dataset(owner: User) -> Dataset:
    dataset = make_dataset("choices Ξ", owner=owner, lines=lfqa_lines(4, systems=3, turns=2))
    # The items' positions run against their ids, so the comparisons follow the items' order, not the rows'.
    for offset, external_id in enumerate(["q3", "q2", "q1", "q0"]):
        Item.objects.filter(dataset=dataset, external_id=external_id).update(position=10 + offset)
    for external_id, entries in ENTRIES_BY_ITEM.items():
        for turn in Turn.objects.filter(item__dataset=dataset, item__external_id=external_id):
            turn.source = {**turn.source, "preferences": entries if turn.index == 0 else entries[:1]}
            turn.save(update_fields=["source"])
    GoldItem.objects.create(
        item=Item.objects.get(dataset=dataset, external_id="q2"), kind=GoldKind.GOLD, expected={}, tolerance=0
    )
    return dataset


def _per_row(
    dataset: Dataset, scope: RatingScope = ALL_RATINGS, prompt_index: dict[Any, int] | None = None
) -> Comparisons:
    rows = stats_preferences(dataset, scope)
    return comparisons_from(preference_comparisons(rows.turn_ids, rows.candidates, rows.preferred), prompt_index)


def _columns(dataset: Dataset, scope: RatingScope = ALL_RATINGS, in_database: bool = False) -> Comparisons:
    choices = choice_comparisons(dataset, scope, in_database=in_database)
    return choice_comparisons_from(choices.turn_ids, choices.chosen, choices.other, {})


def _assert_same(left: Comparisons, right: Comparisons) -> None:
    assert left.system_labels == right.system_labels
    assert left.n_prompts == right.n_prompts
    for name in ("prompt", "first", "second", "score"):
        np.testing.assert_array_equal(getattr(left, name), getattr(right, name), err_msg=name)
        assert getattr(left, name).dtype == getattr(right, name).dtype


def _paths(dataset: Dataset, scope: RatingScope = ALL_RATINGS) -> list[Comparisons]:
    paths = [_columns(dataset, scope, in_database=False)]
    if connection.vendor == "postgresql":
        paths.append(_columns(dataset, scope, in_database=True))
    return paths


def test_imported_choices_read_as_columns_equal_the_per_row_path(researcher: User) -> None:
    dataset = _dataset(researcher)
    expected = _per_row(dataset, prompt_index={})
    # q0's first turn: 1 (alpha over beta, the repeat counted once) + 2 (gamma over the rest) + 2 (beta, all answers);
    # its second turn and q1's two turns: 1 each; the gold item's and q3's none.
    assert expected.n == 5 + 1 + 2
    assert expected.n_prompts == 4
    for columns in _paths(dataset):
        _assert_same(columns, expected)


def test_app_and_imported_choices_read_as_columns_equal_the_per_row_path(setup: PreferenceSetup) -> None:  # noqa: F811
    for scope in (ALL_RATINGS, rating_scope(origin="imported"), rating_scope(origin="app")):
        expected = _per_row(setup.dataset, scope, {})
        assert expected.n > 0
        for columns in _paths(setup.dataset, scope):
            _assert_same(columns, expected)


def test_column_coding_extends_a_shared_prompt_index_like_the_per_row_coding() -> None:
    turns = np.asarray([7, 3, 7, 9, 3], dtype=np.int64)
    chosen = ["b", "a", "c", "a", "b"]
    other = ["a", "c", "a", "b", "c"]
    rows = [(int(t), c, o, 1.0) for t, c, o in zip(turns, chosen, other, strict=True)]
    shared_rows: dict[Any, int] = {9: 0}
    shared_columns: dict[Any, int] = {9: 0}
    _assert_same(choice_comparisons_from(turns, chosen, other, shared_columns), comparisons_from(rows, shared_rows))
    assert shared_columns == shared_rows == {9: 0, 7: 1, 3: 2}

"""The rule that picks rated examples: balanced across levels, most agreed first, ties by the seed."""

import pytest

from judging.statistics.exemplars import ExemplarError, consensus_label, select_exemplars

LEVELS = [1.0, 2.0, 3.0, 4.0, 5.0]


def test_the_consensus_is_the_median_moved_to_the_nearest_level_halfway_going_down() -> None:
    assert consensus_label([4, 4, 5], LEVELS) == 4.0
    assert consensus_label([2, 5, 5], LEVELS) == 5.0
    # Median 3.5 lies halfway between 3 and 4: the lower level.
    assert consensus_label([3, 4], LEVELS) == 3.0
    # Median 2.25 of ratings on a finer grid goes to the nearest level, 2.
    assert consensus_label([2.0, 2.5, 2.25], LEVELS) == 2.0


def test_unanimous_answers_come_first_then_the_smallest_spread_then_more_raters() -> None:
    ratings = {
        10: [4, 5, 4],  # label 4, spread 1
        11: [4, 4],  # label 4, unanimous, 2 raters
        12: [4, 4, 4],  # label 4, unanimous, 3 raters
        13: [3, 5, 4],  # label 4, spread 2
    }
    selection = select_exemplars(ratings, levels=LEVELS, k=3, seed=0)
    assert [c.response_id for c in selection.chosen] == [12, 11, 10]
    assert [(c.unanimous, c.spread, c.n_raters) for c in selection.chosen] == [
        (True, 0.0, 3),
        (True, 0.0, 2),
        (False, 1.0, 3),
    ]
    assert selection.candidates == 4


def test_k_per_level_balances_the_scale_and_names_the_levels_without_any() -> None:
    ratings = {i: [float(1 + i % 3)] * 2 for i in range(30)}  # consensus 1, 2 or 3, ten answers each
    selection = select_exemplars(ratings, levels=LEVELS, k=2, seed=5)
    labels = [c.label for c in selection.chosen]
    assert labels == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]
    assert selection.missing_levels == [4.0, 5.0]


def test_answers_with_a_single_rater_have_no_agreement_and_are_not_chosen() -> None:
    selection = select_exemplars({1: [5.0], 2: [5.0, 5.0]}, levels=LEVELS, k=2, seed=0)
    assert [c.response_id for c in selection.chosen] == [2]
    assert selection.candidates == 1


def test_ties_are_broken_by_the_seed_reproducibly() -> None:
    ratings = {i: [3.0, 3.0] for i in range(20)}
    first = [c.response_id for c in select_exemplars(ratings, levels=LEVELS, k=3, seed=11).chosen]
    again = [c.response_id for c in select_exemplars(ratings, levels=LEVELS, k=3, seed=11).chosen]
    other_seeds = {
        tuple(c.response_id for c in select_exemplars(ratings, levels=LEVELS, k=3, seed=s).chosen) for s in range(5)
    }
    assert first == again and len(first) == 3
    assert len(other_seeds) > 1


def test_bad_requests_name_the_problem() -> None:
    with pytest.raises(ExemplarError, match="at least 1"):
        select_exemplars({}, levels=LEVELS, k=0, seed=0)
    with pytest.raises(ExemplarError, match="no levels"):
        select_exemplars({}, levels=[], k=1, seed=0)

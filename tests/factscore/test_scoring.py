import pytest

from judging.factscore.scoring import (
    AnswerOutcome,
    answer_score,
    competition_ranks,
    error_mark,
    evaluate_estimator,
    human_answer_score,
    system_scores,
)


def test_answer_score_is_supported_over_all_facts() -> None:
    assert answer_score([True, True, False]) == pytest.approx(2 / 3)
    assert answer_score(["supported", "not_supported", "not_supported", "supported"]) == 0.5
    assert answer_score([]) is None


def test_irrelevant_facts_are_dropped_unless_counted_as_unsupported() -> None:
    labels = ["supported", "irrelevant", "not_supported", "supported"]
    assert answer_score(labels) == pytest.approx(2 / 3)
    assert answer_score(labels, irrelevant="unsupported") == 0.5
    assert answer_score(["irrelevant"]) is None
    with pytest.raises(ValueError):
        answer_score(labels, irrelevant="ignore")


def test_human_answer_score_averages_each_raters_own_fact_list() -> None:
    # Rater 2 split one fact into two, so the lists differ in length.
    rater1 = ["supported", "supported", "not_supported"]  # 2/3
    rater2 = ["supported", "supported", "supported", "not_supported"]  # 3/4
    rater3 = ["irrelevant"]  # nothing to score: skipped
    assert human_answer_score([rater1, rater2, rater3]) == pytest.approx((2 / 3 + 3 / 4) / 2)
    assert human_answer_score([rater3]) is None


def test_system_score_excludes_refusals_and_reports_responding_and_facts() -> None:
    outcomes = [
        AnswerOutcome("a", refused=False, n_facts=4, score=0.75),
        AnswerOutcome("a", refused=False, n_facts=2, score=0.5),
        AnswerOutcome("a", refused=True, n_facts=0, score=None),
        AnswerOutcome("a", refused=False, n_facts=0, score=None),  # answered, nothing checkable
        AnswerOutcome("a", refused=False, n_facts=0, score=None, failed=True),  # its decomposition failed
        AnswerOutcome("b", refused=True, n_facts=0, score=None),
    ]
    a, b, c = system_scores(outcomes, systems=["a", "b", "c"])
    assert a.as_dict() == {
        "system": "a",
        "n_prompts": 5,
        "n_responding": 4,
        "n_scored": 2,
        "n_refused": 1,
        "n_no_facts": 1,
        "n_failed": 1,
        "pct_responding": 80.0,
        "factscore": 0.625,  # (0.75 + 0.5) / 2
        "facts_per_answer": 2.0,  # (4 + 2 + 0) / 3: the failed answer's facts are unknown
        "denominators": {"pct_responding": 5, "factscore": 2, "facts_per_answer": 3},
    }
    assert (b.n_prompts, b.pct_responding, b.factscore, b.facts_per_answer) == (1, 0.0, None, None)
    assert (c.n_prompts, c.pct_responding) == (0, None)


def test_competition_ranks_share_ties() -> None:
    assert competition_ranks({"x": 0.5, "y": 0.9, "z": 0.5, "w": 0.1}) == {"y": 1, "x": 2, "z": 2, "w": 4}


@pytest.mark.parametrize(
    ("points", "mark"), [(5.0, ""), (5.01, "+"), (-5.0, ""), (-7.5, "-"), (100 * (0.65 - 0.60), "")]
)
def test_error_mark_needs_more_than_five_points(points: float, mark: str) -> None:
    assert error_mark(points) == mark


def test_estimator_evaluation_per_system() -> None:
    human = {
        1: ("inst", 0.5),
        2: ("inst", 0.3),
        3: ("chat", 0.6),
        4: ("chat", 0.6),
        5: ("pplx", 0.7),
        6: ("pplx", None),  # the humans found nothing to score: not compared
        7: ("pplx", 0.9),  # the estimator never saw it: not compared
    }
    estimated = {
        1: ("inst", 0.6),
        2: ("inst", 0.4),  # inst: human 0.40, estimated 0.50 -> +10 points
        3: ("chat", 0.62),
        4: ("chat", 0.62),  # chat: 0.60 vs 0.62 -> +2 points
        5: ("pplx", 0.64),  # pplx: 0.70 vs 0.64 -> -6 points
        6: ("pplx", 0.1),
    }
    result = evaluate_estimator(human, estimated, systems=["inst", "chat", "pplx"])
    rows = {row.system: row for row in result.systems}
    assert rows["inst"].human == pytest.approx(0.4)
    assert rows["inst"].estimated == pytest.approx(0.5)
    assert rows["inst"].error_points == pytest.approx(10.0)
    assert rows["inst"].mark == "+"
    assert rows["chat"].error_rate == pytest.approx(2.0)
    assert rows["chat"].mark == ""
    assert rows["pplx"].error_points == pytest.approx(-6.0)
    assert rows["pplx"].mark == "-"
    assert rows["pplx"].n_answers == 1
    # Human order pplx > chat > inst; estimated pplx 0.64 > chat 0.62 > inst 0.50: same ranking.
    assert [(r.human_rank, r.estimated_rank) for r in result.systems] == [(3, 3), (2, 2), (1, 1)]
    assert result.ranking_equal is True
    assert result.mean_error_rate == pytest.approx((10 + 2 + 6) / 3)


def test_ranking_disagreement_is_reported() -> None:
    human = {1: ("a", 0.8), 2: ("b", 0.6)}
    estimated = {1: ("a", 0.7), 2: ("b", 0.75)}
    result = evaluate_estimator(human, estimated)
    assert result.ranking_equal is False
    assert evaluate_estimator({1: ("a", 0.8)}, {1: ("a", 0.8)}).ranking_equal is None
    empty = evaluate_estimator({}, {})
    assert (empty.systems, empty.mean_error_rate) == ([], None)

"""A gold hand-out takes as long as a regular one, so timing a claim does not tell gold apart.

This holds for the one-statement hand-outs of the deployed database (Postgres). The embedded SQLite default keeps the
portable gold path, which is slower (docs/crowd.md says by how much), so this test lives with the Postgres-only
suites rather than in tests/annotate, which the SQLite pass also runs."""

import statistics
import time

import pytest

from annotations.campaign_services import assignment_claim
from tests.annotate.test_gold_oracles import gold_last_campaign, submit

pytestmark = pytest.mark.django_db


# --- the time a hand-out takes ------------------------------------------------------------------------------------


def test_timing_oracle_gold_and_regular_hand_outs_take_the_same_time(researcher, django_user_model):
    """Over 100 claims the median time of a gold hand-out is within 20% of a regular one's."""
    people = [django_user_model.objects.create_user(f"timed{i:02d}") for i in range(10)]
    campaign = gold_last_campaign(researcher, people, regular=40, gold=6, raters_per_item=2)
    timings: dict[bool, list[float]] = {True: [], False: []}
    for _round in range(10):
        for user in people:
            started = time.perf_counter()
            assignment = assignment_claim(campaign=campaign, user=user)
            elapsed = time.perf_counter() - started
            assert assignment is not None
            timings[assignment.is_gold].append(elapsed)
            submit(campaign, assignment, user)
    gold, regular = statistics.median(timings[True]), statistics.median(timings[False])
    assert len(timings[True]) >= 20 and len(timings[False]) >= 50
    assert abs(gold - regular) <= 0.2 * regular, f"gold {gold * 1000:.2f} ms, regular {regular * 1000:.2f} ms"

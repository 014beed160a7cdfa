"""A gold hand-out runs the very statements a regular one runs, so timing a claim cannot tell gold apart.

Counting time in CI is at the mercy of the machine's load (a neighbour's burst once failed a whole run), so this
test compares what decides the time instead: the SQL each claim sends, with its values taken out. A gold claim and a
regular claim must send the same statements, in the same order and number, the hand-out itself compared by the
stages of its one statement (statement_skeleton says why). A gold path that sent one statement more than the regular
path (a round trip a clock could see) fails here. The time itself is measured by bench/gold_timing.py, which
prints the ratio of the medians.

This holds for the one-statement hand-outs of the deployed database (Postgres). The embedded SQLite default keeps the
portable gold path (docs/crowd.md says how it differs), so this test lives with the Postgres-only suites rather than
in tests/annotate, which the SQLite pass also runs."""

import re
from collections import Counter

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotations.campaigns.claims import assignment_claim
from tests.annotate.test_gold_oracles import gold_last_campaign, submit

pytestmark = pytest.mark.django_db

_VALUES = [
    (re.compile(r'"s\d+_x\d+"'), "<savepoint>"),
    (re.compile(r"%(?:\(\w+\))?s"), "?"),
    (re.compile(r"'(?:[^']|'')*'"), "?"),  # quoted text, timestamps, hashes
    (re.compile(r"\b\d+(?:\.\d+)?\b"), "?"),  # numbers, ids, positions
    (re.compile(r"\((?:\?\s*,\s*)+\?\)"), "(?...)"),  # IN lists of any length
    (re.compile(r"\s+"), " "),
]


def sql_shape(sql: str) -> str:
    """The statement with every value replaced by ?, so two claims that differ only in ids compare equal."""
    for pattern, replacement in _VALUES:
        sql = pattern.sub(replacement, sql)
    return sql.strip()


def statement_skeleton(shape: str) -> str:
    """The statement's top level, every parenthesised part collapsed to (…): for the hand-out, the stages of its
    one WITH statement (pool, resumed, picked, claimed, held) and the final SELECT of what the page needs. A gold
    hand-out inserts a slot of its own where a regular one updates a free slot, so the stages' bodies differ; what
    they send to the database, and get back, is one statement of the same stages either way."""
    top, depth = [], 0
    for char in shape:
        if char == "(":
            if depth == 0:
                top.append("(…)")
            depth += 1
        elif char == ")":
            depth -= 1
        elif depth == 0:
            top.append(char)
    return "".join(top)


def claim_shapes(campaign, user):  # type: ignore[no-untyped-def]
    """The claim's statements as sent, before their parameters are bound (the one-statement hand-outs go through a
    raw cursor, whose bound text the query log does not keep), and the count the query log keeps as a cross-check."""
    sent: list[str] = []

    def record(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        sent.append(sql_shape(str(sql)))
        return execute(sql, params, many, context)

    with CaptureQueriesContext(connection) as captured, connection.execute_wrapper(record):
        assignment = assignment_claim(campaign=campaign, user=user)
    assert assignment is not None
    assert len(captured.captured_queries) == len(sent), sent
    return assignment, tuple(statement_skeleton(shape) for shape in sent)


def test_gold_and_regular_hand_outs_send_the_same_statements(researcher, django_user_model):  # type: ignore[no-untyped-def]
    people = [django_user_model.objects.create_user(f"timed{i:02d}") for i in range(10)]
    campaign = gold_last_campaign(researcher, people, regular=40, gold=6, raters_per_item=2, name="shapes")
    seen: dict[bool, Counter[tuple[str, ...]]] = {True: Counter(), False: Counter()}
    for _round in range(6):
        for user in people:
            assignment, shapes = claim_shapes(campaign, user)
            seen[assignment.is_gold][shapes] += 1
            submit(campaign, assignment, user)
    assert sum(seen[True].values()) >= 10 and sum(seen[False].values()) >= 30
    assert set(seen[True]) == set(seen[False]), "\n\n".join(
        f"{'gold' if gold else 'regular'} x{count}:\n" + "\n".join(shapes)
        for gold in (True, False)
        for shapes, count in seen[gold].items()
    )

"""The check that a run's judge score is an aggregate of its judgments reads only that unit's judgments.

The lookup of a scored method's judgments names exactly the leading columns of the partial unique index
`one_judgment_per_unit` (run, answer, aspect) and its predicate `other_response_id IS NULL` (true of every judgment
of a scored method: only a pairwise unit has a second answer), and takes the judgment's status inside the aggregate
instead of in the WHERE clause. Before, the lookup filtered on (run, status): a run's judgments are created pending
at its launch, and statistics gathered then say almost none is done, so the planner read the run's judgments through
the (run, status) index for every score written, and writing a run's scores took time quadratic in its size. Now
every plan reads one short range per score. The rule checked is unchanged."""

import importlib

from django.db import migrations

previous = importlib.import_module("judging.migrations.0021_h22d_run_score_from_judgments")

MESSAGE = previous.MESSAGE
NAME = previous.NAME

# The judgments of one unit of a scored method (not pairwise), and the score of those that finished.
UNIT_JUDGMENTS = """judging_judgment j
            WHERE j.run_id = r.id AND j.other_response_id IS NULL AND j.response_id = NEW.response_id
                AND j.aspect_name = NEW.aspect_name"""
FINISHED_SCORE = "(CASE WHEN j.status = 'done' THEN j.score END)"

# A unit without a finished score gives MIN and MAX of nothing (NULL), and so no row.
NOT_AN_AGGREGATE = f"""EXISTS (
    SELECT 1 FROM judging_judgerun r
    WHERE r.judge_id = NEW.judge_id AND (
        (r.method = 'pairwise' AND NOT (NEW.value >= 0 AND NEW.value <= 1))
        OR (r.method <> 'pairwise' AND EXISTS (
            SELECT 1 FROM {UNIT_JUDGMENTS}
            GROUP BY j.run_id
            HAVING NEW.value < MIN({FINISHED_SCORE}) - 1e-9 * (1 + ABS(MIN({FINISHED_SCORE})))
                OR NEW.value > MAX({FINISHED_SCORE}) + 1e-9 * (1 + ABS(MAX({FINISHED_SCORE})))
        ))
    ))"""


def _install(schema_editor, not_an_aggregate: str) -> None:  # type: ignore[no-untyped-def]
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        # The trigger calls the function by name, so replacing the function is enough.
        schema_editor.execute(f"""
CREATE OR REPLACE FUNCTION {NAME}() RETURNS trigger AS $$
BEGIN
    IF {not_an_aggregate} THEN
        RAISE EXCEPTION '{MESSAGE}';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
""")
    elif vendor == "sqlite":
        for suffix, event in (("insert", "INSERT"), ("update", "UPDATE")):
            schema_editor.execute(f"DROP TRIGGER IF EXISTS {NAME}_{suffix};")
            schema_editor.execute(f"""CREATE TRIGGER {NAME}_{suffix} BEFORE {event} ON judging_judgescore
FOR EACH ROW WHEN {not_an_aggregate}
BEGIN
    SELECT RAISE(ABORT, '{MESSAGE}');
END;""")


def forward(apps, schema_editor):  # type: ignore[no-untyped-def]
    _install(schema_editor, NOT_AN_AGGREGATE)


def backward(apps, schema_editor):  # type: ignore[no-untyped-def]
    _install(schema_editor, previous.NOT_AN_AGGREGATE)


class Migration(migrations.Migration):
    dependencies = [("judging", "0021_h22d_run_score_from_judgments")]

    operations = [migrations.RunPython(forward, backward)]

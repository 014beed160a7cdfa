"""A run's judge score is an aggregate of the run's judgments, and the database refuses one that could not be: for a
scored method, the mean over samples lies within the range of the finished judgments' scores of that answer and aspect
(and equals the score when there is one sample); for pairwise, a win rate lies in [0, 1]. Scores of imported and
derived judges, which have no run, are not checked here."""

from django.db import migrations

MESSAGE = "a judge score of a run must be an aggregate of the finished judgments of that run, answer and aspect"

# The mean of floats can land a rounding step outside their range (0.1 * 3 / 3 > 0.1), hence the tolerance. An
# aggregate grouped by run gives a row only when the run has such judgments and the value falls outside their range.
NOT_AN_AGGREGATE = """EXISTS (
    SELECT 1 FROM judging_judgerun r
    WHERE r.judge_id = NEW.judge_id AND (
        (r.method = 'pairwise' AND NOT (NEW.value >= 0 AND NEW.value <= 1))
        OR (r.method <> 'pairwise' AND EXISTS (
            SELECT 1 FROM judging_judgment j
            WHERE j.run_id = r.id AND j.response_id = NEW.response_id AND j.aspect_name = NEW.aspect_name
                AND j.status = 'done' AND j.score IS NOT NULL
            GROUP BY j.run_id
            HAVING NEW.value < MIN(j.score) - 1e-9 * (1 + ABS(MIN(j.score)))
                OR NEW.value > MAX(j.score) + 1e-9 * (1 + ABS(MAX(j.score)))
        ))
    ))"""

NAME = "judging_score_from_judgments"


def create(apps, schema_editor):  # type: ignore[no-untyped-def]
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(f"""
CREATE OR REPLACE FUNCTION {NAME}() RETURNS trigger AS $$
BEGIN
    IF {NOT_AN_AGGREGATE} THEN
        RAISE EXCEPTION '{MESSAGE}';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER {NAME} BEFORE INSERT OR UPDATE ON judging_judgescore FOR EACH ROW EXECUTE FUNCTION {NAME}();
""")
    elif vendor == "sqlite":
        # SQLite's triggers take one event each.
        for suffix, event in (("insert", "INSERT"), ("update", "UPDATE")):
            schema_editor.execute(f"""CREATE TRIGGER {NAME}_{suffix} BEFORE {event} ON judging_judgescore
FOR EACH ROW WHEN {NOT_AN_AGGREGATE}
BEGIN
    SELECT RAISE(ABORT, '{MESSAGE}');
END;""")


def drop(apps, schema_editor):  # type: ignore[no-untyped-def]
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {NAME} ON judging_judgescore; DROP FUNCTION IF EXISTS {NAME}();")
    elif vendor == "sqlite":
        for suffix in ("insert", "update"):
            schema_editor.execute(f"DROP TRIGGER IF EXISTS {NAME}_{suffix};")


class Migration(migrations.Migration):
    dependencies = [("judging", "0020_h27c_hybrid_calibration")]

    operations = [migrations.RunPython(create, drop)]

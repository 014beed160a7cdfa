"""A judge version never scores an answer it shows as a rated example: the database refuses such a judge score, a
run's version that would own one, and an exemplar of an answer the version has already scored."""

from django.db import migrations

MESSAGE = "an answer shown to a judge version as a rated example cannot be scored by that version"

SCORE_HAS_EXEMPLAR = """EXISTS (
    SELECT 1 FROM judging_judgerun r JOIN judging_judgeexemplar e ON e.version_id = r.version_id
    WHERE r.judge_id = NEW.judge_id AND e.response_id = NEW.response_id)"""
RUN_VERSION_HAS_EXEMPLAR = """EXISTS (
    SELECT 1 FROM judging_judgescore s JOIN judging_judgeexemplar e ON e.response_id = s.response_id
    WHERE s.judge_id = NEW.judge_id AND e.version_id = NEW.version_id)"""
EXEMPLAR_ALREADY_SCORED = """EXISTS (
    SELECT 1 FROM judging_judgescore s JOIN judging_judgerun r ON r.judge_id = s.judge_id
    WHERE r.version_id = NEW.version_id AND s.response_id = NEW.response_id)"""

CHECKS = (
    ("judging_exemplar_score", "judging_judgescore", "INSERT OR UPDATE", SCORE_HAS_EXEMPLAR),
    ("judging_exemplar_run_version", "judging_judgerun", "UPDATE OF version_id", RUN_VERSION_HAS_EXEMPLAR),
    ("judging_exemplar_new", "judging_judgeexemplar", "INSERT OR UPDATE", EXEMPLAR_ALREADY_SCORED),
)


def _postgres_create(name: str, table: str, events: str, condition: str) -> str:
    return f"""
CREATE OR REPLACE FUNCTION {name}() RETURNS trigger AS $$
BEGIN
    IF {condition} THEN
        RAISE EXCEPTION '{MESSAGE}';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER {name} BEFORE {events} ON {table} FOR EACH ROW EXECUTE FUNCTION {name}();
"""


def _sqlite_create(name: str, table: str, events: str, condition: str) -> list[str]:
    # SQLite's triggers take one event each.
    if events == "INSERT OR UPDATE":
        kinds = [("insert", "INSERT"), ("update", "UPDATE")]
    else:
        kinds = [("update", events)]
    return [
        f"""CREATE TRIGGER {name}_{suffix} BEFORE {event} ON {table} FOR EACH ROW WHEN {condition}
BEGIN
    SELECT RAISE(ABORT, '{MESSAGE}');
END;"""
        for suffix, event in kinds
    ]


def create(apps, schema_editor):  # type: ignore[no-untyped-def]
    vendor = schema_editor.connection.vendor
    for name, table, events, condition in CHECKS:
        if vendor == "postgresql":
            schema_editor.execute(_postgres_create(name, table, events, condition))
        elif vendor == "sqlite":
            for statement in _sqlite_create(name, table, events, condition):
                schema_editor.execute(statement)


def drop(apps, schema_editor):  # type: ignore[no-untyped-def]
    vendor = schema_editor.connection.vendor
    for name, table, _events, _condition in CHECKS:
        if vendor == "postgresql":
            schema_editor.execute(f"DROP TRIGGER IF EXISTS {name} ON {table}; DROP FUNCTION IF EXISTS {name}();")
        elif vendor == "sqlite":
            for suffix in ("insert", "update"):
                schema_editor.execute(f"DROP TRIGGER IF EXISTS {name}_{suffix};")


class Migration(migrations.Migration):
    dependencies = [("judging", "0017_h27d_judge_teaching")]

    operations = [migrations.RunPython(create, drop)]

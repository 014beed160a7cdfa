"""Judge-filled tasks in the database: a judge's rating is stored only on a task whose every slot is closed for the
judge, and a slot closed for the judge is never reopened (a person's rating could otherwise join the judge's)."""

from django.db import migrations

POSTGRES_CREATE = """
CREATE OR REPLACE FUNCTION annotations_judge_filled_task_closed() RETURNS trigger AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM annotations_assignment WHERE task_id = NEW.task_id)
       OR EXISTS (SELECT 1 FROM annotations_assignment WHERE task_id = NEW.task_id AND status <> 'judged') THEN
        RAISE EXCEPTION 'a judge-filled rating needs every slot of its task closed for the judge';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER annotations_judge_filled_task_closed BEFORE INSERT OR UPDATE ON annotations_judgefilledrating
    FOR EACH ROW EXECUTE FUNCTION annotations_judge_filled_task_closed();
CREATE OR REPLACE FUNCTION annotations_judged_slot_stays() RETURNS trigger AS $$
BEGIN
    IF OLD.status = 'judged' AND NEW.status <> 'judged' THEN
        RAISE EXCEPTION 'a slot closed for the judge cannot be reopened';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER annotations_judged_slot_stays BEFORE UPDATE ON annotations_assignment
    FOR EACH ROW WHEN (OLD.status = 'judged') EXECUTE FUNCTION annotations_judged_slot_stays();
"""
POSTGRES_DROP = """
DROP TRIGGER IF EXISTS annotations_judge_filled_task_closed ON annotations_judgefilledrating;
DROP FUNCTION IF EXISTS annotations_judge_filled_task_closed();
DROP TRIGGER IF EXISTS annotations_judged_slot_stays ON annotations_assignment;
DROP FUNCTION IF EXISTS annotations_judged_slot_stays();
"""
SQLITE_CREATE = [
    """
CREATE TRIGGER annotations_judge_filled_task_closed BEFORE INSERT ON annotations_judgefilledrating
WHEN NOT EXISTS (SELECT 1 FROM annotations_assignment WHERE task_id = NEW.task_id)
  OR EXISTS (SELECT 1 FROM annotations_assignment WHERE task_id = NEW.task_id AND status <> 'judged')
BEGIN
    SELECT RAISE(ABORT, 'a judge-filled rating needs every slot of its task closed for the judge');
END;
""",
    """
CREATE TRIGGER annotations_judged_slot_stays BEFORE UPDATE ON annotations_assignment
WHEN OLD.status = 'judged' AND NEW.status <> 'judged'
BEGIN
    SELECT RAISE(ABORT, 'a slot closed for the judge cannot be reopened');
END;
""",
]
SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS annotations_judge_filled_task_closed;",
    "DROP TRIGGER IF EXISTS annotations_judged_slot_stays;",
]


def create(apps, schema_editor):  # type: ignore[no-untyped-def]
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(POSTGRES_CREATE)
    elif vendor == "sqlite":
        for statement in SQLITE_CREATE:
            schema_editor.execute(statement)


def drop(apps, schema_editor):  # type: ignore[no-untyped-def]
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(POSTGRES_DROP)
    elif vendor == "sqlite":
        for statement in SQLITE_DROP:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("annotations", "0017_h27c_judge_filled_slots")]

    operations = [migrations.RunPython(create, drop)]

"""Reference ratings are a snapshot: the database refuses to change one (deleting a whole set stays possible)."""

from django.db import migrations

POSTGRES_CREATE = """
CREATE OR REPLACE FUNCTION judging_reference_rating_frozen() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'reference ratings are frozen with their set and cannot be changed';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER judging_reference_rating_frozen BEFORE UPDATE ON judging_referencerating
    FOR EACH ROW EXECUTE FUNCTION judging_reference_rating_frozen();
"""
POSTGRES_DROP = """
DROP TRIGGER IF EXISTS judging_reference_rating_frozen ON judging_referencerating;
DROP FUNCTION IF EXISTS judging_reference_rating_frozen();
"""
SQLITE_CREATE = """
CREATE TRIGGER judging_reference_rating_frozen BEFORE UPDATE ON judging_referencerating
BEGIN
    SELECT RAISE(ABORT, 'reference ratings are frozen with their set and cannot be changed');
END;
"""
SQLITE_DROP = "DROP TRIGGER IF EXISTS judging_reference_rating_frozen;"


def create(apps, schema_editor):  # type: ignore[no-untyped-def]
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(POSTGRES_CREATE)
    elif vendor == "sqlite":
        schema_editor.execute(SQLITE_CREATE)


def drop(apps, schema_editor):  # type: ignore[no-untyped-def]
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(POSTGRES_DROP)
    elif vendor == "sqlite":
        schema_editor.execute(SQLITE_DROP)


class Migration(migrations.Migration):
    dependencies = [("judging", "0015_h27b_judge_versions_certificates")]

    operations = [migrations.RunPython(create, drop)]

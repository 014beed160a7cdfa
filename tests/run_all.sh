#!/usr/bin/env bash
# The README's test command: the whole suite on Postgres + Redis, then again the suites whose writes have a
# separate ORM path for other databases (annotate, import/export, judge engine, FActScore engine) on SQLite + the
# embedded SQLAlchemy broker, the README's run defaults. Arguments go to the Postgres pass.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
export LITELLM_LOCAL_MODEL_COST_MAP=True

DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/evalsite} \
  CELERY_BROKER_URL=${CELERY_BROKER_URL:-redis://127.0.0.1:6379/0} \
  "$PYTHON" -m pytest "$@"

broker_dir=$(mktemp -d)
trap 'rm -rf "$broker_dir"' EXIT
started=$SECONDS
env -u DATABASE_URL CELERY_BROKER_URL="sqla+sqlite:///$broker_dir/celery-broker.sqlite3" \
  "$PYTHON" -m pytest tests/annotate tests/io tests/judging tests/factscore
echo "SQLite pass: $((SECONDS - started)) s"

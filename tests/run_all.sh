#!/usr/bin/env bash
# The README's test command: the whole suite on Postgres + Redis, and the suites whose writes have a separate ORM
# path for other databases (annotate and the campaign services in annotations, import/export, judge engine, FActScore
# engine) again on SQLite + the embedded SQLAlchemy broker, the README's run defaults.
#
# Four runs go side by side: the Postgres suite in two halves, and the SQLite pass in two halves. Most tests wait on real workers,
# servers, browsers and timeouts rather than compute, so two cores finish the four together in well under the time
# of one after another. The runs share nothing: each has its own test database, Redis databases, var directory and
# log, printed in turn at the end. Arguments run the Postgres suite alone, with them (e.g. one test file).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
export LITELLM_LOCAL_MODEL_COST_MAP=True
postgres=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/evalsite}
broker=${CELERY_BROKER_URL:-redis://127.0.0.1:6379/0}
redis_server=${broker%/*}

if [ "$#" -gt 0 ]; then
  exec env DATABASE_URL="$postgres" CELERY_BROKER_URL="$broker" "$PYTHON" -m pytest "$@"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
FIRST_HALF=(tests/annotate tests/annotations tests/browser tests/dashboard tests/faults tests/i18n tests/io)

run() {
  local name=$1
  shift
  local started=$SECONDS status=0
  mkdir -p "$work/var-$name"
  env EVALSITE_VAR_DIR="$work/var-$name" "$@" >"$work/$name.log" 2>&1 || status=$?
  echo "$name: $((SECONDS - started)) s, exit status $status" >>"$work/$name.log"
  return "$status"
}

run postgres-1 env DATABASE_URL="$postgres" CELERY_BROKER_URL="$broker" \
  "$PYTHON" -m pytest "${FIRST_HALF[@]}" &
first=$!
run postgres-2 env DATABASE_URL="${postgres}_b" CELERY_BROKER_URL="$redis_server/2" \
  JUDGE_TEST_REDIS_URL="$redis_server/3" "$PYTHON" -m pytest tests "${FIRST_HALF[@]/#/--ignore=}" &
second=$!
run sqlite-1 env -u DATABASE_URL CELERY_BROKER_URL="sqla+sqlite:///$work/celery-broker-1.sqlite3" \
  TEST_REDIS_BROKER_URL="$redis_server/1" JUDGE_TEST_REDIS_URL="$redis_server/4" \
  "$PYTHON" -m pytest tests/annotate tests/annotations tests/io &
third=$!
run sqlite-2 env -u DATABASE_URL CELERY_BROKER_URL="sqla+sqlite:///$work/celery-broker-2.sqlite3" \
  TEST_REDIS_BROKER_URL="$redis_server/5" JUDGE_TEST_REDIS_URL="$redis_server/6" \
  "$PYTHON" -m pytest tests/judging tests/factscore &
fourth=$!

failed=0
wait "$first" || failed=1
wait "$second" || failed=1
wait "$third" || failed=1
wait "$fourth" || failed=1
for name in postgres-1 postgres-2 sqlite-1 sqlite-2; do
  echo "=============================== $name ==============================="
  cat "$work/$name.log"
done
exit "$failed"

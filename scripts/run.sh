#!/usr/bin/env bash
# The README's run command: installs the dependencies, builds, starts a
# local throwaway PostgreSQL (unless DATABASE_URL is set), applies the
# migrations, enqueues a few demo jobs (NO_DEMO_JOBS=1 skips them) and runs
# a worker with examples/worker.toml. Ctrl-C stops the worker gracefully;
# the database keeps running so the jobs can be looked at, and the script
# says how to stop it. Before the worker's log begins it prints the two
# lines to paste into another terminal to use the CLI at once.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
scripts/install-deps.sh
BUILD_DIR=${BUILD_DIR:-build-release}
BUILD_DIR=$BUILD_DIR BUILD_TYPE=Release scripts/build.sh -DAW_BUILD_TESTS=OFF
BIN=$(realpath -m "$BUILD_DIR/actor-worker")

if [ -z "${DATABASE_URL:-}" ]; then
  PGDIR=$(realpath -m "${PGDIR:-/tmp/actor-worker-pg}")
  PGPORT=${PGPORT:-54320}
  # From /: the server runs as user postgres, which cannot enter a
  # checkout in root's home ("could not change directory to ...").
  (cd / && PG_FRESH=1 "$ROOT/scripts/pg.sh" start "$PGDIR" "$PGPORT")
  export DATABASE_URL=$(scripts/pg.sh url "$PGPORT")
  echo "run.sh: throwaway PostgreSQL at $DATABASE_URL (data in $PGDIR)" >&2
  # After the worker: the jobs stay there to look at.
  trap 'echo "run.sh: the database keeps running at $DATABASE_URL:" \
             "try  DATABASE_URL=$DATABASE_URL $BIN dlq list  or" \
             "psql $DATABASE_URL -c \"SELECT id, kind, state FROM jobs\";" \
             "stop it with  (cd / && $ROOT/scripts/pg.sh stop $PGDIR)" >&2' EXIT
fi

"$BIN" migrate
case "${NO_DEMO_JOBS:-0}" in
  0 | false | no | "") demo=1 ;;
  *) demo=0 ;;
esac
if [ "$demo" = 1 ]; then
  echo "run.sh: enqueueing demo jobs" >&2
  for i in 1 2 3; do "$BIN" enqueue noop >/dev/null; done
  "$BIN" enqueue sleep '{"ms": 1500}' >/dev/null
  "$BIN" enqueue fail '{"times": 1, "message": "flaky once"}' >/dev/null
  "$BIN" enqueue fail '{"terminal": true, "message": "bad input"}' --priority -1 >/dev/null
  "$BIN" enqueue noop --delay 5 >/dev/null
fi
# The CLI from another terminal, at once (not only after the worker).
{
  echo "run.sh: to use the CLI from another terminal while the worker runs, paste:"
  printf 'export DATABASE_URL=%q\n' "$DATABASE_URL"
  printf 'export PATH=%q:"$PATH"   # the actor-worker binary: %q\n' "$(dirname "$BIN")" "$BIN"
  echo "run.sh: then try  actor-worker queues,  actor-worker jobs list,  actor-worker dlq list"
} >&2
echo "run.sh: starting the worker (Ctrl-C stops it gracefully)" >&2
"$BIN" run --config examples/worker.toml

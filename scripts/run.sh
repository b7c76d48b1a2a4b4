#!/usr/bin/env bash
# The README's run command: installs the dependencies, builds, starts a
# local throwaway PostgreSQL (unless DATABASE_URL is set), applies the
# migrations, enqueues a few demo jobs and runs a worker with
# examples/worker.toml. Ctrl-C stops it gracefully (and the database).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
BUILD_DIR=${BUILD_DIR:-build-release}
BUILD_DIR=$BUILD_DIR BUILD_TYPE=Release scripts/build.sh -DAW_BUILD_TESTS=OFF
BIN=$BUILD_DIR/actor-worker

if [ -z "${DATABASE_URL:-}" ]; then
  PGDIR=${PGDIR:-/tmp/actor-worker-pg}
  PGPORT=${PGPORT:-54320}
  PG_FRESH=1 scripts/pg.sh start "$PGDIR" "$PGPORT"
  trap 'scripts/pg.sh stop "$PGDIR"' EXIT
  export DATABASE_URL=$(scripts/pg.sh url "$PGPORT")
  echo "run.sh: throwaway PostgreSQL on 127.0.0.1:$PGPORT (data in $PGDIR)" >&2
fi

"$BIN" migrate
if [ -z "${NO_DEMO_JOBS:-}" ]; then
  echo "run.sh: enqueueing demo jobs" >&2
  for i in 1 2 3; do "$BIN" enqueue noop >/dev/null; done
  "$BIN" enqueue sleep '{"ms": 1500}' >/dev/null
  "$BIN" enqueue fail '{"times": 1, "message": "flaky once"}' >/dev/null
  "$BIN" enqueue fail '{"terminal": true, "message": "bad input"}' --priority -1 >/dev/null
  "$BIN" enqueue noop --delay 5 >/dev/null
fi
echo "run.sh: starting the worker (Ctrl-C stops it gracefully)" >&2
"$BIN" run --config examples/worker.toml

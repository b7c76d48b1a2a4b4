#!/usr/bin/env bash
# bench/latency.sh - pickup latency and bulk enqueue on a throwaway
# PostgreSQL with default settings:
#
#   1. latency: an embedded worker (bench/tools/latency.cpp: shipped
#      defaults, concurrency CONCURRENCY, so capacity stays idle) while
#      producers commit RATE single-job transactions per second for
#      SECONDS seconds: commit -> handler start p50 / p95 / p99 / max.
#   2. enqueue: aw::enqueue_many from one client, ENQUEUE_N jobs in
#      transactions of ENQUEUE_BATCH (bench/tools/enqueue.cpp): jobs/s.
#
#   bench/latency.sh
#   RATE=1000 SECONDS_=30 bench/latency.sh
#
# Knobs: RATE (500), SECONDS_ (20), WARMUP (2), CONCURRENCY (10), PRODUCERS
# (2), ENQUEUE_N (1000000), ENQUEUE_BATCH (1000), REPS (3: the enqueue runs
# this often, best reported), PORT (5495), PGDIR, BUILD_DIR.
# Output: the tools' RESULT lines:
#   RESULT latency jobs=.. p50_ms=.. p95_ms=.. p99_ms=.. max_ms=..
#   RESULT enqueue_many jobs=.. batch=.. seconds=.. jobs_per_sec=..
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
SCRIPT=latency.sh
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"
RATE=${RATE:-500}
SECONDS_=${SECONDS_:-20}
WARMUP=${WARMUP:-2}
CONCURRENCY=${CONCURRENCY:-10}
PRODUCERS=${PRODUCERS:-2}
ENQUEUE_N=${ENQUEUE_N:-1000000}
ENQUEUE_BATCH=${ENQUEUE_BATCH:-1000}
REPS=${REPS:-3}
PORT=${PORT:-5495}

"$ROOT/scripts/install-deps.sh"
bench_build aw-bench-latency aw-bench-enqueue
bench_start_pg
echo "# latency.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores; $(sql postgres -c 'select version()' | cut -d, -f1)"

sql postgres -c "create database latency"
"$BIN" migrate --database-url "postgresql://postgres@127.0.0.1:$PORT/latency" --log-level warn
"$TOOLS/aw-bench-latency" --url "postgresql://postgres@127.0.0.1:$PORT/latency" \
  --rate "$RATE" --seconds "$SECONDS_" --warmup "$WARMUP" \
  --concurrency "$CONCURRENCY" --producers "$PRODUCERS"

for ((rep = 1; rep <= REPS; rep++)); do
  sql postgres -c "drop database if exists enqueue" -c "create database enqueue"
  "$BIN" migrate --database-url "postgresql://postgres@127.0.0.1:$PORT/enqueue" --log-level warn
  sql enqueue -c "checkpoint"
  "$TOOLS/aw-bench-enqueue" --url "postgresql://postgres@127.0.0.1:$PORT/enqueue" \
    --jobs "$ENQUEUE_N" --batch "$ENQUEUE_BATCH" | sed "s/^RESULT enqueue_many /RESULT enqueue_many\/run$rep /"
  [ "$(sql enqueue -c "select count(*) from job_rows")" = "$ENQUEUE_N" ] \
    || die "expected $ENQUEUE_N jobs in the table"
done

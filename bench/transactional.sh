#!/usr/bin/env bash
# bench/transactional.sh - what a transactional handler costs: the drain of
# no-op jobs through the batched path (`noop`: completions recorded in
# batches, off the lanes, nothing written to the jobs' rows) beside the
# same drain through transactional handlers (`noop_tx`: each job completes
# in a transaction of its own on the transactional pool, its row written,
# one commit per job), at the concurrencies users run, on one throwaway
# PostgreSQL (initdb defaults, synchronous_commit = on), in one run.
#
#   bench/transactional.sh                    # about 2 minutes
#
# Knobs: N (200000 batched jobs), N_TX (30000 transactional jobs: their
# drain is slower, and the same few seconds of it measure as well),
# CONCURRENCY (10,64), TX_POOL (the transactional pool per process:
# database.transactional_pool_size; default the shipped 8, and the
# concurrency itself), PORT (5496), BIN (an actor-worker binary; default:
# Release build in build-bench), OUT (a file to copy the log to).
#
# Output: bench/run.sh's lines for each drain, then one table: jobs/s of
# each path, the ratio, WAL bytes and commits per job.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
N=${N:-200000}
N_TX=${N_TX:-30000}
CONCURRENCY=${CONCURRENCY:-10,64}
PORT=${PORT:-5496}
PGDIR=${PGDIR:-/tmp/aw-tx-bench-pg-$$}
LOG=$(mktemp /tmp/aw-tx-bench.XXXXXX.log)

"$ROOT/scripts/install-deps.sh"
if (exec 3<>/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null; then
  echo "transactional.sh: port $PORT on 127.0.0.1 is already in use (set PORT=...)" >&2
  exit 1
fi
cleanup() {
  "$ROOT/scripts/pg.sh" stop "$PGDIR" || true
  rm -rf "$PGDIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
PG_FRESH=1 "$ROOT/scripts/pg.sh" start "$PGDIR" "$PORT" >/dev/null
export BENCH_EXTERNAL_PG=1 PORT PROCS=1 REPS=1

{
  echo "# transactional.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores"
  for c in ${CONCURRENCY//,/ }; do
    echo "# path: batched (noop), concurrency $c, N=$N"
    N=$N KIND=noop CONCURRENCY=$c "$HERE/run.sh" | sed "s|^RESULT actor-worker/|RESULT batched/|"
    pools=${TX_POOL:-8,$c}
    for pool in $(tr ',' '\n' <<<"$pools" | sort -nu); do
      echo "# path: transactional (noop_tx), concurrency $c, transactional_pool_size $pool, N=$N_TX"
      N=$N_TX KIND=noop_tx CONCURRENCY=$c DB_TOML="transactional_pool_size = $pool" "$HERE/run.sh" \
        | sed "s|^RESULT actor-worker/|RESULT transactional-pool$pool/|"
    done
  done
} 2>&1 | tee "$LOG"

echo
echo "| path | concurrency | jobs/s | ÷ batched | WAL B/job | commits/job |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
awk '
  /^# path: / { path = ($3 == "batched" ? "batched" : "transactional, pool " $8); sub(/,$/, "", path) }
  /^#   during drain: WAL/ {
    match($0, /\(([0-9]+) B\/job\)/); wal = substr($0, RSTART + 1, RLENGTH - 8)
    match($0, /\(([0-9.]+)\/job\)/); com = substr($0, RSTART + 1, RLENGTH - 6) }
  /^RESULT [a-z0-9-]+\/c[0-9]+\/p1\/run1 / {
    split($2, parts, "/"); c = substr(parts[2], 2)
    jps = $3; sub(/jobs_per_sec=/, "", jps)
    if (path == "batched") base[c] = jps
    ratio = (path == "batched" || base[c] == 0) ? "1" : sprintf("%.3f", jps / base[c])
    printf "| %s | %s | %s | %s | %s | %s |\n", path, c, jps, ratio, wal, com
  }' "$LOG"
if [ -n "${OUT:-}" ]; then cp "$LOG" "$OUT"; fi
rm -f "$LOG"

#!/usr/bin/env bash
# bench/queue_controls.sh - what the queue controls cost the claim path.
#
# One throwaway PostgreSQL; bench/run.sh drains N `noop` jobs (one worker
# process) with two binaries taken in turns, ROUNDS times: BASE (a build
# without queue controls, e.g. main's build-bench/actor-worker) and BIN
# (this branch), on an unpaused queue without limits. Then BIN alone on a
# queue with each of LIMITS (a [queues.default] line each): limits that do
# not bind measure the locking path's cost, limits that bind show the limit
# holding. Prints every run's RESULT line and a summary of BIN ÷ BASE.
#
# Knobs: BASE, BIN (required), N (100000), CONCURRENCY (10,64), ROUNDS (3),
# PORT (5611), LIMITS (';'-separated lines), OUT (also write the output
# there).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
: "${BASE:?set BASE to the binary to compare against}"
: "${BIN:?set BIN to the binary of this branch}"
N=${N:-100000}
CONCURRENCY=${CONCURRENCY:-10,64}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-5611}
DEFAULT_LIMITS='global_concurrency = 1000000;global_concurrency = 64;rate_limit = "1000000/s";rate_limit = "20000/s"'
LIMITS=${LIMITS:-$DEFAULT_LIMITS}
PGDIR=/tmp/aw-bench-qc-$$

if [ -n "${OUT:-}" ]; then
  exec > >(tee "$OUT") 2>&1
fi
trap '"$ROOT/scripts/pg.sh" stop "$PGDIR" >/dev/null 2>&1 || true; rm -rf "$PGDIR"' EXIT
PG_FRESH=1 "$ROOT/scripts/pg.sh" start "$PGDIR" "$PORT" >/dev/null
export BENCH_EXTERNAL_PG=1 PORT N CONCURRENCY PROCS=1 REPS=1

echo "# queue controls: N=$N CONCURRENCY=$CONCURRENCY ROUNDS=$ROUNDS; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# BASE=$BASE"
echo "# BIN=$BIN"
results=$(mktemp)
for ((r = 1; r <= ROUNDS; r++)); do
  for who in BASE BIN; do
    bin=${!who}
    echo "# round $r: $who"
    BIN=$bin "$HERE/run.sh" 2>&1 | grep -E '^(RESULT actor-worker/|#   during drain)' \
      | sed "s|^|$who |" | tee -a "$results"
  done
done
IFS=';' read -ra limits <<<"$LIMITS"
for limit in "${limits[@]}"; do
  echo "# BIN with [queues.default] $limit"
  QUEUE_TOML=$limit BIN=$BIN "$HERE/run.sh" 2>&1 \
    | grep -E '^(RESULT actor-worker/|#   during drain)' | sed "s|^|LIMIT[$limit] |"
done
echo "# summary: median jobs/s per concurrency (unlimited queue)"
median_of() { # who concurrency
  grep "^$1 RESULT actor-worker/c$2/" "$results" \
    | sed -e 's/.*jobs_per_sec=//' -e 's/ .*//' | sort -n \
    | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}
for c in ${CONCURRENCY//,/ }; do
  base=$(median_of BASE "$c")
  mine=$(median_of BIN "$c")
  ratio=$(awk -v a="$mine" -v b="$base" 'BEGIN { printf "%.3f", a / b }')
  echo "concurrency $c: BASE $base, BIN $mine, BIN/BASE $ratio"
done
rm -f "$results"

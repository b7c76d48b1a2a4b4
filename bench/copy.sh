#!/usr/bin/env bash
# bench/copy.sh - COPY into jobs_in from one client, against the ceiling
# of this machine: the same COPY into a plain table with the same columns,
# defaults and the two indexes the queue needs (ids, and the lane index),
# and nothing else (no partitions, trigger or CHECK), on one throwaway
# PostgreSQL with default settings.
#
#   bench/copy.sh
#   N=200000 REPS=3 bench/copy.sh
#
# psql's \copy of N rows (kind, queue, args) from a file, one statement,
# in turns: jobs_in, then the plain table, REPS times each, every run into
# an emptied table (TRUNCATE, then CHECKPOINT). Prints each run and the
# medians, and their ratio (the target: jobs_in >= 0.85 of the plain
# table).
#
# Knobs: N (1000000), REPS (5), PORT (5494), BIN, BUILD_DIR.
# Output: RESULT copy/<table>/run<k> jobs_per_sec=..; RESULT copy/<table>
# jobs_per_sec=<median>; RESULT copy/ratio jobs_in_over_plain=..
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
SCRIPT=copy.sh
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"
N=${N:-1000000}
REPS=${REPS:-5}
PORT=${PORT:-5494}

"$ROOT/scripts/install-deps.sh"
bench_build
bench_start_pg
echo "# copy.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, N=$N REPS=$REPS;" \
     "$(sql postgres -c 'select version()' | cut -d, -f1)"
sql postgres -c "create database copy"
"$BIN" migrate --database-url "postgresql://postgres@127.0.0.1:$PORT/copy" --log-level warn
# The plain table: jobs_in's columns and defaults (the identity too), the
# id index and the lane index as jobs_in has them; nothing else.
sql copy -c "create table plain_jobs (like jobs_in including defaults including identity)" \
         -c "create index on plain_jobs (id)" \
         -c "create index on plain_jobs (queue, priority, ready_xid, id) where ready_xid <> '0'"
DATA=$(mktemp /tmp/aw-bench-copy.XXXXXX.tsv)
BENCH_CLEANUP+=("rm -f '$DATA'")
awk -v n="$N" 'BEGIN { for (i = 1; i <= n; i++) printf "noop\tdefault\t{\"n\": %d}\n", i }' >"$DATA"

declare -A RATES
for ((r = 1; r <= REPS; r++)); do
  for table in jobs_in plain_jobs; do
    sql copy -c "truncate $table" -c "checkpoint"
    t0=$(now)
    sql copy -c "\\copy $table (kind, queue, args) from '$DATA'"
    sec=$(fsub "$(now)" "$t0")
    [ "$(sql copy -c "select count(*) from $table")" = "$N" ] || die "$table holds a wrong count"
    jps=$(fdiv "$N" "$sec" 0)
    RATES[$table]+="$jps "
    echo "RESULT copy/$table/run$r jobs_per_sec=$jps seconds=$sec"
  done
done
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# shellcheck disable=SC2086
jobs_in=$(median ${RATES[jobs_in]})
# shellcheck disable=SC2086
plain=$(median ${RATES[plain_jobs]})
echo "RESULT copy/jobs_in jobs_per_sec=$jobs_in"
echo "RESULT copy/plain_jobs jobs_per_sec=$plain"
echo "RESULT copy/ratio jobs_in_over_plain=$(fdiv "$jobs_in" "$plain" 3)"
